/// `hosts:` — settings for the requests to one host, or to one port of it.
public struct HostRule: Sendable, Equatable {
    /// How the manifest names it, normalised: `example.org`, `example.org:8443`, `[::1]:8080`.
    public var key: String
    /// Lowercased; an IPv6 address without its brackets.
    public var host: String
    /// Nil: every port of the host.
    public var port: Int?
    /// At most this many requests to the host at once.
    public var concurrency: Int?
    /// The bytes per second all transfers from the host may take together.
    public var rateLimit: RateLimit?
    /// Sent with every request to the host, between `defaults`' and the entry's own.
    public var headers: [HTTPHeader] = []

    public init(key: String, host: String, port: Int?) {
        self.key = key
        self.host = host
        self.port = port
    }
}

/// Every `hosts:` rule, looked up by the host a request goes to.
public struct HostRules: Sendable, Equatable {
    public private(set) var rules: [HostRule] = []

    public init(_ rules: [HostRule] = []) {
        self.rules = rules
    }

    public var isEmpty: Bool { rules.isEmpty }

    /// The rule for `host`: the one naming its host and port, else the one naming its host
    /// alone, else nil.
    public func rule(for host: HostKey) -> HostRule? {
        let name = host.host.lowercased()
        return rules.first { $0.host == name && $0.port == host.port } ?? rules.first { $0.host == name && $0.port == nil }
    }

    /// The `concurrency` of each rule that has one, by key.
    var concurrencyLimits: [String: Int] {
        Dictionary(uniqueKeysWithValues: rules.compactMap { rule in rule.concurrency.map { (rule.key, $0) } })
    }
}

/// How a key of `hosts:` is written: `host`, `host:port`, `[IPv6]` or `[IPv6]:port`; no scheme,
/// no path.
enum HostPatternSyntax {
    static func parse(_ text: String) throws(ValueProblem) -> (key: String, host: String, port: Int?) {
        if text.contains("/") || text.contains("@") || text.contains("?") {
            throw ValueProblem("`\(text)` is not a host; write a host name or address, optionally with `:port` (like `example.org` or `example.org:8443`), without scheme, login or path")
        }
        var host: Substring
        var portText: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else {
                throw ValueProblem("`\(text)` opens an IPv6 address with `[` but does not close it")
            }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":") else { throw ValueProblem("`\(text)`: expected `:port` after `]`") }
                portText = rest.dropFirst()
            }
        } else {
            let colons = text.count { $0 == ":" }
            if colons == 1, let colon = text.firstIndex(of: ":") {
                host = text[..<colon]
                portText = text[text.index(after: colon)...]
            } else {
                // Two colons or more: an IPv6 address, whose port needs brackets.
                host = Substring(text)
            }
        }
        guard !host.isEmpty else { throw ValueProblem("`\(text)` names no host") }
        guard host.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-._:%".contains($0)) }) else {
            throw ValueProblem("`\(text)` is not a host name or address (letters, digits, `-`, `.`, or an IPv6 address in brackets)")
        }
        var port: Int?
        if let portText {
            guard let number = Int(portText), portText.allSatisfy({ $0.isASCII && $0.isNumber }), (1...65535).contains(number) else {
                throw ValueProblem("`\(text)`: the port must be a number from 1 to 65535")
            }
            port = number
        }
        let name = host.lowercased()
        let shown = name.contains(":") ? "[\(name)]" : name
        return (port.map { "\(shown):\($0)" } ?? shown, name, port)
    }
}
