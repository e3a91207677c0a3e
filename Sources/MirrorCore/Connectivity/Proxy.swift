import FoundationEssentials

/// A proxy that requests go through, as a `*_proxy` variable names it.
public struct Proxy: Sendable, Equatable {
    /// The variable's value as written: what libcurl is given (`CURLOPT_PROXY`), credentials
    /// and all. Never printed.
    public var url: String
    /// Where the proxy listens: what the connectivity check connects to.
    public var endpoint: HostKey
    /// The variable it came from, e.g. `https_proxy`.
    public var variable: String

    /// Nil when `value` names no host.
    init?(_ value: String, variable: String) {
        // libcurl reads a value without a scheme as an HTTP proxy.
        let text = value.contains("://") ? value : "http://" + value
        guard let components = URLComponents(string: text), let host = components.host, !host.isEmpty else { return nil }
        let scheme = components.scheme?.lowercased() ?? "http"
        guard let port = components.port ?? Self.defaultPorts[scheme] else { return nil }
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        url = value
        endpoint = HostKey(host: bare, port: port)
        self.variable = variable
    }

    /// libcurl's default proxy ports: 1080 unless the proxy itself speaks TLS.
    private static let defaultPorts = [
        "http": 1080, "https": 443, "socks4": 1080, "socks4a": 1080, "socks5": 1080, "socks5h": 1080,
    ]
}
