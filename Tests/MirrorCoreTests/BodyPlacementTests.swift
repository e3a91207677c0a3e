import Testing
@testable import MirrorCore

/// The rules that decide whether a response's bytes may be written, and where.
struct BodyPlacementTests {
    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var offset: Int64
        var status: Int
        var headers: [String: String]
        var expectedTotal: Int64?
        var expected: BodyPlacement
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "200 to a plain GET writes from 0", offset: 0, status: 200, headers: ["Content-Length": "100"],
             expectedTotal: 100, expected: .write(from: 0, total: 100)),
        Case(name: "206 starting at the offset appends", offset: 40, status: 206,
             headers: ["Content-Range": "bytes 40-99/100"], expectedTotal: 100, expected: .write(from: 40, total: 100)),
        Case(name: "200 to a range request starts over from 0", offset: 40, status: 200,
             headers: ["Content-Length": "100"], expectedTotal: 100, expected: .write(from: 0, total: 100)),
        Case(name: "206 starting elsewhere is refused", offset: 40, status: 206,
             headers: ["Content-Range": "bytes 0-99/100"], expectedTotal: 100,
             expected: .reject(.rangeMismatch("asked for bytes from 40, server sent bytes from 0"))),
        Case(name: "206 with another total is refused", offset: 40, status: 206,
             headers: ["Content-Range": "bytes 40-119/120"], expectedTotal: 100,
             expected: .reject(.rangeMismatch("file size changed from 100 to 120 bytes"))),
        Case(name: "206 without Content-Range is refused", offset: 40, status: 206, headers: [:], expectedTotal: 100,
             expected: .reject(.rangeMismatch("206 without a usable Content-Range"))),
        Case(name: "206 with unknown planned total takes the response's", offset: 40, status: 206,
             headers: ["Content-Range": "bytes 40-99/100"], expectedTotal: nil, expected: .write(from: 40, total: 100)),
        Case(name: "416 with */offset means complete", offset: 100, status: 416,
             headers: ["Content-Range": "bytes */100"], expectedTotal: 100, expected: .alreadyComplete(total: 100)),
        Case(name: "416 with the local size but not the planned size means restart", offset: 60, status: 416,
             headers: ["Content-Range": "bytes */60"], expectedTotal: 100,
             expected: .reject(.rangeMismatch("range from 60 not satisfiable (the file has 60 bytes)"))),
        Case(name: "416 with another size means restart", offset: 100, status: 416,
             headers: ["Content-Range": "bytes */80"], expectedTotal: 100,
             expected: .reject(.rangeMismatch("range from 100 not satisfiable (the file has 80 bytes)"))),
        Case(name: "404 is an HTTP failure", offset: 0, status: 404, headers: [:], expectedTotal: nil,
             expected: .reject(.httpStatus(404))),
        Case(name: "503 keeps its Retry-After", offset: 0, status: 503, headers: ["Retry-After": "7"], expectedTotal: nil,
             expected: .reject(.httpStatus(503, retryAfter: "7"))),
        Case(name: "a gzip-coded 200 is written as sent, its Content-Length the stored size", offset: 0, status: 200,
             headers: ["Content-Length": "10", "Content-Encoding": "gzip"], expectedTotal: 10,
             expected: .write(from: 0, total: 10)),
        Case(name: "a gzip-coded 206 with no record of a strong ETag starts over", offset: 40, status: 206,
             headers: ["Content-Range": "bytes 40-99/100", "Content-Encoding": "gzip", "ETag": "\"v\""], expectedTotal: 100,
             expected: .reject(.rangeMismatch("a part coded as gzip without a strong ETag that vouches it continues the same bytes"))),
    ]

    @Test(arguments: cases)
    func placement(_ test: Case) {
        let head = ResponseHead(status: test.status, fields: test.headers.map { (name: $0.key, value: $0.value) })
        #expect(BodyPlacement.decide(offset: test.offset, head: head, expectedTotal: test.expectedTotal) == test.expected)
    }

    @Test(arguments: [
        ("bytes 0-0/10", ContentRange(first: 0, last: 0, total: 10)),
        ("bytes 5-9/10", ContentRange(first: 5, last: 9, total: 10)),
        ("bytes 5-9/*", ContentRange(first: 5, last: 9, total: nil)),
        ("bytes */10", ContentRange(first: nil, last: nil, total: 10)),
        ("BYTES 1-2/3", ContentRange(first: 1, last: 2, total: 3)),
    ])
    func contentRangeParses(_ text: String, _ expected: ContentRange) {
        #expect(ContentRange(text) == expected)
    }

    @Test(arguments: ["bytes 9-5/10", "bytes 5-10/10", "items 1-2/3", "bytes -1-2/3", "bytes */*", "bytes 1-2", "bytes a-b/c", ""])
    func contentRangeRejects(_ text: String) {
        #expect(ContentRange(text) == nil)
    }

    @Test func contentLengthOfAnEncodedBodyIsTheSizeOfTheBytesStored() {
        let head = ResponseHead(status: 200, fields: [(name: "Content-Length", value: "10"), (name: "Content-Encoding", value: "gzip")])
        #expect(head.contentLength == 10 && head.totalSize == 10)
        #expect(ResponseHead(status: 200, fields: [(name: "content-length", value: " 42 ")]).contentLength == 42)
    }

    @Test func aCodedPartIsAppendedOnlyUnderTheSameStrongETag() {
        func head(etag: String) -> ResponseHead {
            ResponseHead(status: 206, fields: [
                (name: "Content-Range", value: "bytes 40-99/100"), (name: "Content-Encoding", value: "x-gzip"), (name: "ETag", value: etag),
            ])
        }
        let strong = RemoteValidators(etag: "\"v\"", lastModified: nil, size: 100)
        let weak = RemoteValidators(etag: "W/\"v\"", lastModified: "Sun, 06 Nov 1994 08:49:37 GMT", size: 100)
        #expect(BodyPlacement.decide(offset: 40, head: head(etag: "\"v\""), expectedTotal: 100, startedFrom: strong) == .write(from: 40, total: 100))
        #expect(BodyPlacement.decide(offset: 40, head: head(etag: "W/\"v\""), expectedTotal: 100, startedFrom: strong)
            == .reject(.rangeMismatch("a part coded as x-gzip without a strong ETag that vouches it continues the same bytes")))
        #expect(BodyPlacement.decide(offset: 40, head: head(etag: "\"v\""), expectedTotal: 100, startedFrom: weak)
            == .reject(.rangeMismatch("a part coded as x-gzip without a strong ETag that vouches it continues the same bytes")))
    }
}

