import Testing
@testable import MirrorCore

/// The proxy a request goes through, found as libcurl finds it: a table of environments,
/// URLs and the variable (and endpoint) chosen.
struct ProxyEnvironmentTests {
    struct Case: Sendable, CustomStringConvertible {
        var environment: [String: String]
        var url: String
        /// The variable chosen and the endpoint checked; nil: direct.
        var expected: (variable: String, host: String, port: Int)?
        var description: String { "\(url) with \(environment)" }
    }

    static let cases: [Case] = [
        Case(environment: [:], url: "http://a.example/x", expected: nil),
        Case(environment: ["http_proxy": "http://p:3128"], url: "http://a.example/x", expected: ("http_proxy", "p", 3128)),
        // HTTP_PROXY is never read (under CGI it is the client's Proxy: header).
        Case(environment: ["HTTP_PROXY": "http://p:3128"], url: "http://a.example/x", expected: nil),
        Case(environment: ["HTTPS_PROXY": "http://p:3128"], url: "https://a.example/x", expected: ("HTTPS_PROXY", "p", 3128)),
        Case(environment: ["https_proxy": "http://low:1", "HTTPS_PROXY": "http://up:2"], url: "https://a/x", expected: ("https_proxy", "low", 1)),
        Case(environment: ["http_proxy": "http://p:3128"], url: "https://a.example/x", expected: nil),
        Case(environment: ["all_proxy": "socks5h://s:9050"], url: "https://a.example/x", expected: ("all_proxy", "s", 9050)),
        Case(environment: ["ALL_PROXY": "p:8080"], url: "http://a.example/x", expected: ("ALL_PROXY", "p", 8080)),
        Case(environment: ["https_proxy": "http://p:1", "all_proxy": "http://q:2"], url: "https://a/x", expected: ("https_proxy", "p", 1)),
        Case(environment: ["ftp_proxy": "http://p:1"], url: "ftp://a/x", expected: ("ftp_proxy", "p", 1)),
        // No scheme: an HTTP proxy, on libcurl's default port 1080; https proxies default to 443.
        Case(environment: ["http_proxy": "p"], url: "http://a/x", expected: ("http_proxy", "p", 1080)),
        Case(environment: ["http_proxy": "https://p"], url: "http://a/x", expected: ("http_proxy", "p", 443)),
        Case(environment: ["http_proxy": "http://user:pw@[::1]:3128"], url: "http://a/x", expected: ("http_proxy", "::1", 3128)),
        // An empty variable counts as unset.
        Case(environment: ["https_proxy": "", "all_proxy": "http://q:2"], url: "https://a/x", expected: ("all_proxy", "q", 2)),
        // no_proxy: exact names, domains and their subdomains, case and trailing dots ignored.
        Case(environment: ["http_proxy": "http://p:1", "no_proxy": "example.org"], url: "http://example.org/x", expected: nil),
        Case(environment: ["http_proxy": "http://p:1", "no_proxy": "example.org"], url: "http://a.Example.ORG./x", expected: nil),
        Case(environment: ["http_proxy": "http://p:1", "no_proxy": ".example.org"], url: "http://example.org/x", expected: nil),
        Case(environment: ["http_proxy": "http://p:1", "no_proxy": "example.org"], url: "http://notexample.org/x", expected: ("http_proxy", "p", 1)),
        Case(environment: ["http_proxy": "http://p:1", "no_proxy": "other.net, example.org"], url: "http://a.example.org/x", expected: nil),
        Case(environment: ["http_proxy": "http://p:1", "NO_PROXY": "example.org"], url: "http://example.org/x", expected: nil),
        Case(environment: ["http_proxy": "http://p:1", "no_proxy": "*"], url: "http://anything/x", expected: nil),
        // "*" counts only alone.
        Case(environment: ["http_proxy": "http://p:1", "no_proxy": "*.example.org"], url: "http://a.example.org/x", expected: ("http_proxy", "p", 1)),
        // Addresses: equal, or within a CIDR range; a name is never resolved for this.
        Case(environment: ["http_proxy": "http://p:1", "no_proxy": "127.0.0.1"], url: "http://127.0.0.1:8080/x", expected: nil),
        Case(environment: ["http_proxy": "http://p:1", "no_proxy": "10.0.0.0/8"], url: "http://10.1.2.3/x", expected: nil),
        Case(environment: ["http_proxy": "http://p:1", "no_proxy": "10.0.0.0/8"], url: "http://11.1.2.3/x", expected: ("http_proxy", "p", 1)),
        Case(environment: ["http_proxy": "http://p:1", "no_proxy": "localhost"], url: "http://127.0.0.1/x", expected: ("http_proxy", "p", 1)),
        Case(environment: ["http_proxy": "http://p:1", "no_proxy": "0.0.1"], url: "http://10.0.0.1/x", expected: ("http_proxy", "p", 1)),
        Case(environment: ["http_proxy": "http://p:1", "no_proxy": "fd00::/8"], url: "http://[fd12::1]/x", expected: nil),
        Case(environment: ["http_proxy": "http://p:1", "no_proxy": "::1"], url: "http://[::1]:80/x", expected: nil),
        // file URLs never go through a proxy.
        Case(environment: ["all_proxy": "http://p:1"], url: "file:///etc/hosts", expected: nil),
    ]

