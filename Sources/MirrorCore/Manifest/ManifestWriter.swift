/// Writes a version-1 manifest of plain entries: what `mirror report --failed-manifest` makes of
/// the failed entries of several runs.
///
/// Every string is a YAML double-quoted scalar, so no value can change the document's
/// structure. Values are written as the source manifest wrote them (`${VAR}` unexpanded):
/// secrets stay in the environment and netrc, never in the file; a password written literally
/// in a URL, and the literal value of a header whose name says it carries a credential, are
/// left out (see `WrittenEntry`).
public enum ManifestWriter {
    /// An entry as its manifest wrote it, with every setting that a manifest of its own needs
    /// to fetch and check it as the first run did: `url`, `mirrors`, `dest`, the pins, the
    /// checksum file and the request headers (the entry's own over `defaults`').
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
        /// Names and values as written, in the order requests send them; without the headers
        /// in `withheldHeaders`.
        public var headers: [Header]
        /// The names of the credential headers (`mayCarryACredential`) whose value the manifest
        /// wrote literally, with no `${VAR}` in it, left out: such a value is a token
        /// (`Authorization: Bearer …`). Other headers (`Accept`) stay, or a retry could be
        /// answered with another representation.
        public var withheldHeaders: [String]
        /// `ftp_tls` when it is not `no`: a retry without it would log in in the clear.
        public var ftpTLS: String?
        /// A password written literally in `url`, a mirror or `checksums` was left out: the
        /// entry needs it put back (or given by `${VAR}` or netrc) to log in as before.
        public var withheldPassword: Bool

        public struct Header: Sendable, Equatable {
            public var name: String
            public var value: String

            public init(name: String, value: String) {
                self.name = name
                self.value = value
            }
        }

        public init(
            url: String, mirrors: [String] = [], dest: String, digest: String? = nil, size: Int64? = nil,
            checksums: String? = nil, checksumName: String? = nil, headers: [Header] = [], withheldPassword: Bool = false,
            withheldHeaders: [String] = [], ftpTLS: String? = nil
        ) {
            self.url = url
            self.mirrors = mirrors
            self.dest = dest
            self.digest = digest
            self.size = size
            self.checksums = checksums
            self.checksumName = checksumName
            self.headers = headers
            self.withheldPassword = withheldPassword
            self.withheldHeaders = withheldHeaders
            self.ftpTLS = ftpTLS
        }

        /// `entry` as its manifest wrote it: `${VAR}` references unexpanded, never a value
        /// from the environment or netrc; a password written literally in a URL, and a header
        /// value with no `${VAR}` reference, left out.
        public init(_ entry: Entry) {
            var passwords = LiteralPasswords()
            self.init(
                url: passwords.written(entry.manifestURL), mirrors: entry.manifestMirrors.map { passwords.written($0) }, dest: entry.dest,
                digest: entry.digest, size: entry.size, checksums: entry.settings.checksums.map { passwords.written($0) },
                checksumName: entry.checksumName,
                headers: [])
            withheldPassword = passwords.withheld
            ftpTLS = entry.settings.ftpTLS == .no ? nil : entry.settings.ftpTLS.rawValue
            (headers, withheldHeaders) = Self.written(entry.settings.headers)
        }

        /// URLs as their manifest wrote them, each without a password written literally in it
        /// (`withheld`: one was left out).
        struct LiteralPasswords {
            private(set) var withheld = false

            mutating func written(_ url: RemoteURL) -> String {
                let kept = RemoteURL.withholdingLiteralPassword(in: url.written)
                withheld = withheld || kept.withheld
                return kept.text
            }
        }

        /// `headers` as written, but for the credential headers whose value is written
        /// literally (`mayCarryACredential`, no `${VAR}`): those are named, left out.
        static func written(_ headers: [HTTPHeader]) -> (kept: [Header], withheld: [String]) {
            var kept: [Header] = []
            var withheld: [String] = []
            for header in headers {
                if !mayCarryACredential(header.name) || holdsAReference(header.written) {
                    kept.append(Header(name: header.name, value: header.written))
                } else {
                    withheld.append(header.name)
                }
            }
            return (kept, withheld)
        }

        /// Whether a header of this name may carry a credential: `Authorization`,
        /// `Proxy-Authorization`, `Cookie`, or a name with `token`, `key`, `secret`, `auth`,
        /// `pass`, `session`, `signature` or `credential` in it (`X-Api-Key`, `PRIVATE-TOKEN`).
        static func mayCarryACredential(_ name: String) -> Bool {
            let name = name.lowercased()
            return name == "cookie" || ["token", "key", "secret", "auth", "pass", "session", "signature", "credential"]
                .contains { name.contains($0) }
        }

