/// File system paths worked out from their text alone, never from the disk: symlinks are kept,
/// so `root` means what the manifest says even when it passes through a link.
enum LexicalPath {
    /// `path` made absolute (relative to `base` when it is relative) and normalised:
    /// no `.` components, `..` removes the component before it, no repeated or trailing `/`.
    /// `base` must be absolute.
    static func absolute(_ path: String, relativeTo base: String) -> String {
        normalised(path.startsWithSlash ? path : base + "/" + path)
    }

    /// An absolute `path` normalised as `absolute(_:relativeTo:)` describes. `..` at the top
    /// stays at `/`, as it does in the kernel.
    static func normalised(_ path: String) -> String {
        var components: [Substring] = []
        for component in path.slashSeparatedComponents {
            switch component {
            case ".": continue
            case "..": _ = components.popLast()
            default: components.append(component)
            }
        }
        return "/" + components.joined(separator: "/")
    }

    /// Whether the absolute, normalised `inner` is `outer` or lies below it, by their text.
    static func isWithin(_ inner: String, _ outer: String) -> Bool {
        inner == outer || outer == "/" || inner.hasPrefix(outer + "/")
    }

    /// The directory holding the file at the absolute, normalised `path`.
    static func directory(of path: String) -> String {
        guard let lastSlash = path.lastSlash, lastSlash != path.startIndex else { return "/" }
        return String(path[..<lastSlash])
    }
}
