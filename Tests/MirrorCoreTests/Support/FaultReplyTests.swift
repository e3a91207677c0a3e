import Foundation
import Testing

/// The request/response rules of `FaultReply`, checked without sockets.
@Suite struct FaultReplyTests {
    static let lastModified = "Sun, 06 Nov 1994 08:49:37 GMT"
    let data = randomData(count: 1000, seed: 1)

    private func request(_ method: String = "GET", version: String = "HTTP/1.1",
                         headers: HeaderFields = [:]) -> RecordedRequest {
        RecordedRequest(method: method, target: "/f", version: version, headers: headers, body: Data(),
                        receivedAt: .now, connection: 1)
    }

    @Test(arguments: [
        ("bytes=0-", RangeRequest.satisfiable(0...999)),
        ("bytes=10-19", .satisfiable(10...19)),
        ("bytes=990-5000", .satisfiable(990...999)),
        ("bytes=-100", .satisfiable(900...999)),
        ("bytes=-5000", .satisfiable(0...999)),
        ("BYTES = 5-5", .satisfiable(5...5)),
        ("bytes=1000-", .unsatisfiable),
        ("bytes=-0", .unsatisfiable),
        ("bytes=20-10", .ignored),
        ("bytes=0-1,5-6", .ignored),
        ("items=0-1", .ignored),
        ("bytes=abc-", .ignored),
        ("bytes=+1-2", .ignored),
        ("bytes=99999999999999999999-", .ignored),
    ])
    func rangeHeaders(header: String, expected: RangeRequest) {
        #expect(RangeRequest(header: header, length: 1000) == expected)
    }

    @Test func anEmptyFileHasNoSatisfiableRange() {
        #expect(RangeRequest(header: "bytes=0-", length: 0) == .unsatisfiable)
        #expect(RangeRequest(header: "bytes=-1", length: 0) == .unsatisfiable)
    }

    @Test(arguments: [
        ("\"v1\"", true),
        ("\"v2\"", false),
        ("W/\"v1\"", false),
        (FaultReplyTests.lastModified, true),
        ("Mon, 07 Nov 1994 08:49:37 GMT", false),
    ])
    func ifRangeAgainstAStrongTagAndADate(condition: String, holds: Bool) {
        #expect(ConditionalRequest.ifRangeHolds(condition, etag: "\"v1\"", lastModified: Self.lastModified) == holds)
    }

    @Test func aWeakValidatorNeverSatisfiesIfRange() {
        #expect(!ConditionalRequest.ifRangeHolds("W/\"v1\"", etag: "W/\"v1\"", lastModified: nil))
        #expect(!ConditionalRequest.ifRangeHolds("\"v1\"", etag: nil, lastModified: nil))
    }

    @Test func headDescribesTheWholeFileWithoutABody() {
        let response = FaultReply.file(data, etag: "\"v1\"").prepare(for: request("HEAD", headers: ["Range": "bytes=10-"]))
        #expect(response.status == 200)
        #expect(response.headers["Content-Length"] == "1000")
        #expect(!response.sendsBody)
        #expect(response.bodyToSend.isEmpty)
        #expect(!response.closesConnection)
    }

    @Test func otherMethodsOnAFileAre405() {
        let response = FaultReply.file(data).prepare(for: request("POST"))
        #expect(response.status == 405)
        #expect(response.headers["Allow"] == "GET, HEAD")
    }

    @Test func notModifiedHasNoBody() {
        let response = FaultReply.file(data, etag: "\"v1\"").prepare(for: request(headers: ["If-None-Match": "W/\"v1\""]))
        #expect(response.status == 304)
        #expect(!response.sendsBody)
        #expect(response.headers["Content-Length"] == nil)
    }

    @Test func aFileThatIgnoresConditionsAnswers200() {
        let conditions: HeaderFields = ["If-None-Match": "\"v1\"", "If-Modified-Since": "Sun, 06 Nov 1994 08:49:37 GMT"]
        let response = FaultReply.file(data, etag: "\"v1\"", lastModified: "Sun, 06 Nov 1994 08:49:37 GMT", honorConditions: false)
            .prepare(for: request(headers: conditions))
        #expect(response.status == 200)
        #expect(response.headers["Content-Length"] == "1000")
    }

