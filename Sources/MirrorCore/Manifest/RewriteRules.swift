import Glibc

/// `rewrite:` (and the file `MIRROR_REWRITE` names): URL prefixes mapped to internal mirrors.
///
/// Applied once, as each entry is decoded (`rewrite(_:)`): the entry's `url` and `mirrors`
/// become the list of sources it is fetched from, the rewritten ones first, so that nothing of
/// the run — early connections, host limits, connectivity checks, probes, downloads — can reach
/// a host the rules replaced with `only: true`. The manifest's own URLs are kept for what names
/// the file rather than fetches it (`Entry.manifestURL`: the lock file, the checksum file's
/// name).
public struct RewriteRules: Sendable, Equatable {
    public private(set) var rules: [RewriteRule]

    public init(_ rules: [RewriteRule] = []) {
        self.rules = rules
    }

    public var isEmpty: Bool { rules.isEmpty }

    /// The rule for `url`: the one with the longest matching `from`; of equal ones, the first
    /// (the site's file is read before the manifest). Nil: none matches.
    func rule(for url: String) -> (rule: RewriteRule, remainder: Substring)? {
        guard !rules.isEmpty, let prefix = URLPrefix(url) else { return nil }
        return rule(for: prefix)
    }

    /// The same, for a URL already split.
    private func rule(for prefix: URLPrefix) -> (rule: RewriteRule, remainder: Substring)? {
        var best: (rule: RewriteRule, remainder: Substring)?
        for rule in rules {
            guard let remainder = rule.from.remainder(of: prefix) else { continue }
            if let best, best.rule.from.length >= rule.from.length { continue }
            best = (rule, remainder)
        }
        return best
    }

    /// Whether `url` is one an `only: true` rule keeps every run away from: a rule covers it,
    /// and none of that rule's own replacements does. Checked whatever rule rewrote it (a more
    /// specific rule, the manifest's under the site's, cannot open the host again) and at every
    /// redirect (`Fetcher`).
    public func forbids(_ url: String) -> Bool {
        guard hasOnlyRules else { return false }
        // A URL the rules cannot read might name any host: where a host is kept away from,
        // it is kept away from too.
        guard let prefix = URLPrefix(url) else { return true }
        return forbids(prefix)
    }

    /// The same, for a URL already split.
    private func forbids(_ prefix: URLPrefix) -> Bool {
        rules.contains { rule in
            rule.only && rule.from.remainder(of: prefix) != nil && !rule.targets.contains { $0.remainder(of: prefix) != nil }
        }
    }

    private var hasOnlyRules: Bool { rules.contains(where: \.only) }

    /// What a source is fetched from: its rewrites, or itself.
    struct Candidate: Equatable {
        var url: RemoteURL
        /// Set for a URL a rule made: which of the entry's headers it gets and the rule's own.
        var rewritten: RewrittenHeaders?
    }

    /// The headers of a URL a rule made.
    struct RewrittenHeaders: Equatable {
        /// It keeps its source's scheme, host and port: `defaults`' and the entry's headers
        /// (written for that host) go along. Otherwise none of them.
        var keepsEntryHeaders: Bool
        /// The rule's `headers`, over everything else.
        var rule: [HTTPHeader]

        /// What the URL is sent: `entry` (the headers its source would be sent) when it keeps
        /// its source's origin, else `host` (its own host's alone); the rule's over either.
        func headers(entry: [HTTPHeader], host: [HTTPHeader]) -> [HTTPHeader] {
            var merged = keepsEntryHeaders ? entry : host
            HeaderRules.merge(rule, over: &merged)
            return merged
        }
    }

