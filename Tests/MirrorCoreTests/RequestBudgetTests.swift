import Testing
@testable import MirrorCore

/// `RequestBudget`: which budget each request takes, as a table.
struct RequestBudgetTests {
    private static let large = RequestBudget.largeBody

    struct Row: Sendable, CustomStringConvertible {
        var request: RequestBudget.Request
        var origin: RequestBudget.OriginProtocol
        var multiplexable: Bool
        var expected: RequestBudget
        var why: String
        var description: String { why }
    }

    static let rows: [Row] = [
        Row(request: .light, origin: .http2, multiplexable: true, expected: .stream,
            why: "a probe, a conditional or unsized GET to an HTTP/2 origin rides on its connection"),
        Row(request: .body(0), origin: .http2, multiplexable: true, expected: .stream, why: "an empty body is small"),
        Row(request: .body(large - 1), origin: .http2, multiplexable: true, expected: .stream, why: "just under the large size"),
        Row(request: .body(large), origin: .http2, multiplexable: true, expected: .connection, why: "a large body is a large transfer"),
        Row(request: .body(.max), origin: .http2, multiplexable: true, expected: .connection, why: "the largest body"),
        Row(request: .light, origin: .unknown, multiplexable: true, expected: .connection,
            why: "before the origin's first reply: the connection budget"),
        Row(request: .body(10), origin: .unknown, multiplexable: true, expected: .connection, why: "small, but the origin is not known yet"),
        Row(request: .light, origin: .http1, multiplexable: true, expected: .connection, why: "HTTP/1.1: one request per connection"),
        Row(request: .body(10), origin: .http1, multiplexable: true, expected: .connection, why: "a small GET over HTTP/1.1"),
        Row(request: .light, origin: .http2, multiplexable: false, expected: .connection,
            why: "not multiplexable (http://, ftp, file:, a rate limit): never a stream"),
        Row(request: .body(10), origin: .http2, multiplexable: false, expected: .connection, why: "a small rate-limited GET"),
    ]

    @Test(arguments: rows)
    func chooses(_ row: Row) {
        #expect(RequestBudget.choose(row.request, origin: row.origin, multiplexable: row.multiplexable) == row.expected, "\(row.why)")
    }

    /// Until an origin has answered, its first `spread` requests open connections of their
    /// own, so that as many are ready when it turns out to speak HTTP/2; every other request
    /// waits for a connection being set up.
    @Test func theFirstRequestsToAnOriginNotHeardYetOpenItsConnections() {
        let cases: [(origin: RequestBudget.OriginProtocol, opened: Int, spread: Int, waits: Bool, why: String)] = [
            (.unknown, 0, 4, false, "the first request opens the first connection"),
            (.unknown, 3, 4, false, "the fourth opens the fourth"),
            (.unknown, 4, 4, true, "the fifth waits for one of those"),
            (.unknown, 9, 4, true, "and every one after it"),
            (.unknown, 0, 1, false, "a spread of one: one opener"),
            (.unknown, 1, 1, true, "then waiting"),
            (.unknown, 0, 0, false, "no spread counts as one"),
            (.http2, 0, 4, true, "an HTTP/2 origin: every request waits and rides on a connection"),
            (.http1, 0, 4, true, "an HTTP/1.1 origin: waiting is libcurl's no-op there"),
        ]
        for row in cases {
            #expect(RequestBudget.waitsForConnection(origin: row.origin, openedWhileUnknown: row.opened, spread: row.spread) == row.waits, "\(row.why)")
        }
    }

    @Test func aReplyOnAStreamKeepsItOnlyWithASmallStatedBody() {
        let cases: [(status: Int, length: Int64?, stays: Bool, why: String)] = [
            (200, 1000, true, "a small file"),
            (206, Self.large - 1, true, "a small remainder"),
            (200, Self.large, false, "a large file needs a connection"),
            (206, Self.large * 4, false, "a large remainder"),
            (200, nil, false, "no stated length: it may be anything"),
            (304, nil, true, "not modified: no body"),
            (302, nil, true, "a redirect's body is read and dropped"),
            (404, nil, true, "an error page is small and dropped"),
            (503, 1 << 30, true, "an error's body is dropped, whatever it says"),
        ]
        for item in cases {
            #expect(RequestBudget.staysOnStream(status: item.status, bodyLength: item.length) == item.stays, "\(item.why)")
        }
    }

