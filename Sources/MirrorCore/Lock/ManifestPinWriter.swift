/// Writes digest (`sha256` or `sha512`) and `size` pins into a manifest's own text for
/// `mirror lock`, keeping its comments, order, layout and line endings: an existing value is
/// replaced where it stands (a digest of the other algorithm, key and value), a missing key is
/// added as a line at the end of its entry, with the entry's indentation.
/// Everything else is left byte for byte. Edits are placed by libyaml's own character offsets
/// (see `ManifestTextEdit`).
public enum ManifestPinWriter {
    public struct Pin: Sendable, Equatable {
        /// Lowercase hex; its length names the algorithm, and so the key written.
        public var digest: String
        public var size: Int64

        public init(digest: String, size: Int64) {
            self.digest = digest
            self.size = size
        }

        /// `sha256` or `sha512`.
        public var digestKey: String { (DigestAlgorithm(hexDigest: digest) ?? .sha256).key }
    }

    /// - Parameters:
    ///   - text: the manifest's text, as `manifest` was loaded from.
    ///   - pins: by entry `dest`; every entry of `manifest` must have one.
    /// - Returns: the new text. It is checked by the caller by loading it again.
    /// - Throws: `ManifestError` naming the place that cannot be edited: an entry in flow style
    ///   or written as an alias, a value carrying an anchor, `files` itself an alias.
    public static func pin(text: String, manifest: Manifest, pins: [String: Pin]) throws(ManifestError) -> String {
        String(decoding: try pin(Array(text.utf8), manifest: manifest, pins: pins), as: UTF8.self)
    }

    static func pin(_ bytes: [UInt8], manifest: Manifest, pins: [String: Pin]) throws(ManifestError) -> [UInt8] {
        func refusal(_ line: Int, _ column: Int, _ key: String?, _ message: String) -> ManifestError {
            ManifestError(ManifestDiagnostic(
                location: SourceLocation(file: manifest.path, line: line, column: column), key: key, message: message))
        }
        if bytes.starts(with: [0xFE, 0xFF]) || bytes.starts(with: [0xFF, 0xFE]) {
            throw refusal(1, 1, nil, "the manifest is UTF-16 text; mirror lock edits UTF-8 manifests only: convert it (iconv -f UTF-16 -t UTF-8)")
        }
        guard let document = try YAMLDocumentParser.parse(bytes, file: manifest.path),
              case .mapping(let top) = document.content,
              let files = top.first(where: { $0.key.text == "files" })?.value
        else {
            throw ManifestError(ManifestDiagnostic(location: nil, key: "files", message: "no `files` sequence to pin"))
        }
        if let alias = files.alias {
            throw refusal(alias.line, alias.column, "files", """
                `files` is the alias `*\(alias.name)`; mirror lock can only pin entries written out \
                in full: write the list here
                """)
        }
        guard case .sequence(let items) = files.content else {
            throw refusal(files.line, files.column, "files", "no `files` sequence to pin")
        }
        var pinByLocation: [SourceLocation: Pin] = [:]
        for entry in manifest.entries {
            guard let pin = pins[entry.dest] else { continue }
            for location in [entry.location] + entry.repeatLocations { pinByLocation[location] = pin }
        }

        var edits: [ManifestTextEdit] = []
        for (index, item) in items.enumerated() {
            let key = "files[\(index)]"
            // An alias's copy carries the anchored entry's location, so it is refused before
            // being looked up: its pins would land in the other entry's text.
            if let alias = item.alias {
                throw refusal(alias.line, alias.column, key, """
                    this entry is the alias `*\(alias.name)` of the entry at line \(item.line); \
                    mirror lock can only pin entries written out in full: write it out, or remove it \
                    if it only repeats that entry
                    """)
            }
            let location = SourceLocation(file: manifest.path, line: item.line, column: item.column)
            guard let pin = pinByLocation[location] else { continue }
            guard case .mapping(let pairs) = item.content, !item.isFlow, let first = pairs.first, let last = pairs.last else {
                throw refusal(item.line, item.column, key, """
                    written in flow style ({…}); write the entry as a block mapping so mirror lock can add its pins
                    """)
            }
            var added: [String] = []
            // A digest of the other algorithm is the entry's digest pin all the same: it is
            // replaced, key and value, for an entry has at most one.
            let digestKeys = DigestAlgorithm.allCases.map(\.key)
            if let other = pairs.first(where: { digestKeys.contains($0.key.text ?? "") && $0.key.text != pin.digestKey }) {
                guard other.key.alias == nil, !other.key.hasAnchor else {
                    throw refusal(other.key.line, other.key.column, "\(key).\(other.key.text ?? "")", """
                        the key is an alias or carries an anchor, so mirror lock cannot replace it with `\(pin.digestKey)`
                        """)
                }
                edits.append(.replace(other.key.characterRange, with: pin.digestKey))
            }
            for (name, value) in [(pin.digestKey, pin.digest), ("size", String(pin.size))] {
                let names = name == pin.digestKey ? digestKeys : [name]
                guard let existing = pairs.first(where: { names.contains($0.key.text ?? "") })?.value else {
                    added.append("\(name): \(value)")
                    continue
                }
                if let alias = existing.alias {
                    edits.append(.replace(alias.characterRange, with: value))
                } else if existing.hasAnchor {
                    throw refusal(existing.line, existing.column, "\(key).\(name)", """
                        the value carries an anchor (`&…`) that aliases elsewhere may refer to, so \
                        mirror lock cannot replace it: remove the anchor
                        """)
                } else {
                    edits.append(.replace(existing.characterRange, with: value))
                }
            }
            if !added.isEmpty {
                // Block mapping keys all stand at the column of the first one.
                let indentation = (first.key.alias?.column ?? first.key.column) - 1
                edits.append(.insertLines(added, indentation: indentation, afterContentEndingAt: contentEnd(of: last.value)))
            }
        }
        return ManifestTextEdit.apply(edits, to: bytes)
    }

