/// The text of a manifest, built from its parts in the order a person writes them:
/// `version: 1`, the root, top-level lines, then `files:` with one block per entry. Line and
/// column numbers in diagnostics follow from that order, so tests may count on them.
///
/// ```swift
/// let text = ManifestText(top: ["concurrency: 1"], entries: [
///     .init(server.url("/a.bin"), dest: "a.bin", "retries: 2"),
/// ])
/// ```
struct ManifestText: CustomStringConvertible, Sendable {
    /// One item of `files:`: its `url`, its `dest` when given, then its other keys.
    struct Entry: Sendable {
        var url: String
        var dest: String?
        /// `key: value` lines (nested lines indented further), written under the entry.
        var lines: [String]

        init(_ url: String, dest: String? = nil, _ lines: String...) {
            self.init(url, dest: dest, lines: lines)
        }

        init(_ url: String, dest: String? = nil, lines: [String]) {
            self.url = url
            self.dest = dest
            self.lines = lines
        }
    }

    /// The `root:` value; nil leaves the key out.
    var root: String?
    /// Top-level lines between `root:` and `files:`, as written (nested ones indented), e.g.
    /// `concurrency: 2` or `defaults:` followed by `  retries: 1`.
    var top: [String]
    var entries: [Entry]

    init(root: String? = "root", top: [String] = [], entries: [Entry]) {
        self.root = root
        self.top = top
        self.entries = entries
    }

    var text: String {
        var text = "version: 1\n"
        if let root { text += "root: \(root)\n" }
        for line in top { text += line + "\n" }
        text += "files:\n"
        for entry in entries {
            text += "  - url: \(entry.url)\n"
            if let dest = entry.dest { text += "    dest: \(dest)\n" }
            for line in entry.lines { text += "    \(line)\n" }
        }
        return text
    }

    var description: String { text }
}