        /// Whether `value` names a variable: what it sends then comes, at least in part, from
        /// the environment, where a secret belongs (`Bearer ${TOKEN}`).
        static func holdsAReference(_ value: String) -> Bool {
            !VariableExpansion(expanding: value, environment: [:]).referenced.isEmpty
        }
    }

    /// A `rewrite:` rule of the manifest as it wrote it: a retry of its failed entries must
    /// reach the mirrors the first run did, and never a host an `only` rule kept it from.
    /// Written as `WrittenEntry` writes: a literal password in a URL and a literal credential
    /// header left out.
    public struct WrittenRule: Sendable, Equatable {
        public var from: String
        public var to: [String]
        public var only: Bool
        public var headers: [WrittenEntry.Header]
        public var withheldHeaders: [String]
        public var withheldPassword: Bool

        public init(
            from: String, to: [String], only: Bool, headers: [WrittenEntry.Header] = [], withheldHeaders: [String] = [],
            withheldPassword: Bool = false
        ) {
            self.from = from
            self.to = to
            self.only = only
            self.headers = headers
            self.withheldHeaders = withheldHeaders
            self.withheldPassword = withheldPassword
        }

        public init(_ rule: RewriteRule) {
            var passwords = WrittenEntry.LiteralPasswords()
            let to = rule.to.map { passwords.written($0) }
            let (kept, withheldHeaders) = WrittenEntry.written(rule.headers)
            self.init(from: rule.fromWritten, to: to, only: rule.only, headers: kept, withheldHeaders: withheldHeaders,
                      withheldPassword: passwords.withheld)
        }

        /// The rules `manifest` wrote itself (not a site's `MIRROR_REWRITE`, which a retry
        /// reads from its environment as the run did).
        public static func own(of manifest: Manifest) -> [WrittenRule] {
            manifest.rewrites.rules.filter { $0.location.file == manifest.path }.map(WrittenRule.init)
        }
    }

    /// The manifest's text; `root` and `stateDirectory` are absolute, so the file may live
    /// anywhere. `allowFile`
    /// is written when any URL is a `file://` one.
    public static func text(
        root: String, stateDirectory: String? = nil, allowFile: Bool, rewrites: [WrittenRule] = [], entries: [WrittenEntry],
        comment: String? = nil
    ) -> String {
        var text = ""
        if let comment {
            for line in comment.split(separator: "\n", omittingEmptySubsequences: false) { text += "# \(line)\n" }
        }
        text += "version: 1\n"
        text += "root: \(quoted(literally(root)))\n"
        if let stateDirectory { text += "state_dir: \(quoted(literally(stateDirectory)))\n" }
        if allowFile { text += "allow_file: true\n" }
        if !rewrites.isEmpty {
            text += "rewrite:\n"
            for rule in rewrites {
                text += withheldComment(
                    password: rule.withheldPassword ? "The manifest gave a replacement of this rule a password," : nil, headers: rule.withheldHeaders)
                text += "  - from: \(quoted(rule.from))\n"
                text += "    to:\n"
                for target in rule.to { text += "      - \(quoted(target))\n" }
                if rule.only { text += "    only: true\n" }
                if !rule.headers.isEmpty {
                    text += "    headers:\n"
                    for header in rule.headers { text += "      \(quoted(header.name)): \(quoted(header.value))\n" }
                }
            }
        }
        text += "files:\n"
        for entry in entries {
            text += withheldComment(
                password: entry.withheldPassword ? "The manifest gave a URL of this entry a password (or a user name alone, which may be a token),\n  #" : nil,
                headers: entry.withheldHeaders)
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
            if let ftpTLS = entry.ftpTLS { text += "    ftp_tls: \(quoted(ftpTLS))\n" }
            if !entry.headers.isEmpty {
                text += "    headers:\n"
                for header in entry.headers { text += "      \(quoted(header.name)): \(quoted(header.value))\n" }
            }
        }
        return text
    }

    /// The comment above an entry or rule that a report left a secret out of: `password` says
    /// whose password it was.
    private static func withheldComment(password: String?, headers: [String]) -> String {
        var text = ""
        if let password {
            text += "  # \(password) which reports never hold: put it back,\n"
            text += "  # or give it as ${VAR} or in ~/.netrc.\n"
        }
        if !headers.isEmpty {
            let names = headers.map { quoted($0) }.joined(separator: ", ")
            text += "  # The manifest wrote the value of \(names) in the file, which reports never hold: put it back,\n"
            text += "  # or give it as ${VAR}.\n"
        }
        return text
    }

    /// A path the loader will read as written, although it expands `${VAR}` in these keys: each
    /// `$` doubled (`/data/$x` would be an error, `/data/${X}` another directory).
    static func literally(_ path: String) -> String {
        var text = ""
        for character in path { text += character == "$" ? "$$" : String(character) }
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
