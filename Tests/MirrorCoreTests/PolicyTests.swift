import Glibc
import Testing
@testable import MirrorCore

struct RetryPolicyTests {
    @Test func ceilingDoublesUpToTheCap() {
        let policy = RetryPolicy(base: .seconds(1), cap: .seconds(10))
        #expect((1...6).map { policy.ceiling(afterAttempt: $0) } == [.seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(10), .seconds(10)])
    }

    @Test func fullJitterScalesTheCeiling() {
        let policy = RetryPolicy(base: .seconds(1), cap: .seconds(60))
        #expect(policy.delay(afterAttempt: 3, unitRandom: 0) == .zero)
        #expect(policy.delay(afterAttempt: 3, unitRandom: 0.5) == .seconds(2))
        #expect(policy.delay(afterAttempt: 3, unitRandom: 1) == .seconds(4))
        #expect(policy.delay(afterAttempt: 3, unitRandom: 7) == .seconds(4))
    }

    @Test(arguments: [
        (TransferFailure.httpStatus(503), true), (.httpStatus(429), true), (.httpStatus(408), true),
        (.httpStatus(500), true), (.httpStatus(404), false), (.httpStatus(410), false), (.httpStatus(401), false),
        (.httpStatus(403), false), (.curl(code: 7, message: "", osErrno: 0), true),
        (.curl(code: 28, message: "", osErrno: 0), true), (.curl(code: 60, message: "", osErrno: 0), false),
        (.partialBody(received: 1, expected: 2), true), (.checksumMismatch(expected: "a", actual: "b"), true),
        (.bodyTooLarge(limit: 3), false), (.localIO(path: "/x", operation: "write", errno: 28), false),
        (.cancelled, false),
        (.checksumMismatchUnchanged(expected: "a", actual: "b", served: RemoteValidators(etag: "\"v\"", lastModified: nil, size: 1)), false),
        (.contradictoryReply("Content-Length `99999999999999999999` is not a number of bytes"), true),
    ])
    func classification(_ failure: TransferFailure, _ retryable: Bool) {
        #expect(failure.isRetryable == retryable)
    }

    struct PinMismatchCase: Sendable, CustomTestStringConvertible {
        var name: String
        var wholeFile = true
        var before: RemoteValidators?
        var served: RemoteValidators
        var retried: Bool
        var testDescription: String { name }
    }

    static let v1 = RemoteValidators(etag: "\"v1\"", lastModified: "Sun, 06 Nov 1994 08:49:37 GMT", size: 100)

