/// Writes `sha256` and `size` pins into a manifest's own text for `mirror lock`, keeping its
/// comments, order and layout: an existing value is replaced where it stands, a missing key is
/// added as a line at the end of its entry, with the entry's indentation. Everything else is
/// left byte for byte.
public enum ManifestPinWriter {
    public struct Pin: Sendable, Equatable {
        public var sha256: String
        public var size: Int64

        public init(sha256: String, size: Int64) {
            self.sha256 = sha256
            self.size = size
        }
    }

    /// - Parameters:
    ///   - text: the manifest's text, as `manifest` was loaded from.
    ///   - pins: by entry `dest`; every entry of `manifest` must have one.
    /// - Returns: the new text. It is checked by the caller by loading it again.
    public static func pin(text: String, manifest: Manifest, pins: [String: Pin]) throws(ManifestError) -> String {
        guard let document = try YAMLDocumentParser.parse(Array(text.utf8), file: manifest.path),
              case .mapping(let top) = document.content,
              let files = top.first(where: { $0.key.text == "files" })?.value,
              case .sequence(let items) = files.content
        else {
            throw ManifestError(diagnostics: [ManifestDiagnostic(location: nil, key: "files", message: "no `files` sequence to pin")])
        }
        var pinByLocation: [SourceLocation: Pin] = [:]
        for entry in manifest.entries {
            guard let pin = pins[entry.dest] else { continue }
            for location in [entry.location] + entry.repeatLocations { pinByLocation[location] = pin }
        }

        var edits: [Edit] = []
        for (index, item) in items.enumerated() {
            let location = SourceLocation(file: manifest.path, line: item.line, column: item.column)
            guard let pin = pinByLocation[location] else { continue }
            guard case .mapping(let pairs) = item.content, !item.isFlow, let last = pairs.last else {
                throw ManifestError(diagnostics: [ManifestDiagnostic(
                    location: location, key: "files[\(index)]",
                    message: "written in flow style ({…}); write the entry as a block mapping so mirror lock can add its pins")])
            }
            let values = [("sha256", pin.sha256), ("size", String(pin.size))]
            var added: [String] = []
            for (key, value) in values {
                if let existing = pairs.first(where: { $0.key.text == key })?.value {
                    edits.append(Edit(line: existing.line, column: existing.column,
                                      endLine: existing.endLine, endColumn: existing.endColumn, text: value))
                } else {
                    added.append(String(repeating: " ", count: item.column - 1) + "\(key): \(value)")
                }
            }
            if !added.isEmpty {
                edits.append(Edit(insertBeforeLine: lastContentLine(of: last.value) + 1, lines: added))
            }
        }
        return apply(edits, to: text)
    }

    /// The last line that holds any of the node's text. A block collection's end is where the
    /// next token starts, so it is found through its last child; a block scalar's end is the
    /// start of the line after it.
    private static func lastContentLine(of node: YAMLNode) -> Int {
        switch node.content {
        case .mapping(let pairs) where !node.isFlow && !pairs.isEmpty:
            return lastContentLine(of: pairs.last!.value)
        case .sequence(let items) where !node.isFlow && !items.isEmpty:
            return lastContentLine(of: items.last!)
        default:
            return node.endColumn == 1 && node.endLine > node.line ? node.endLine - 1 : node.endLine
        }
    }

    /// A replacement of the text between two positions, or lines inserted before a line.
    private struct Edit {
        var line: Int
        var column: Int
        var endLine: Int
        var endColumn: Int
        var text: String
        var insertedLines: [String]?

        init(line: Int, column: Int, endLine: Int, endColumn: Int, text: String) {
            self.line = line
            self.column = column
            self.endLine = endLine
            self.endColumn = endColumn
            self.text = text
        }

        init(insertBeforeLine line: Int, lines: [String]) {
            self.init(line: line, column: 1, endLine: line, endColumn: 1, text: "")
            insertedLines = lines
        }
    }

