import Testing
@testable import MirrorCore

/// `TransferRequest.usesTLS`: which requests keep the engine's loop to its short sleep.
struct TransferRequestTests {
    @Test func requestsOverTLSAreThoseWithAnHTTPSOrFTPSURLOrProxy() {
        func request(_ url: String, proxy: String? = nil) -> TransferRequest {
            var request = TransferRequest(url: url, method: .head)
            request.proxy = proxy
            return request
        }
        #expect(request("https://a.test/").usesTLS)
        #expect(request("ftps://a.test/").usesTLS)
        #expect(request("HTTPS://a.test/").usesTLS)
        #expect(request("http://a.test/", proxy: "https://proxy.test:3128").usesTLS)
        #expect(!request("http://a.test/").usesTLS)
        #expect(!request("http://a.test/", proxy: "http://proxy.test:3128").usesTLS)
        #expect(!request("file:///x").usesTLS)
        var explicit = request("ftp://a.test/f")
        #expect(!explicit.usesTLS)
        explicit.ftpTLS = .try
        #expect(explicit.usesTLS, "AUTH TLS on an ftp: URL")
        explicit.ftpTLS = .required
        #expect(explicit.usesTLS)
    }

    /// A URL's scheme is read on its bytes when it is ASCII; it must be what reading Characters
    /// finds: everything before the first `:` Character, lowercased.
    @Test(arguments: [
        "https://a.test/", "HTTPS://a.test/", "Ftp://a.test/", "file:///x", "no-colon", ":leading", "http:", "",
        "hTtP://a.test:8080/x:y", "sch\u{E9}me://a.test/", "ab:\u{301}cd:ef", "\u{301}:x", "a\r\n:b",
    ])
    func theSchemeIsWhatCharactersSay(url: String) {
        let characters = url.firstIndex(of: ":").map { url[..<$0].lowercased() } ?? ""
        #expect(RemoteProbe.scheme(of: url) == characters)
    }
}