    @Test func onlyHTTPSWithoutARateLimitMayShareAConnection() {
        #expect(RequestBudget.multiplexes(url: "https://example.org/a", rateLimited: false))
        #expect(RequestBudget.multiplexes(url: "HTTPS://example.org/a", rateLimited: false))
        #expect(!RequestBudget.multiplexes(url: "https://example.org/a", rateLimited: true), "a rate limit forces HTTP/1.1")
        #expect(!RequestBudget.multiplexes(url: "http://example.org/a", rateLimited: false), "no ALPN, no HTTP/2 offered")
        #expect(!RequestBudget.multiplexes(url: "ftp://example.org/a", rateLimited: false))
        #expect(!RequestBudget.multiplexes(url: "file:///tmp/a", rateLimited: false))
    }

    /// The six-byte check answers as the scheme's text does, for every case and near miss.
    @Test(arguments: [
        "https://example.org/a", "HTTPS://example.org/a", "hTtPs://x", "https:", "https:x", "https", "http://x",
        "httpsx://x", "http:s//x", "ht:tps://x", "ftps://x", "", ":https://x", "https\u{301}://x", "\u{FF48}ttps://x",
        "Https://[::1]:8443/", "https//x", " https://x",
    ])
    func theHTTPSCheckAgreesWithTheScheme(url: String) {
        #expect(RequestBudget.isHTTPS(url) == (RemoteProbe.scheme(of: url) == "https"), "\(url)")
    }

    @Test func anOriginIsItsSchemeHostPortAndProxy() throws {
        let plain = try #require(OriginKey(url: "https://Example.org/a", proxy: nil))
        #expect(plain == OriginKey(url: "https://example.org:443/b", proxy: nil), "default port and case")
        #expect(plain != OriginKey(url: "https://example.org:8443/a", proxy: nil))
        #expect(plain != OriginKey(url: "http://example.org/a", proxy: nil))
        #expect(plain != OriginKey(url: "https://example.org/a", proxy: "http://proxy:3128"), "through a proxy is another way there")
        #expect(OriginKey(url: "file:///tmp/a", proxy: nil) == nil)
    }

    /// Origins without a proxy are remembered by `scheme://authority`: asked again, in any
    /// order, each URL still gets its own, and one through a proxy never stands for one without.
    @Test func rememberedOriginsStayTheirURLsOwn() throws {
        let cases: [(url: String, proxy: String?, description: String)] = [
            ("https://Origin-Cache.test/a", nil, "https://origin-cache.test:443"),
            ("https://origin-cache.test/a", "http://proxy:3128", "https://origin-cache.test:443 via http://proxy:3128"),
            ("https://origin-cache.test:8443/b?c", nil, "https://origin-cache.test:8443"),
            ("HTTP://origin-cache.test/d", nil, "http://origin-cache.test:80"),
            ("https://u:p@origin-cache.test/e", nil, "https://origin-cache.test:443"),
        ]
        for _ in 0..<2 {
            for (url, proxy, description) in cases + cases.reversed() {
                #expect(OriginKey(url: url, proxy: proxy)?.description == description, "\(url) via \(proxy ?? "nothing")")
            }
        }
    }

    /// 100 streams per connection, spread over at most 4 of the origin's connections.
    @Test(arguments: [(1, 100), (2, 200), (4, 400), (8, 400), (64, 400), (0, 100)])
    func anOriginsStreamsSpreadOverFewConnections(_ connections: Int, _ budget: Int) {
        #expect(RequestBudget.streamBudget(connections: connections) == budget)
    }

    /// A run keeps room for entries that may ride on HTTP/2 streams only when one of its URLs,
    /// an entry's or a mirror's, is https: a manifest of http URLs alone starts no more entries
    /// than its connections take.
    @Test(arguments: [
        ("  - url: http://127.0.0.1:1/a\n  - url: http://127.0.0.1:1/b\n    mirrors: [http://127.0.0.1:2/b]\n", false),
        ("  - url: http://127.0.0.1:1/a\n    mirrors: [https://127.0.0.1:2/a]\n", true),
        ("  - url: http://127.0.0.1:1/a\n  - url: https://127.0.0.1:1/b\n", true),
    ])
    func roomForStreamsOnlyWhereAnURLIsHTTPS(_ files: String, _ room: Bool) throws {
        let manifest = try SyncScenario().load(text: "version: 1\nroot: ./root\nfiles:\n" + files)
        #expect(SyncRun.mayRideOnStreams(manifest.entries) == room)
    }
}