    /// The character offset where the last text of a node ends. A block collection's end is
    /// where the next token starts, so it is found through its last child; an alias's copy ends
    /// where the alias does.
    private static func contentEnd(of node: YAMLNode) -> Int {
        if let alias = node.alias { return alias.characterRange.upperBound }
        switch node.content {
        case .mapping(let pairs) where !node.isFlow && !pairs.isEmpty:
            return contentEnd(of: pairs.last!.value)
        case .sequence(let items) where !node.isFlow && !items.isEmpty:
            return contentEnd(of: items.last!)
        default:
            return node.characterRange.upperBound
        }
    }
}

import Glibc

extension ManifestPinWriter {
    /// Fails, as `rewrite` would, when the manifest's text cannot take pins, so that
    /// `mirror lock` can refuse before downloading anything: the text is pinned with placeholder
    /// values and loaded again, with the same checks as `rewrite`.
    public static func checkPinnable(_ manifest: Manifest, environment: [String: String]) throws(ManifestError) {
        let pins = Dictionary(
            manifest.entries.map { ($0.dest, Pin(digest: String(repeating: "0", count: $0.digestAlgorithm.hexLength), size: 0)) },
            uniquingKeysWith: { first, _ in first })
        let path = try resolvedPath(of: manifest)
        _ = try checkedPinnedText(try ManifestLoader.readFile(at: path), manifest: manifest, pins: pins, environment: environment)
    }

    /// Rewrites the manifest file with the pins. The new text must load as the very manifest
    /// that was loaded, entry by entry, but for the pins (`PinnedManifestCheck`); then it
    /// replaces the file atomically (same directory, fsync, rename, same permissions and owner;
    /// through a symlink, the file it points to). On any failure the manifest is left as it was.
    public static func rewrite(_ manifest: Manifest, pins: [String: Pin], environment: [String: String]) throws(ManifestError) {
        func failure(_ message: String) -> ManifestError {
            ManifestError(diagnostics: [ManifestDiagnostic(location: nil, key: nil, message: "\(manifest.path): \(message)")])
        }
        let path = try resolvedPath(of: manifest)
        let bytes = try checkedPinnedText(
            try ManifestLoader.readFile(at: path), manifest: manifest, pins: pins, environment: environment)
        do {
            // Only a regular file is replaced, keeping its permissions and owner.
            try OutputFile(path: path, accepts: .regularFile).write(bytes)
        } catch {
            throw failure("cannot replace the manifest: \(error)")
        }
    }

    /// The file the manifest's path names, through any symlinks.
    private static func resolvedPath(of manifest: Manifest) throws(ManifestError) -> String {
        guard let resolved = realpath(manifest.path, nil) else {
            throw ManifestError(diagnostics: [ManifestDiagnostic(
                location: nil, key: nil, message: "\(manifest.path): cannot resolve: \(String(cString: strerror(errno)))")])
        }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// `bytes` (the text `manifest` was loaded from) with the pins, once they load as
    /// `manifest` with the pins and nothing else changed.
    static func checkedPinnedText(
        _ bytes: [UInt8], manifest: Manifest, pins: [String: Pin], environment: [String: String]
    ) throws(ManifestError) -> [UInt8] {
        let updated = try pin(bytes, manifest: manifest, pins: pins)
        let reloaded: Manifest
        do throws(ManifestError) {
            reloaded = try ManifestLoader.decode(
                updated, path: manifest.path,
                // The root and state directory are the ones already resolved; `ca_file` and the
                // CA variables resolve from where the first load resolved them.
                rootResolution: .init(
                    manifestDirectory: manifest.manifestDirectory, override: manifest.root,
                    currentDirectory: manifest.currentDirectory, stateDirectoryOverride: manifest.stateDirectory),
                environment: environment)
        } catch {
            // Its positions are in text that was never written: only the problem is named.
            let problem = error.diagnostics.first.map { ($0.key.map { "\($0): " } ?? "") + $0.message } ?? "\(error)"
            throw ManifestError(ManifestDiagnostic(location: nil, key: nil, message: """
                \(manifest.path): mirror lock cannot pin this manifest safely: with the pins written \
                it would not load (\(problem)); it was left unchanged
                """))
        }
        try PinnedManifestCheck.check(reloaded, against: manifest, pins: pins)
        return updated
    }
}