    /// `TransferFailure.pinMismatch`, the one decision whether a download that fails its pin is
    /// fetched again: only when the server's version moved during the attempt, or when the
    /// attempt resumed bytes of an earlier one.
    @Test(arguments: [
        PinMismatchCase(name: "a first download: nothing known before the reply", before: nil, served: v1, retried: false),
        PinMismatchCase(name: "the reply names the probed version", before: v1, served: v1, retried: false),
        PinMismatchCase(name: "the same ETag, weak in the reply", before: v1,
                        served: RemoteValidators(etag: "W/\"v1\"", lastModified: v1.lastModified, size: 100), retried: false),
        PinMismatchCase(name: "the probe gave no size", before: RemoteValidators(etag: "\"v1\"", lastModified: v1.lastModified, size: nil),
                        served: v1, retried: false),
        PinMismatchCase(name: "the ETag moved", before: v1,
                        served: RemoteValidators(etag: "\"v2\"", lastModified: v1.lastModified, size: 100), retried: true),
        PinMismatchCase(name: "Last-Modified moved", before: v1,
                        served: RemoteValidators(etag: "\"v1\"", lastModified: "Mon, 07 Nov 1994 08:49:37 GMT", size: 100), retried: true),
        PinMismatchCase(name: "the size moved", before: v1,
                        served: RemoteValidators(etag: "\"v1\"", lastModified: v1.lastModified, size: 101), retried: true),
        PinMismatchCase(name: "the server stopped naming versions by ETag", before: RemoteValidators(etag: "\"v1\"", lastModified: nil, size: 100),
                        served: RemoteValidators(etag: nil, lastModified: v1.lastModified, size: 100), retried: true),
        PinMismatchCase(name: "no validators at all, the same size", before: RemoteValidators(etag: nil, lastModified: nil, size: 100),
                        served: RemoteValidators(etag: nil, lastModified: nil, size: 100), retried: false),
        PinMismatchCase(name: "no validators at all, another size", before: RemoteValidators(etag: nil, lastModified: nil, size: 100),
                        served: RemoteValidators(etag: nil, lastModified: nil, size: 90), retried: true),
        PinMismatchCase(name: "a resumed download of the same version", wholeFile: false, before: v1, served: v1, retried: true),
        PinMismatchCase(name: "a resumed download, nothing known before", wholeFile: false, before: nil, served: v1, retried: true),
    ])
    func aPinMismatchIsRetriedOnlyWhenTheVersionMoved(_ row: PinMismatchCase) {
        let pin = String(repeating: "a", count: 64), got = String(repeating: "b", count: 64)
        let failure = TransferFailure.pinMismatch(expected: pin, actual: got, served: row.served, before: row.before, wholeFile: row.wholeFile)
        #expect(failure.isRetryable == row.retried)
        #expect(failure == (row.retried
            ? .checksumMismatch(expected: pin, actual: got)
            : .checksumMismatchUnchanged(expected: pin, actual: got, served: row.served)))
        if !row.retried {
            // Both digests and what the server said of its version, for the person who reads it.
            let message = failure.description
            // Unchanged when a validator says so; from a server that names no version, only
            // that nothing showed a change.
            let unnamed = row.served.etag == nil && row.served.lastModified == nil
            let stayed = unnamed ? "nothing showed the server's file change during the download" : "did not change during the download"
            #expect(message.contains(pin) && message.contains(got) && message.contains(stayed), "\(message)")
            if let etag = row.served.etag { #expect(message.contains("ETag \(etag)")) }
            if let size = row.served.size { #expect(message.contains("\(size) bytes")) }
        }
    }

    @Test func onlyFailuresBelowHTTPPutTheNetworkInDoubt() {
        #expect(TransferFailure.curl(code: 7, message: "", osErrno: 0).isNetworkLevel)
        #expect(TransferFailure.curl(code: 6, message: "", osErrno: 0).isNetworkLevel)
        #expect(!TransferFailure.httpStatus(503).isNetworkLevel)
        #expect(!TransferFailure.curl(code: 60, message: "", osErrno: 0).isNetworkLevel)
    }

    /// A refused connection proves the network works: it is the entry's failure, retried with
    /// backoff, never an outage. An unreachable route or a timeout is not an answer.
    @Test func aRefusedConnectionIsNotAnOutage() {
        let refused = TransferFailure.curl(code: 7, message: "Failed to connect", osErrno: ECONNREFUSED)
        #expect(!refused.isNetworkLevel)
        #expect(refused.isRetryable)
        #expect(TransferFailure.curl(code: 7, message: "Failed to connect", osErrno: ENETUNREACH).isNetworkLevel)
        #expect(TransferFailure.curl(code: 7, message: "Failed to connect", osErrno: EHOSTUNREACH).isNetworkLevel)
        #expect(TransferFailure.curl(code: 28, message: "Connection timed out", osErrno: ETIMEDOUT).isNetworkLevel)
    }
}

struct RedirectRuleTests {
    @Test(arguments: [
        ("http://a/x", "http://a/y", "http", RedirectRule.follow(url: "http://a/y", sameOrigin: true)),
        ("http://a/x", "https://a/y", "http", .follow(url: "https://a/y", sameOrigin: false)),
        ("http://a/x", "http://b/y", "http", .follow(url: "http://b/y", sameOrigin: false)),
        ("http://a/x", "http://a:8080/y", "http", .follow(url: "http://a:8080/y", sameOrigin: false)),
        ("http://a:80/x", "http://a/y", "http", .follow(url: "http://a/y", sameOrigin: true)),
        ("http://u:p@a/x", "http://u:p@b/y", "http", .follow(url: "http://b/y", sameOrigin: false)),
        // Same scheme, host and port: the URL's credentials go along, as with curl -L.
        ("http://u:p@a/x", "http://a/private/x", "http", .follow(url: "http://u:p@a/private/x", sameOrigin: true)),
        ("http://u:p%40s@a:80/x", "http://a/y", "http", .follow(url: "http://u:p%40s@a/y", sameOrigin: true)),
        ("https://u@a/x", "https://a:443/y", "https", .follow(url: "https://u@a:443/y", sameOrigin: true)),
        ("http://u:p@a/x", "http://v:q@a/y", "http", .follow(url: "http://v:q@a/y", sameOrigin: true)),
        ("http://u:p@a/x", "https://a/y", "http", .follow(url: "https://a/y", sameOrigin: false)),
        ("http://u:p@a/x", "http://a:8080/y", "http", .follow(url: "http://a:8080/y", sameOrigin: false)),
        ("http://a/x", "ftp://a/y", "http", .refuse("to a ftp: URL; only http, https are followed")),
        ("http://a/x", "file:///etc/passwd", "http", .refuse("to a file: URL; only http, https are followed")),
        ("http://a/x", "http:///nohost", "http", .refuse("unusable Location")),
        ("ftp://a/x", "ftp://b/y", "ftp", .follow(url: "ftp://b/y", sameOrigin: false)),
        // "é" and "e" + U+0301 are equal Strings to Swift, but two hosts.
        ("http://u:p@%C3%A9.example/x", "http://u:p@e%CC%81.example/y", "http", .follow(url: "http://e%CC%81.example/y", sameOrigin: false)),
    ])
    func redirects(_ from: String, _ to: String, _ scheme: String, _ expected: RedirectRule) {
        #expect(RedirectRule.next(from: from, to: to, originalScheme: scheme) == expected)
    }
}

