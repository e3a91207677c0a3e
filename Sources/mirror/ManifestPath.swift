import Glibc

/// The manifest's path as runs record it: the `manifest` label of `--metrics-file` and the
/// `manifest` of a `--report`.
enum ManifestPath {
    /// The file `path` names, through symbolic links and `..` (`realpath`), for a `--report`:
    /// shards of one run that reached one manifest by different paths (`link.yaml -> m.yaml`,
    /// `sub/up/m.yaml` with `up -> ..`) are then one run's. `absolute(path)` when it does not
    /// resolve (the manifest is missing).
    static func resolved(_ path: String) -> String {
        guard let real = realpath(path, nil) else { return absolute(path) }
        defer { free(real) }
        return String(cString: real)
    }

    /// `path` made absolute (not resolving symbolic links), so that runs from cron and from a
    /// shell in another directory name one manifest alike: the metrics label, which names a
    /// time series and so stays the path the user gave (a link switched to each new version of
    /// a manifest keeps one series).
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