    /// Applies edits from the last to the first, so earlier positions stay valid. Lines and
    /// columns count Unicode scalars from 1, as libyaml reports them.
    private static func apply(_ edits: [Edit], to text: String) -> String {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { Array($0.unicodeScalars) }
        let sorted = edits.sorted { ($0.line, $0.column, $0.insertedLines == nil ? 1 : 0) > ($1.line, $1.column, $1.insertedLines == nil ? 1 : 0) }
        for edit in sorted {
            if let inserted = edit.insertedLines {
                var at = min(edit.line - 1, lines.count)
                // A file without a final newline: the last line is the empty string after it.
                if at == lines.count, lines.last?.isEmpty == false { lines.append([]); at = lines.count - 1 }
                lines.insert(contentsOf: inserted.map { Array($0.unicodeScalars) }, at: at)
                continue
            }
            let start = edit.line - 1, end = edit.endLine - 1
            guard start < lines.count, end < lines.count else { continue }
            let head = Array(lines[start].prefix(edit.column - 1))
            let tail = Array(lines[end].dropFirst(edit.endColumn - 1))
            lines.replaceSubrange(start...end, with: [head + Array(edit.text.unicodeScalars) + tail])
        }
        var result = String.UnicodeScalarView()
        for (index, line) in lines.enumerated() {
            if index > 0 { result.append("\n") }
            result.append(contentsOf: line)
        }
        return String(result)
    }
}

import Glibc

extension ManifestPinWriter {
    /// Fails, as `rewrite` would, when the manifest's text cannot take pins (flow-style
    /// entries), so that `mirror lock` can refuse before downloading anything.
    public static func checkPinnable(_ manifest: Manifest) throws(ManifestError) {
        let text = String(decoding: try ManifestLoader.readFile(at: manifest.path), as: UTF8.self)
        let placeholder = Pin(sha256: String(repeating: "0", count: 64), size: 0)
        _ = try pin(text: text, manifest: manifest, pins: Dictionary(uniqueKeysWithValues: manifest.entries.map { ($0.dest, placeholder) }))
    }

    /// Rewrites the manifest file with the pins: the new text must load as a manifest with
    /// exactly these pins, then it replaces the file atomically (same directory, fsync, rename,
    /// same permissions and owner; through a symlink, the file it points to). On any failure
    /// the manifest is left as it was.
    public static func rewrite(_ manifest: Manifest, pins: [String: Pin], environment: [String: String]) throws(ManifestError) {
        func failure(_ message: String) -> ManifestError {
            ManifestError(diagnostics: [ManifestDiagnostic(location: nil, key: nil, message: "\(manifest.path): \(message)")])
        }
        guard let resolved = realpath(manifest.path, nil) else { throw failure("cannot resolve: \(String(cString: strerror(errno)))") }
        let path = String(cString: resolved)
        free(resolved)
        let original = String(decoding: try ManifestLoader.readFile(at: path), as: UTF8.self)
        let updated = try pin(text: original, manifest: manifest, pins: pins)
        let slash = path.lastSlash
        let directory = slash.map { String(path[..<$0]) } ?? "."
        let reloaded = try ManifestLoader.parse(
            text: updated, path: path, baseDirectory: directory, rootOverride: manifest.root, environment: environment)
        for entry in reloaded.entries where pins[entry.dest] != Pin(sha256: entry.sha256 ?? "", size: entry.size ?? -1) {
            throw failure("the rewritten manifest does not pin \(entry.dest) as intended; it was left unchanged")
        }
        var info = stat()
        let mode = stat(path, &info) == 0 ? info.st_mode & 0o7777 : 0o644
        let temporary = path + ".mirror-lock.tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode)
        if fd < 0 { throw failure("cannot write \(temporary): \(String(cString: strerror(errno)))") }
        let bytes = Array(updated.utf8)
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + written, bytes.count - written) }
            if count < 0 {
                if errno == EINTR { continue }
                let reason = String(cString: strerror(errno))
                close(fd)
                unlink(temporary)
                throw failure("cannot write \(temporary): \(reason)")
            }
            written += count
        }
        _ = fchmod(fd, mode)
        _ = fchown(fd, info.st_uid, info.st_gid)
        if fsync(fd) != 0 || close(fd) != 0 || rename(temporary, path) != 0 {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw failure("cannot replace the manifest: \(reason)")
        }
        // The manifest is in place by now; a directory that cannot be fsync'd is not a reason
        // to report the pins unwritten.
        _ = FileSystem.syncDirectory(directory)
    }
}

extension ManifestRunner {
    /// The pins `mirror lock` writes: each entry's size and sha256 after a sync, hashing a
    /// file whose hash the sync did not need. Nil when an entry failed.
    public func pins(after reports: [EntryReport]) -> [String: ManifestPinWriter.Pin]? {
        var pins: [String: ManifestPinWriter.Pin] = [:]
        for (entry, report) in zip(manifest.entries, reports) {
            guard !report.failed, let size = report.size else { return nil }
            let sha256 = report.sha256 ?? (try? hashDestination(paths(for: entry)))
            guard let sha256 else { return nil }
            pins[entry.dest] = ManifestPinWriter.Pin(sha256: sha256, size: size)
        }
        return pins
    }
}
