import FoundationEssentials
import Synchronization

/// The host a URL talks to, for the per-host waits (Retry-After pauses, network outages):
/// scheme, host and port, with the scheme's default port filled in.
public struct HostKey: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int
    /// How messages name the host: `<host>` when the manifest wrote it as a `${VAR}`.
    public var label: String

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
        label = host
    }

    /// The host of a manifest URL, labelled so that a host written as `${VAR}` is not printed.
    public init?(_ url: RemoteURL) {
        self.init(url, display: url.display)
    }

    /// The same, for a caller that has `url.display` already.
    init?(_ url: RemoteURL, display: String) {
        self.init(url: url.string)
        if !Self.text(display, contains: host) { label = "<host>" }
    }

    /// Whether the bytes of `part` occur in `text`: whether the host is written out in the
    /// manifest's URL.
    private static func text(_ text: String, contains part: String) -> Bool {
        var text = text
        var part = part
        return text.withUTF8 { text in
            part.withUTF8 { part in
                guard part.count <= text.count else { return false }
                return (0...text.count - part.count).contains { start in
                    text[start..<start + part.count].elementsEqual(part)
                }
            }
        }
    }

    public static func == (lhs: HostKey, rhs: HostKey) -> Bool { lhs.host == rhs.host && lhs.port == rhs.port }
    public func hash(into hasher: inout Hasher) {
        hasher.combine(host)
        hasher.combine(port)
    }

    private static let defaultPorts = ["http": 80, "https": 443, "ftp": 21, "ftps": 990]

    /// Nil for URLs with no host (file://).
    public init?(url: String) {
        // The host and port depend only on the URL's `scheme://authority`: a run's thousands
        // of URLs to one server share it, and parsing each whole URL again (URLComponents,
        // about 10,000 instructions) was a measurable part of an entry's cost.
        let prefix = Self.schemeAndAuthority(of: url)
        if let prefix, let known = Self.known.withLock({ $0.find(prefix) }) {
            self = known
            return
        }
        // Only a URL that parses is remembered: one whose path URLComponents refuses says
        // nothing of the others of its server.
        guard let parsed = Self(parsing: url) else { return nil }
        if let prefix { Self.known.withLock { $0.remember(parsed, for: prefix) } }
        self = parsed
    }

    /// Hosts already parsed, by `scheme://authority`.
    private static let known = Mutex(KnownByPrefix<HostKey>())

    /// `scheme://authority` of `url`, up to the first `/`, `?` or `#` after `//`; nil when it
    /// has no `//`.
    static func schemeAndAuthority(of url: String) -> Substring? {
        // On the contiguous bytes: walking `url.utf8` by its indices cost more than the
        // dictionary lookup the prefix is for (1,300 instructions a URL).
        var text = url
        guard let end = text.withUTF8({ bytes -> Int? in
            guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), bytes.count >= colon + 3, bytes[colon + 1] == UInt8(ascii: "/"), bytes[colon + 2] == UInt8(ascii: "/")
            else { return nil }
            var index = colon + 3
            while index < bytes.count, bytes[index] != UInt8(ascii: "/"), bytes[index] != UInt8(ascii: "?"), bytes[index] != UInt8(ascii: "#") {
                index += 1
            }
            return index
        }) else { return nil }
        let utf8 = url.utf8
        return url[url.startIndex..<utf8.index(utf8.startIndex, offsetBy: end)]
    }

    private init?(parsing url: String) {
        guard let components = URLComponents(string: url), let host = components.host, !host.isEmpty,
              let scheme = components.scheme?.lowercased()
        else { return nil }
        guard let port = components.port ?? Self.defaultPorts[scheme] else { return nil }
        // URLComponents keeps the brackets of an IPv6 literal; getaddrinfo wants them off.
        self.host = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        self.port = port
        label = self.host
    }

    public var description: String { label.contains(":") ? "[\(label)]:\(port)" : "\(label):\(port)" }
}

/// What was made of URLs by their `scheme://authority` (at most `limit` of them), and the last
/// one asked for: a run's URLs mostly share one, found by comparing its bytes, without hashing
/// the prefix again. Prefixes are kept as copies, not as the caller's slices, which would keep
/// their whole URLs alive.
struct KnownByPrefix<Value> {
    private var byPrefix: [Substring: Value] = [:]
    private var last: (prefix: Substring, value: Value)?
    static var limit: Int { 4096 }

    mutating func find(_ prefix: Substring) -> Value? {
        if let last, SameBytes.of(last.prefix, prefix) { return last.value }
        guard let value = byPrefix[prefix] else { return nil }
        last = (Substring(String(prefix)), value)
        return value
    }

    mutating func remember(_ value: Value, for prefix: Substring) {
        if byPrefix.count < Self.limit { byPrefix[Substring(String(prefix))] = value }
    }
}
