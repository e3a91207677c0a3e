/// Writes a version-1 manifest of plain entries: what `mirror report --failed-manifest` makes of
/// the failed entries of several runs.
///
/// Every string is a YAML double-quoted scalar, so no value can change the document's
/// structure. URLs are written as the source manifest wrote them (`${VAR}` unexpanded, any
/// userinfo redacted as `***`): secrets stay in the environment and netrc, never in the file.
public enum ManifestWriter {
    public struct WrittenEntry: Sendable, Equatable {
        public var url: String
        public var mirrors: [String]
        public var dest: String
        /// The pinned digest: written as `sha256:` or `sha512:` by its length.
        public var digest: String?
        public var size: Int64?
        /// The checksum file that pins the entry (`checksums:`), as the manifest wrote it.
        public var checksums: String?
        public var checksumName: String?

        public init(
            url: String, mirrors: [String] = [], dest: String, digest: String? = nil, size: Int64? = nil,
            checksums: String? = nil, checksumName: String? = nil
        ) {
            self.checksums = checksums
            self.checksumName = checksumName
            self.url = url
            self.mirrors = mirrors
            self.dest = dest
            self.digest = digest
            self.size = size
        }
    }

    /// The manifest's text; `root` is absolute, so the file may live anywhere. `allowFile`
    /// is written when any URL is a `file://` one.
    public static func text(root: String, allowFile: Bool, entries: [WrittenEntry], comment: String? = nil) -> String {
        var text = ""
        if let comment {
            for line in comment.split(separator: "\n", omittingEmptySubsequences: false) { text += "# \(line)\n" }
        }
        text += "version: 1\n"
        text += "root: \(quoted(root))\n"
        if allowFile { text += "allow_file: true\n" }
        text += "files:\n"
        for entry in entries {
            text += "  - url: \(quoted(entry.url))\n"
            if !entry.mirrors.isEmpty {
                text += "    mirrors:\n"
                for mirror in entry.mirrors { text += "      - \(quoted(mirror))\n" }
            }
            text += "    dest: \(quoted(entry.dest))\n"
            if let digest = entry.digest {
                text += "    \((DigestAlgorithm(hexDigest: digest) ?? .sha256).key): \(quoted(digest))\n"
            }
            if let size = entry.size { text += "    size: \(size)\n" }
            if let checksums = entry.checksums { text += "    checksums: \(quoted(checksums))\n" }
            if let name = entry.checksumName { text += "    checksum_name: \(quoted(name))\n" }
        }
        return text
    }

    /// `value` as a YAML double-quoted scalar: `"` and `\` escaped, and every control
    /// character as `\xNN` (C0, DEL) or `\uNNNN` (C1, line and paragraph separators).
    static func quoted(_ value: String) -> String {
        var text = "\""
        for scalar in value.unicodeScalars {
            switch scalar.value {
            case 0x22: text += "\\\""
            case 0x5C: text += "\\\\"
            case 0..<0x20, 0x7F: text += "\\x" + hex(scalar.value, digits: 2)
            case 0x80..<0xA0, 0x2028, 0x2029, 0xFEFF: text += "\\u" + hex(scalar.value, digits: 4)
            default: text.unicodeScalars.append(scalar)
            }
        }
        return text + "\""
    }

    private static func hex(_ value: UInt32, digits: Int) -> String {
        let text = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }
}
