import FoundationEssentials

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
        self.init(url: url.string)
        if !Self.text(url.display, contains: host) { label = "<host>" }
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