    /// The URLs `sources` (a `url` and its `mirrors`, in order) are fetched from: every rewrite
    /// of each (in order), then each source the rules keep; none of them one `forbids`. Nil
    /// when no rule covers any source (the entry is left as it is); empty when every URL was
    /// forbidden.
    func candidates(for sources: [RemoteURL]) -> [Candidate]? {
        guard !rules.isEmpty else { return nil }
        let onlyRules = hasOnlyRules
        // Each URL split once: a rewritten one is its target's origin and the target's rest
        // followed by the source's remainder, which is how it was made.
        var rewritten: [(candidate: Candidate, prefix: URLPrefix?)] = []
        var kept: [(candidate: Candidate, prefix: URLPrefix?)] = []
        var matched = false
        for source in sources {
            let prefix = URLPrefix(source.string)
            guard let prefix, let (rule, remainder) = rule(for: prefix) else {
                kept.append((Candidate(url: source), prefix))
                // One no rule can read, where an `only` rule exists: left to the filter below.
                if onlyRules, prefix.map(forbids) ?? true { matched = true }
                continue
            }
            matched = true
            for (target, targetPrefix) in zip(rule.to, rule.targets) {
                let url = RemoteURL(
                    string: target.string + remainder, written: target.written + Self.writtenRemainder(of: source, rule: rule, remainder: remainder),
                    login: target.login)
                let sameOrigin = targetPrefix.hasOrigin(of: prefix)
                // A target with no path at all (`https://m`) has the rest `/` it does not write.
                let urlPrefix = targetPrefix.pathWasEmpty
                    ? URLPrefix(url.string) : URLPrefix(origin: targetPrefix.origin, rest: Substring(String(targetPrefix.rest) + remainder))
                rewritten.append((Candidate(url: url, rewritten: RewrittenHeaders(keepsEntryHeaders: sameOrigin, rule: rule.headers)), urlPrefix))
            }
            if !rule.only { kept.append((Candidate(url: source), prefix)) }
        }
        guard matched else { return nil }
        var seen = Set<String>()
        var list: [Candidate] = []
        for (candidate, prefix) in rewritten + kept {
            if onlyRules, prefix.map(forbids) ?? true { continue }
            if seen.insert(candidate.url.string).inserted { list.append(candidate) }
        }
        return list
    }

    /// Whether a rewrite of `source` would send, to a host other than its own, a query that
    /// holds a `${VAR}`'s value: a token in a query string was written for its host, as a
    /// header is (a variable in the path, a version, goes along). A variable that brings the
    /// `?` itself counts too.
    func sendsQueryVariable(of source: RemoteURL) -> Bool {
        guard source.written != source.string, let expandedQuery = Self.query(of: source.string) else { return false }
        if let writtenQuery = Self.query(of: source.written),
           VariableExpansion(expanding: String(writtenQuery), environment: [:]).referenced.isEmpty {
            return false
        }
        guard !expandedQuery.isEmpty, let prefix = URLPrefix(source.string), let (rule, _) = rule(for: prefix) else { return false }
        return rule.targets.contains { !$0.hasOrigin(of: prefix) }
    }

    /// The text after the first `?`, nil when there is none.
    private static func query(of url: String) -> Substring? {
        url.utf8.firstIndex(of: UInt8(ascii: "?")).map { url[url.index(after: $0)...] }
    }

    /// The text after the matched prefix as the manifest wrote it (so that a `${VAR}`'s value
    /// is printed nowhere a URL is shown): the written URL's own remainder when the rule
    /// matches it too, else the expanded remainder when the written URL ends with it, else
    /// `/…`.
    private static func writtenRemainder(of source: RemoteURL, rule: RewriteRule, remainder: Substring) -> String {
        let written = source.written
        if written == source.string { return String(remainder) }
        if let prefix = URLPrefix(written), let own = rule.from.remainder(of: prefix) { return String(own) }
        if written.utf8.reversed().starts(with: remainder.utf8.reversed()) { return String(remainder) }
        return "/…"
    }
}

