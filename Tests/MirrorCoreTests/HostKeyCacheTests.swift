import Testing
@testable import MirrorCore

/// `HostKey(url:)` remembers what it parsed by `scheme://authority`: every URL must still get
/// the host and port its own authority names, whatever was parsed before it.
struct HostKeyCacheTests {
    @Test(arguments: [
        ("https://example.org/a/b?c#d", "https://example.org"),
        ("https://example.org", "https://example.org"),
        ("http://user:pw@example.org:8080?q", "http://user:pw@example.org:8080"),
        ("http://[::1]:81#frag", "http://[::1]:81"),
        ("ftp://host/dir/", "ftp://host"),
        ("http://bücher.example/ä?ö", "http://bücher.example"),
        ("http://", "http://"),
    ])
    func theAuthorityEndsAtThePathQueryOrFragment(url: String, prefix: String) {
        #expect(HostKey.schemeAndAuthority(of: url).map(String.init) == prefix)
    }

    @Test(arguments: ["file:///etc/hosts", "mailto:a@b", "no-colon", "http:/one-slash", "http:", "http:/"])
    func urlsWithoutAnAuthorityHaveNoPrefix(url: String) {
        if url.hasPrefix("file:") {
            #expect(HostKey.schemeAndAuthority(of: url) == "file://", "an empty authority")
        } else {
            #expect(HostKey.schemeAndAuthority(of: url) == nil)
        }
    }

    @Test func eachURLGetsItsOwnAuthoritysHostAndPortTwice() throws {
        let cases: [(String, String, Int)] = [
            ("http://a.test/x", "a.test", 80),
            ("http://a.test:8080/x", "a.test", 8080),
            ("https://a.test/x", "a.test", 443),
            ("https://[2001:db8::1]:8443/y", "2001:db8::1", 8443),
            ("ftps://b.test/z", "b.test", 990),
            ("http://u:p@a.test/x", "a.test", 80),
        ]
        for _ in 0..<2 { // the second pass answers from what the first remembered
            for (url, host, port) in cases {
                let key = try #require(HostKey(url: url), "\(url)")
                #expect(key.host == host && key.port == port, "\(url)")
                let other = try #require(HostKey(url: url + "/more?and#more"))
                #expect(other == key && other.label == key.label)
            }
        }
        #expect(HostKey(url: "file:///etc/hosts") == nil)
        #expect(HostKey(url: "gopher://a.test/") == nil, "no default port known")
    }
}