    @Test func aCutKeepsTheFullContentLengthAndClosesTheConnection() {
        let response = FaultReply.file(data).cut(afterBodyBytes: 100).prepare(for: request())
        #expect(response.headers["Content-Length"] == "1000")
        #expect(response.bodyToSend == data.prefix(100))
        #expect(response.closesConnection)
        #expect(response.headers["Connection"] == "close")
    }

    @Test func aWrongContentLengthClosesTheConnection() {
        let response = FaultReply.file(data).contentLength(10).prepare(for: request())
        #expect(response.headers["Content-Length"] == "10")
        #expect(response.closesConnection)
        // On HEAD no body goes out, so the framing survives.
        #expect(!FaultReply.file(data).contentLength(10).prepare(for: request("HEAD")).closesConnection)
    }

    @Test func aChunkedReplyKeepsTheConnection() {
        let response = FaultReply.file(data).chunked().prepare(for: request())
        #expect(response.headers["Transfer-Encoding"] == "chunked")
        #expect(response.headers["Content-Length"] == nil)
        #expect(!response.closesConnection)
    }

    @Test func theClientDecidesWhetherTheConnectionStays() {
        #expect(FaultReply.status(200).prepare(for: request(headers: ["Connection": "close"])).closesConnection)
        #expect(FaultReply.status(200).prepare(for: request(version: "HTTP/1.0")).closesConnection)
        #expect(!FaultReply.status(200).prepare(for: request(version: "HTTP/1.0", headers: ["Connection": "keep-alive"]))
            .closesConnection)
        #expect(!FaultReply.status(200).prepare(for: request()).closesConnection)
    }

    @Test func scriptedStatusesGetAContentLengthUnlessTheyCarryOne() {
        let plain = FaultReply.status(503, headers: ["Retry-After": "2"], body: Data("busy".utf8)).prepare(for: request())
        #expect(plain.headers["Content-Length"] == "4")
        #expect(plain.headers["Retry-After"] == "2")
        #expect(!plain.closesConnection)
        let noContent = FaultReply.status(204).prepare(for: request())
        #expect(noContent.headers["Content-Length"] == nil)
        #expect(!noContent.sendsBody)
    }

    @Test func aRedirectCarriesItsLocation() {
        let response = FaultReply.redirect(to: "http://127.0.0.2:1/x", code: 301).prepare(for: request())
        #expect(response.status == 301)
        #expect(response.headers["Location"] == "http://127.0.0.2:1/x")
    }

    @Test func aMisreportedStartServesTheBytesFromThere() {
        let response = FaultReply.file(data).misreportingRange(start: 5).prepare(for: request(headers: ["Range": "bytes=100-199"]))
        #expect(response.status == 206)
        #expect(response.headers["Content-Range"] == "bytes 5-199/1000")
        #expect(response.body == data.subdata(in: 5..<200))
        // Only a 206 is affected.
        #expect(FaultReply.file(data).misreportingRange(start: 5).prepare(for: request()).headers["Content-Range"] == nil)
    }

    @Test func headerOverridesReplaceAndRemove() {
        let response = FaultReply.file(data, etag: "\"v1\"")
            .header("ETag", "\"v9\"").header("Accept-Ranges", nil).header("X-Extra", "1")
            .prepare(for: request())
        #expect(response.headers["etag"] == "\"v9\"")
        #expect(response.headers["Accept-Ranges"] == nil)
        #expect(response.headers["X-Extra"] == "1")
    }

    @Test func theHeadIsWellFormed() {
        let response = FaultReply.status(503, headers: ["Retry-After": "1"]).prepare(for: request())
        #expect(String(decoding: response.headBytes, as: UTF8.self)
            == "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\n\r\n")
    }

    @Test func requestHeadsParse() throws {
        let head = try RequestHeadParser.parse(Data("GET /a?b=c HTTP/1.1\r\nHost: x\r\nrange:  bytes=1- \r\n".utf8))
        #expect(head.method == "GET")
        #expect(head.target == "/a?b=c")
        #expect(head.headers["Range"] == "bytes=1-")
        #expect(throws: RequestHeadParser.Malformed.self) { try RequestHeadParser.parse(Data("GET /\r\n".utf8)) }
        #expect(throws: RequestHeadParser.Malformed.self) {
            try RequestHeadParser.parse(Data("GET / HTTP/1.1\r\nno colon\r\n".utf8))
        }
    }
}