struct HTTPDateTests {
    @Test func acceptsRunsOfSpaces() {
        #expect(HTTPDate.parse("Sun,  06 Nov 1994 08:49:37  GMT") == 784_111_777)
    }

    @Test func parsesIMFFixdate() {
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == 784_111_777)
        #expect(HTTPDate.parse("Thu, 01 Jan 1970 00:00:00 GMT") == 0)
        #expect(HTTPDate.parse("Sat, 29 Feb 2020 12:00:00 GMT") == 1_582_977_600)
    }

    @Test(arguments: ["Sun, 06 Nov 1994 08:49:37 GMT", "Thu, 01 Jan 1970 00:00:00 GMT", "Sat, 29 Feb 2020 12:00:00 GMT",
                      "Fri, 31 Dec 2100 23:59:59 GMT", "Wed, 01 Mar 2000 00:00:09 GMT"])
    func formatIsTheInverseOfParse(_ text: String) throws {
        #expect(HTTPDate.format(Int64(try #require(HTTPDate.parse(text)))) == text)
    }

    @Test(arguments: ["Sunday, 06-Nov-94 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 UTC", "06 Nov 1994", "", "Sun, 32 Nov 1994 08:49:37 GMT",
                          "Sun, 06 Nox 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49 GMT", "Sun, 06 Nov 1994 24:00:00 GMT",
                          "Sun, 06 Nov 1994 08:49:37 GMT x", "Sun 06 Nov 1994 08:49:37 GMT", "Sun, 0x Nov 1994 08:49:37 GMT",
                          "Sun, 06 Nov 1969 08:49:37 GMT", "Sun, 06 Nov 1994 08::37 GMT"])
    func rejectsOtherForms(_ text: String) {
        #expect(HTTPDate.parse(text) == nil)
    }
}

struct DestinationPathsTests {
    @Test func aFileUnderTheFileSystemRootLivesInSlash() {
        let paths = DestinationPaths(root: "/", dest: "x.bin")
        #expect(paths.destination == "/x.bin")
        #expect(paths.partial == "/x.bin.part")
        #expect(paths.directory == "/")
    }

    @Test func partialSitsBesideTheDestination() {
        let paths = DestinationPaths(root: "/srv/root", dest: "a/b/c.bin")
        #expect(paths.destination == "/srv/root/a/b/c.bin")
        #expect(paths.partial == "/srv/root/a/b/c.bin.part")
        #expect(paths.directory == "/srv/root/a/b")
    }

    @Test func aNameTooLongForTheSuffixGetsAShortenedUniquePartialName() {
        let long = String(repeating: "x", count: 253)
        let other = String(repeating: "x", count: 252) + "y"
        let first = DestinationPaths(root: "/r", dest: long).partial
        let second = DestinationPaths(root: "/r", dest: other).partial
        let name = String(first.split(separator: "/").last!)
        #expect(name.utf8.count <= 255)
        #expect(name.hasSuffix(".part"))
        #expect(first != second)
    }
}

struct HostKeyTests {
    @Test(arguments: [
        // (url as sent, url as the manifest wrote it, the key's description)
        ("https://example.org/a", "https://example.org/a", "example.org:443"),
        ("http://example.org:8080/a", "http://example.org:8080/a", "example.org:8080"),
        ("ftp://u:p@files.example.org/a", "ftp://***@files.example.org/a", "files.example.org:21"),
        ("ftps://files.example.org/a", "ftps://files.example.org/a", "files.example.org:990"),
        ("http://[::1]:8080/a", "http://[::1]:8080/a", "[::1]:8080"),
        ("https://mirror.example.net/a", "https://${MIRROR_HOST}/a", "<host>:443"),
        ("https://a.example.org/a", "https://a.${DOMAIN}/a", "<host>:443"),
        ("https://example.org/a", "https://${USER}@example.org/a", "example.org:443"),
        ("https://example.org/a", "${URL}", "<host>:443"),
        ("https://example.org/a", "https://example.org\r\n/a", "example.org:443"),
        ("https://exa.org/a", "https://exa\u{301}.org/é?exa.org", "exa.org:443"),
        ("https://exa.org/a", "https://exa\u{301}.org/é", "<host>:443"),
    ])
    func hostOfAManifestURL(_ string: String, _ display: String, _ description: String) throws {
        let key = try #require(HostKey(RemoteURL(string: string, written: display)))
        #expect(key.description == description)
    }

    @Test func aURLWithoutHostHasNoKey() {
        #expect(HostKey(RemoteURL(string: "file:///etc/hosts", written: "file:///etc/hosts")) == nil)
    }
}
