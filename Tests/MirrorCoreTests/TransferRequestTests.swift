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

    /// libcurl's receive buffer follows what the reply is expected to carry: the usual 512 KiB
    /// for a body of unknown length, the recorded size and room for the head (in 16 KiB steps)
    /// for a conditional GET, the least for a HEAD.
    @Test(arguments: [
        (nil, 512 * 1024), (0, 16 * 1024), (1, 16 * 1024), (12 * 1024, 16 * 1024), (12 * 1024 + 1, 32 * 1024),
        (16 * 1024, 32 * 1024), (100_000, 7 * 16 * 1024), (512 * 1024 - 1, 512 * 1024), (512 * 1024, 512 * 1024),
        (10 << 20, 512 * 1024), (-5, 16 * 1024),
    ] as [(Int64?, Int)])
    func theReceiveBufferIsNoLargerThanTheExpectedBody(expected: Int64?, buffer: Int) {
        var request = TransferRequest(url: "https://a.test/f", method: .get)
        request.expectedBody = expected
        #expect(TransferContext.receiveBuffer(for: request) == buffer)
    }
}