/// One rule of `rewrite:`.
public struct RewriteRule: Sendable, Equatable {
    let from: URLPrefix
    /// `from` as written, userinfo redacted: for messages.
    public let fromDisplay: String
    /// `from` as the manifest wrote it (`${VAR}` unexpanded), for writing a manifest back.
    let fromWritten: String
    /// The replacement prefixes, tried in order, each with the netrc login of its host.
    let to: [RemoteURL]
    /// `to`, split as URLs are compared.
    let targets: [URLPrefix]
    /// The source itself is not tried: an air-gapped network's rule.
    public let only: Bool
    /// Sent with every request to a replacement, and to no other host.
    let headers: [HTTPHeader]
    public let location: SourceLocation

    init(from: URLPrefix, fromDisplay: String, fromWritten: String, to: [RemoteURL], only: Bool, headers: [HTTPHeader], location: SourceLocation) {
        self.from = from
        self.fromDisplay = fromDisplay
        self.fromWritten = fromWritten
        self.to = to
        targets = to.compactMap { URLPrefix($0.string) }
        self.only = only
        self.headers = headers
        self.location = location
    }

    public static func == (lhs: RewriteRule, rhs: RewriteRule) -> Bool {
        lhs.from == rhs.from && lhs.to == rhs.to && lhs.only == rhs.only
            && lhs.headers == rhs.headers && lhs.location == rhs.location
    }
}

/// A URL split where a rewrite compares it: its origin (scheme and authority, lowercased,
/// without userinfo, a trailing dot or a default port, the port as a number, an IPv6 address in
/// its one canonical form) and the rest (path and query, compared byte for byte; an empty path
/// is `/`, as it is requested).
struct URLPrefix: Sendable, Hashable {
    let origin: String
    let rest: Substring
    /// The URL had no path at all (`https://h`): its rest is `/`.
    let pathWasEmpty: Bool

    /// A prefix made of its parts (a rewritten URL's: its target's origin, and the target's
    /// rest followed by the rewritten URL's remainder).
    init(origin: String, rest: Substring) {
        self.origin = origin
        self.rest = rest
        pathWasEmpty = false
    }