    @Test(arguments: cases)
    func proxyFor(_ testCase: Case) {
        let proxy = ProxyEnvironment(testCase.environment).proxy(for: testCase.url)
        #expect(proxy?.variable == testCase.expected?.variable)
        #expect(proxy?.endpoint.host == testCase.expected?.host)
        #expect(proxy?.endpoint.port == testCase.expected?.port)
        if let proxy { #expect(proxy.url == testCase.environment[proxy.variable]) }
    }
}

/// What the connectivity check connects to: the proxy in use, else the probe, else the host.
struct ConnectivityTargetTests {
    static func url(_ text: String) -> RemoteURL { RemoteURL(string: text, written: text) }

    @Test func aProxyInUseIsTheTarget() throws {
        let proxies = ProxyEnvironment(["https_proxy": "http://127.0.0.1:3128"])
        let target = try #require(ConnectivityTarget(for: Self.url("https://origin.example/a"), probe: nil, proxies: proxies))
        #expect(target.endpoint == HostKey(host: "127.0.0.1", port: 3128))
        #expect(target.role == .proxy(variable: "https_proxy"))
        #expect(target.description == "proxy 127.0.0.1:3128 (from https_proxy)")
    }

    @Test func noProxyHostsAreCheckedDirectly() throws {
        let proxies = ProxyEnvironment(["https_proxy": "http://127.0.0.1:3128", "no_proxy": "origin.example"])
        let target = try #require(ConnectivityTarget(for: Self.url("https://origin.example/a"), probe: nil, proxies: proxies))
        #expect(target.endpoint == HostKey(host: "origin.example", port: 443))
        #expect(target.role == .host)
    }

    @Test func aProbeStandsInForEveryEntryThroughItsOwnProxy() throws {
        let probe = Self.url("https://probe.example/")
        let direct = try #require(ConnectivityTarget(for: Self.url("http://a/x"), probe: probe, proxies: .direct))
        #expect(direct.endpoint == HostKey(host: "probe.example", port: 443))
        #expect(direct.role == .probe)
        let proxied = try #require(ConnectivityTarget(
            for: Self.url("http://a/x"), probe: probe, proxies: ProxyEnvironment(["https_proxy": "http://p:8080"])))
        #expect(proxied.endpoint == HostKey(host: "p", port: 8080))
    }

    @Test func aFileURLHasNoTarget() {
        #expect(ConnectivityTarget(for: Self.url("file:///srv/a"), probe: Self.url("https://probe.example/"), proxies: .direct) == nil)
    }
}
