/// The mappings of a version 1 manifest and the keys each one allows.
enum ManifestSection: CaseIterable {
    case topLevel
    case defaults
    case connectivity
    case entry
    case host
    case rewrite
    /// The file `MIRROR_REWRITE` names.
    case rewriteFile

    static let transferKeys = ["retries", "timeout", "headers", "insecure", "ftp_tls", "max_size", "min_speed", "min_speed_time", "ca_file", "checksums", "segment_min"]
    // Made once: every mapping of the manifest looks its keys up here.
    private static let topLevelKeys = ["version", "root", "state_dir", "cache", "cache_place", "cache_max_size", "cache_max_age", "concurrency", "defaults", "connectivity", "allow_file", "prune", "rate_limit", "segment_min", "hosts", "rewrite", "files"]
    private static let connectivityKeys = ["probe", "wait"]
    private static let entryKeys = ["url", "dest", "sha256", "size", "mirrors", "rate_limit"] + transferKeys + ["sha512", "checksum_name"]
    private static let hostKeys = ["concurrency", "rate_limit", "headers"]
    private static let rewriteKeys = ["from", "to", "only", "headers"]

    /// Bit `i` stands for `allowedKeys[i]`: which of the transfer keys the section allows.
    var transferKeyBits: UInt64 {
        switch self {
        case .defaults: Self.defaultsTransferKeyBits
        case .entry: Self.entryTransferKeyBits
        case .topLevel, .connectivity, .host, .rewrite, .rewriteFile: 0
        }
    }

    private static let defaultsTransferKeyBits = bits(of: transferKeys, in: transferKeys)
    private static let entryTransferKeyBits = bits(of: transferKeys, in: entryKeys)

    private static func bits(of keys: [String], in allowed: [String]) -> UInt64 {
        allowed.indices.reduce(0) { keys.contains(allowed[$1]) ? $0 | 1 << UInt64($1) : $0 }
    }

    var allowedKeys: [String] {
        switch self {
        case .topLevel: Self.topLevelKeys
        case .defaults: Self.transferKeys
        case .connectivity: Self.connectivityKeys
        case .entry: Self.entryKeys
        case .host: Self.hostKeys
        case .rewrite: Self.rewriteKeys
        case .rewriteFile: ["rewrite"]
        }
    }

    /// How the section is named in messages.
    var name: String {
        switch self {
        case .topLevel: "the top level"
        case .defaults: "`defaults`"
        case .connectivity: "`connectivity`"
        case .entry: "an entry of `files`"
        case .host: "a host of `hosts`"
        case .rewrite: "a rule of `rewrite`"
        case .rewriteFile: "a file of rewrite rules"
        }
    }

    /// Why `key` is not allowed here, with the likeliest fix: the key it is a typo of, the
    /// section it belongs in, or else the keys this section allows.
    func unknownKeyMessage(_ key: String) -> String {
        if self == .defaults, key == "rate_limit" {
            return "`rate_limit` is not allowed in `defaults`, where it would limit each entry on its own; set it at the top level to limit the whole run, on a host in `hosts`, or on an entry"
        }
        if let suggestion = KeySuggestion.closest(to: key, among: allowedKeys) {
            return "unknown key `\(key)`; did you mean `\(suggestion)`?"
        }
        if let home = Self.allCases.first(where: { $0 != self && $0.allowedKeys.contains(key) }) {
            return "`\(key)` is not allowed in \(name); it belongs in \(home == .defaults && self == .topLevel ? "`defaults` (or in an entry)" : home.name)"
        }
        let list = allowedKeys.map { "`\($0)`" }.joined(separator: ", ")
        return "unknown key `\(key)` in \(name); allowed keys are \(list)"
    }
}
