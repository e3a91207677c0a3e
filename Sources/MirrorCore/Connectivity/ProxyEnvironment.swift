import FoundationEssentials

/// The proxy a request goes through, chosen from the environment by libcurl's rules, so that a
/// transfer and the connectivity check before its retry agree on what they talk to:
///
/// - a host that `no_proxy` (or `NO_PROXY`) lists goes direct (see `NoProxyList`);
/// - otherwise `<scheme>_proxy` in lower case, then in upper case — except `HTTP_PROXY`,
///   never read (under CGI it is the request's `Proxy:` header) — then `all_proxy`, `ALL_PROXY`;
/// - an empty variable counts as unset.
///
/// The transfer engine is handed the choice (`CURLOPT_PROXY`) rather than letting libcurl read
/// the variables itself: one decision, one place.
public struct ProxyEnvironment: Sendable, Equatable {
    private var variables: [String: String]
    /// Some variable names a proxy (not only exceptions): otherwise every request goes direct,
    /// decided without parsing its URL (the case of nearly every run, on every request).
    private let namesAProxy: Bool

    /// Keeps only the proxy variables of `environment`.
    public init(_ environment: [String: String]) {
        variables = environment.filter { name, value in
            !value.isEmpty && (name.lowercased().hasSuffix("_proxy"))
        }
        namesAProxy = variables.keys.contains { $0 != "no_proxy" && $0 != "NO_PROXY" }
    }

    /// No proxy for anything.
    public static let direct = ProxyEnvironment([:])

    /// The variables of this process's environment.
    public static var ofThisProcess: ProxyEnvironment { ProxyEnvironment(ProcessInfo.processInfo.environment) }

    /// The proxy for a request to `url`; nil: direct.
    public func proxy(for url: String) -> Proxy? {
        guard namesAProxy, let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
              let host = components.host, !host.isEmpty, scheme != "file"
        else { return nil }
        if let exceptions = variables["no_proxy"] ?? variables["NO_PROXY"], NoProxyList(exceptions).excludes(host: host) {
            return nil
        }
        var names = [scheme + "_proxy"]
        if scheme != "http" { names.append(scheme.uppercased() + "_PROXY") }
        names += ["all_proxy", "ALL_PROXY"]
        guard let name = names.first(where: { variables[$0] != nil }), let value = variables[name] else { return nil }
        return Proxy(value, variable: name)
    }
}
