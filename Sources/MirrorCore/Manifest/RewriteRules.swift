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
        var best: (rule: RewriteRule, remainder: Substring)?
        for rule in rules {
            guard let remainder = rule.from.remainder(of: prefix) else { continue }
            if let best, best.rule.from.length >= rule.from.length { continue }
            best = (rule, remainder)
        }
        return best
    }

    /// What a source is fetched from: its rewrites, or itself.
    struct Candidate: Equatable {
        var url: RemoteURL
        /// The request headers of a rewritten URL, which replace the entry's; nil: the entry's.
        var headers: [HTTPHeader]?
    }

    /// The URLs `sources` (a `url` and its `mirrors`, in order) are fetched from: every rewrite
    /// of each (in order), then each source no `only` rule replaced. Empty when no rule
    /// matches any of them.
    ///
    /// - Parameter headers: the entry's request headers (`defaults`' and its own). They go to a
    ///   rewritten URL only when it keeps its source's scheme, host and port: they were written
    ///   for that host. A rule's own `headers` go to its replacements alone.
    func candidates(for sources: [RemoteURL], headers: [HTTPHeader]) -> [Candidate] {
        var rewritten: [Candidate] = []
        var kept: [Candidate] = []
        var matched = false
        for source in sources {
            guard let (rule, remainder) = rule(for: source.string) else {
                kept.append(Candidate(url: source))
                continue
            }
            matched = true
            let origin = URLPrefix(source.string)?.origin
            for target in rule.to {
                let url = RemoteURL(
                    string: target.string + remainder, written: target.written + Self.writtenRemainder(of: source, rule: rule, remainder: remainder),
                    login: target.login)
                var sent = URLPrefix(url.string)?.origin == origin ? headers : []
                HeaderRules.merge(rule.headers, over: &sent)
                rewritten.append(Candidate(url: url, headers: sent))
            }
            if !rule.only { kept.append(Candidate(url: source)) }
        }
        guard matched else { return [] }
        var seen = Set<String>()
        return (rewritten + kept).filter { seen.insert($0.url.string).inserted }
    }

    /// The text after the matched prefix as the manifest wrote it (so that a `${VAR}`'s value
    /// is printed nowhere a URL is shown): the written URL's own remainder when the rule
    /// matches it too, else the expanded remainder when the written URL ends with it, else
    /// `/…`.
    private static func writtenRemainder(of source: RemoteURL, rule: RewriteRule, remainder: Substring) -> String {
        let written = source.written
        if written == source.string { return String(remainder) }
        if let prefix = URLPrefix(written), let own = rule.from.remainder(of: prefix) { return String(own) }
        if written.hasSuffix(remainder) { return String(remainder) }
        return "/…"
    }
}

/// One rule of `rewrite:`.
public struct RewriteRule: Sendable, Equatable {
    let from: URLPrefix
    /// `from` as written, userinfo redacted: for messages.
    public let fromDisplay: String
    /// The replacement prefixes, tried in order, each with the netrc login of its host.
    let to: [RemoteURL]
    /// The source itself is not tried: an air-gapped network's rule.
    public let only: Bool
    /// Sent with every request to a replacement, and to no other host.
    let headers: [HTTPHeader]
    public let location: SourceLocation

    init(from: URLPrefix, fromDisplay: String, to: [RemoteURL], only: Bool, headers: [HTTPHeader], location: SourceLocation) {
        self.from = from
        self.fromDisplay = fromDisplay
        self.to = to
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
/// without userinfo or a default port) and the rest (path and query, compared exactly).
struct URLPrefix: Sendable, Hashable {
    let origin: String
    let rest: Substring

    /// Nil: `url` has no `scheme://`.
    init?(_ url: String) {
        guard let colon = url.firstIndex(of: ":") else { return nil }
        let afterColon = url[url.index(after: colon)...]
        guard afterColon.hasPrefix("//") else { return nil }
        let scheme = url[..<colon].lowercased()
        let afterScheme = afterColon.dropFirst(2)
        let authorityEnd: String.Index = afterScheme.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? afterScheme.endIndex
        var authority: Substring = afterScheme[..<authorityEnd]
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        var host: String = authority.lowercased()
        if let port = Self.defaultPorts[scheme], host.hasSuffix(port) { host.removeLast(port.count) }
        origin = scheme + "://" + host
        rest = url[authorityEnd...]
    }

    private static let defaultPorts = ["http": ":80", "https": ":443", "ftp": ":21"]

    /// How much of a URL the prefix covers, to find the most specific rule.
    var length: Int { origin.utf8.count + rest.utf8.count }

    /// Whether the prefix ends at a `/`: its replacement must too.
    var endsWithSlash: Bool { rest.isEmpty ? false : rest.last == "/" }

    /// The text of `url` after this prefix, or nil when the prefix does not cover it. A prefix
    /// that does not end with `/` ends at a boundary of the URL's path: `https://h/a` covers
    /// `https://h/a/b` and `https://h/a?x`, not `https://h/ab`.
    func remainder(of url: URLPrefix) -> Substring? {
        guard url.origin == origin, url.rest.hasPrefix(rest) else { return nil }
        let remainder = url.rest.dropFirst(rest.count)
        if rest.isEmpty || rest.last == "/" || remainder.isEmpty { return remainder }
        guard let next = remainder.first, next == "/" || next == "?" || next == "#" else { return nil }
        return remainder
    }
}