struct ResponseHeadParsingTests {
    @Test(arguments: [
        ("HTTP/1.1 200 OK", 200), ("HTTP/2 206", 206), ("HTTP/1.0 404 Not Found", 404),
        ("HTTP/1.1 20 OK", 0), ("HTTP/1.1 2000 OK", 0), ("HTTP/1.1", 0), ("HTTP/1.1 2x0 OK", 0),
    ])
    func statusCodeOfAStatusLine(_ line: String, _ code: Int) {
        let bytes = Array(line.utf8)
        #expect(bytes.withUnsafeBytes { HeaderLineParser.statusCode(ofStatusLine: $0) } == code)
    }

    @Test(arguments: [(" \tabc \t", "abc"), ("\u{E9} ", "\u{E9}"), (" a\u{301}\t", "a\u{301}"), ("  ", ""), ("", ""), ("a b", "a b")])
    func trimmingSpacesKeepsWholeCharacters(_ text: String, _ trimmed: String) {
        #expect(String(Substring(text).trimmingSpaces) == trimmed)
    }

    @Test func lengthsAreASCIIDigitsOnly() {
        #expect(ResponseHead(status: 200, fields: [("Content-Length", " 42 ")]).contentLength == 42)
        #expect(ResponseHead(status: 200, fields: [("Content-Length", "4\u{663}")]).contentLength == nil)
        #expect(ResponseHead(status: 200, fields: [("Content-Length", "-1")]).contentLength == nil)
        #expect(ResponseHead(status: 200, fields: [("Content-Length", "")]).contentLength == nil)
    }
}
