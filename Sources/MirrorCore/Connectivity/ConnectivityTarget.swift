/// What the connectivity check connects to for a URL: the first thing a request to it talks
/// to. Every entry with the same target shares one outage: targets are equal when their
/// endpoints are, whatever their roles (one proxy named by both `http_proxy` and `https_proxy`
/// is one outage).
public struct ConnectivityTarget: Sendable, Hashable, CustomStringConvertible {
    public enum Role: Sendable, Hashable {
        /// The URL's own host.
        case host
        /// The manifest's `connectivity.probe`, standing in for every host.
        case probe
        /// The proxy the request goes through (named by `variable`).
        case proxy(variable: String)
    }

    public var endpoint: HostKey
    public var role: Role

    public init(endpoint: HostKey, role: Role) {
        self.endpoint = endpoint
        self.role = role
    }

    public static func == (lhs: ConnectivityTarget, rhs: ConnectivityTarget) -> Bool { lhs.endpoint == rhs.endpoint }
    public func hash(into hasher: inout Hasher) { hasher.combine(endpoint) }

    /// The target of requests to `url`, checked instead through `probe` when the manifest sets
    /// one; a proxy that `proxies` chooses for the URL checked is the target. Nil for a URL
    /// with no host (file://), which has no network to check.
    public init?(for url: RemoteURL, probe: RemoteURL?, proxies: ProxyEnvironment) {
        guard let own = HostKey(url) else { return nil }
        self.init(for: url, host: own, probe: probe, proxies: proxies)
    }

    /// The same, for a caller that has `HostKey(url)` already.
    init(for url: RemoteURL, host own: HostKey, probe: RemoteURL?, proxies: ProxyEnvironment) {
        let checked = probe ?? url
        if let proxy = proxies.proxy(for: checked.string) {
            self.init(endpoint: proxy.endpoint, role: .proxy(variable: proxy.variable))
        } else if let probe, let host = HostKey(probe) {
            self.init(endpoint: host, role: .probe)
        } else {
            self.init(endpoint: own, role: .host)
        }
    }

    /// `host:port`, or `proxy host:port (from VARIABLE)`: messages say when it is the proxy
    /// that does not answer, not the server behind it.
    public var description: String {
        switch role {
        case .host, .probe: return endpoint.description
        case .proxy(let variable): return "proxy \(endpoint) (from \(variable))"
        }
    }
}
