import Glibc

/// The manifest's path as runs record it: the `manifest` label of `--metrics-file` and the
/// `manifest` of a `--report`.
enum ManifestPath {
    /// `path` made absolute (not resolving symbolic links), so that runs from cron and from a
    /// shell in another directory name one manifest alike.
    static func absolute(_ path: String) -> String {
        guard !path.hasPrefix("/") else { return path }
        guard let directory = getcwd(nil, 0) else { return path }
        defer { free(directory) }
        var relative = Substring(path)
        while relative.hasPrefix("./") { relative = relative.dropFirst(2) }
        let base = String(cString: directory)
        return (base.hasSuffix("/") ? base : base + "/") + relative
    }
}