    /// Nil: `url` has no `scheme://`, or a port that is not a number.
    init?(_ url: String) {
        guard let colon = url.utf8.firstIndex(of: UInt8(ascii: ":")) else { return nil }
        let afterColon = url[url.index(after: colon)...]
        guard afterColon.utf8.starts(with: "//".utf8) else { return nil }
        let scheme = url[..<colon].lowercased()
        let afterScheme = afterColon.dropFirst(2)
        let authorityEnd = afterScheme.utf8.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }
            ?? afterScheme.endIndex
        var authority = afterScheme[..<authorityEnd]
        if let at = authority.utf8.lastIndex(of: UInt8(ascii: "@")) { authority = authority[authority.index(after: at)...] }
        var host: Substring = authority
        var port: Int?
        let closing = authority.utf8.lastIndex(of: UInt8(ascii: "]"))
        if let portColon = authority.utf8.lastIndex(of: UInt8(ascii: ":")), closing.map({ portColon > $0 }) ?? true {
            host = authority[..<portColon]
            let digits = authority[authority.index(after: portColon)...]
            if !digits.isEmpty {
                guard digits.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
                // Leading zeros are no part of the number (libcurl reads `00443` as 443).
                let significant = digits.drop { $0 == "0" }
                guard significant.utf8.count <= 5, let number = Int(significant.isEmpty ? "0" : significant), number <= 65535 else { return nil }
                port = number
            }
        }
        var name = Self.percentDecoded(host).lowercased()
        if name.hasPrefix("["), name.hasSuffix("]") {
            name = "[" + Self.canonicalIPv6(String(name.dropFirst().dropLast())) + "]"
        } else {
            while name.utf8.last == UInt8(ascii: ".") { name.removeLast() }
            name = Self.canonicalIPv4(name) ?? name
        }
        if let port, port != Self.defaultPorts[scheme] { name += ":\(port)" }
        origin = scheme + "://" + name
        let rest = url[authorityEnd...]
        pathWasEmpty = rest.utf8.first != UInt8(ascii: "/")
        self.rest = pathWasEmpty ? Substring("/" + rest) : rest
    }

    private static let defaultPorts = ["http": 80, "https": 443, "ftp": 21, "ftps": 990]

    /// A host's `%XX` escapes decoded (ASCII only; anything else as written).
    private static func percentDecoded(_ host: Substring) -> String {
        guard host.utf8.contains(UInt8(ascii: "%")) else { return String(host) }
        var bytes: [UInt8] = []
        var rest = Array(host.utf8)[...]
        while let first = rest.first {
            if first == UInt8(ascii: "%"), rest.count >= 3, let value = UInt8(String(decoding: rest.dropFirst().prefix(2), as: UTF8.self), radix: 16), value < 0x80, value != 0 {
                bytes.append(value)
                rest = rest.dropFirst(3)
            } else {
                bytes.append(first)
                rest = rest.dropFirst()
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// An IPv4 address in any of the forms a URL parser takes (`127.1`, `0x7f.0.0.1`,
    /// `2130706433`) as four decimal numbers; nil for a name.
    private static func canonicalIPv4(_ host: String) -> String? {
        guard let first = host.utf8.first, first >= UInt8(ascii: "0"), first <= UInt8(ascii: "9"),
              host.utf8.allSatisfy({ ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9")) || ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "f")) || $0 == UInt8(ascii: "x") || $0 == UInt8(ascii: ".") })
        else { return nil }
        var address = in_addr()
        guard inet_aton(host, &address) != 0 else { return nil }
        let value = UInt32(bigEndian: address.s_addr)
        return "\(value >> 24).\((value >> 16) & 0xFF).\((value >> 8) & 0xFF).\(value & 0xFF)"
    }

    /// `address` as `inet_ntop` writes it (a zone after `%` kept as it is); as given when it is
    /// not an IPv6 address.
    private static func canonicalIPv6(_ address: String) -> String {
        if let percent = address.utf8.firstIndex(of: UInt8(ascii: "%")) {
            return canonicalIPv6(String(address[..<percent])) + String(address[percent...])
        }
        var bytes = in6_addr()
        guard inet_pton(AF_INET6, address, &bytes) == 1 else { return address }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard inet_ntop(AF_INET6, &bytes, &text, socklen_t(text.count)) != nil else { return address }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The prefix as bytes (origin, NUL, rest): two prefixes are one exactly when these are.
    var key: [UInt8] { Array(origin.utf8) + [0] + Array(rest.utf8) }

    /// How much of a URL the prefix covers, to find the most specific rule.
    var length: Int { origin.utf8.count + rest.utf8.count }

    /// Whether the prefix ends at a `/`: its replacement must too.
    var endsWithSlash: Bool { rest.utf8.last == UInt8(ascii: "/") }

    /// The text of `url` after this prefix, or nil when the prefix does not cover it. A prefix
    /// that does not end with `/` ends at a boundary of the URL's path: `https://h/a` covers
    /// `https://h/a/b` and `https://h/a?x`, not `https://h/ab`. Compared byte for byte.
    /// Whether `other` has this scheme, host and port, byte for byte.
    func hasOrigin(of other: URLPrefix) -> Bool {
        origin.utf8.elementsEqual(other.origin.utf8)
    }

    func remainder(of url: URLPrefix) -> Substring? {
        guard hasOrigin(of: url), url.rest.utf8.starts(with: rest.utf8) else { return nil }
        let remainder = url.rest[url.rest.utf8.index(url.rest.utf8.startIndex, offsetBy: rest.utf8.count)...]
        if rest.utf8.last == UInt8(ascii: "/") || remainder.isEmpty { return remainder }
        guard let next = remainder.utf8.first, next == UInt8(ascii: "/") || next == UInt8(ascii: "?") || next == UInt8(ascii: "#") else { return nil }
        return remainder
    }
}
