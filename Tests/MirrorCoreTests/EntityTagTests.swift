import Testing
@testable import MirrorCore

/// ETags are compared as RFC 9110 §8.8.3.2 says: weakly to recognise the same version, strongly
/// (never a weak tag) where the same bytes are needed.
struct EntityTagTests {
    struct Case: CustomTestStringConvertible, Sendable {
        var first: String
        var second: String
        var weak: Bool
        var strong: Bool
        var testDescription: String { "\(first) vs \(second)" }
    }

    // RFC 9110's own table first, then what servers send in practice.
    static let cases: [Case] = [
        Case(first: #"W/"1""#, second: #"W/"1""#, weak: true, strong: false),
        Case(first: #"W/"1""#, second: #"W/"2""#, weak: false, strong: false),
        Case(first: #"W/"1""#, second: #""1""#, weak: true, strong: false),
        Case(first: #""1""#, second: #""1""#, weak: true, strong: true),
        Case(first: #""5f3-5e1a""#, second: #"W/"5f3-5e1a""#, weak: true, strong: false),
        Case(first: #""5f3-5e1a""#, second: #""5f3-5e1b""#, weak: false, strong: false),
        Case(first: #" "1" "#, second: #""1""#, weak: true, strong: true),
        Case(first: "abc", second: #""abc""#, weak: true, strong: true),
        Case(first: #"w/"1""#, second: #""1""#, weak: false, strong: false),
        Case(first: #""W/1""#, second: #""1""#, weak: false, strong: false),
        Case(first: #""""#, second: #""""#, weak: true, strong: true),
        // Tabs and spaces around a tag, read on bytes as on Characters.
        Case(first: "\t\"1\" ", second: #""1""#, weak: true, strong: true),
        Case(first: "\tW/\"1\"", second: #""1""#, weak: true, strong: false),
        Case(first: "W/", second: #""""#, weak: true, strong: false),
        // Text beyond ASCII is read as Characters.
        Case(first: #"W/"é""#, second: #""é""#, weak: true, strong: false),
        Case(first: #""é""#, second: #""e""#, weak: false, strong: false),
        Case(first: "\"x\u{301}\"", second: #""x""#, weak: false, strong: false),
        // Tags are bytes: text Unicode calls canonically equivalent is two tags when its bytes
        // differ (a precomposed é and e with a combining accent; the Angstrom sign U+212B and
        // Å U+00C5; the Kelvin sign U+212A and K), weak or strong.
        Case(first: "\"caf\u{E9}\"", second: "\"cafe\u{301}\"", weak: false, strong: false),
        Case(first: "W/\"caf\u{E9}\"", second: "\"cafe\u{301}\"", weak: false, strong: false),
        Case(first: "\"\u{212B}\"", second: "\"\u{C5}\"", weak: false, strong: false),
        Case(first: "\"\u{212A}1\"", second: #""K1""#, weak: false, strong: false),
        Case(first: "\"cafe\u{301}\"", second: "W/\"cafe\u{301}\"", weak: true, strong: false),
    ]

    @Test(arguments: cases)
    func comparison(_ test: Case) {
        #expect(EntityTag.weaklyMatch(test.first, test.second) == test.weak)
        #expect(EntityTag.weaklyMatch(test.second, test.first) == test.weak)
        #expect(EntityTag.stronglyMatch(test.first, test.second) == test.strong)
        #expect(EntityTag.stronglyMatch(test.second, test.first) == test.strong)
    }

    @Test func aTagThatLostItsWeaknessIsTheSameVersion() {
        let recorded = RemoteValidators(etag: #"W/"5f3-5e1a""#, lastModified: "Sun, 06 Nov 1994 08:49:37 GMT", size: 1523)
        var current = recorded
        current.etag = #""5f3-5e1a""#
        #expect(recorded.difference(from: current) == nil)
        current.etag = #""5f3-5e1b""#
        #expect(recorded.difference(from: current) == #"ETag changed from W/"5f3-5e1a" to "5f3-5e1b""#)
    }

    /// Validators are the server's bytes: canonically equivalent text that differs in its bytes
    /// is a change, in the ETag and in Last-Modified, and `==` says the same.
    @Test func validatorsDifferWhenTheirBytesDo() {
        let date = "Sun, 06 Nov 1994 08:49:37 GMT"
        let recorded = RemoteValidators(etag: "\"caf\u{E9}\"", lastModified: date, size: 5)
        var current = recorded
        current.etag = "\"cafe\u{301}\""
        #expect(recorded != current)
        #expect(recorded.difference(from: current) == "ETag changed from \"caf\u{E9}\" to \"cafe\u{301}\"")
        current = recorded
        #expect(recorded == current)
        let accented = RemoteValidators(etag: nil, lastModified: "\u{C5}", size: 5)
        let composed = RemoteValidators(etag: nil, lastModified: "A\u{30A}", size: 5)
        #expect(accented != composed)
        #expect(accented.difference(from: composed) != nil)
        #expect(RemoteValidators.sameBytes(nil, nil) && !RemoteValidators.sameBytes("a", nil) && !RemoteValidators.sameBytes(nil, "a"))
    }

    /// `SameBytes` says equal exactly when the UTF-8 bytes are: not for equal Strings of other
    /// bytes, and for slices anywhere in their text.
    @Test func sameBytesComparesTheBytesOnly() {
        #expect(SameBytes.of("\"5f3-5e1a\"", "\"5f3-5e1a\""))
        #expect(!SameBytes.of("\"5f3-5e1a\"", "\"5f3-5e1b\""))
        #expect(!SameBytes.of("abc", "abcd") && !SameBytes.of("", "a") && SameBytes.of("", ""))
        #expect("caf\u{E9}" == "cafe\u{301}" && !SameBytes.of("caf\u{E9}", "cafe\u{301}"))
        #expect(!SameBytes.of("\u{C5}x", "A\u{30A}"), "equal lengths in Characters, not in bytes")
        let text = "W/\"tag\" and \"tag\""
        #expect(SameBytes.of(text.dropFirst(3).prefix(3), text.suffix(4).prefix(3)))
        #expect(!SameBytes.of(text.dropFirst(2).prefix(4), text.suffix(4)))
    }

    /// A reply's ETag or Last-Modified whose bytes are not UTF-8 (obs-text, which RFC 9110
    /// allows in a tag) would read as U+FFFD, and two different tags the same: it names no
    /// version mirror can compare or send back, so it counts as absent.
    @Test func aValidatorThatIsNotUTF8CountsAsAbsent() {
        func head(_ lines: [[UInt8]]) -> ResponseHead? {
            var parser = HeaderLineParser()
            for line in lines {
                let bytes = line + Array("\r\n".utf8)
                bytes.withUnsafeBytes { parser.receive($0) }
            }
            return parser.head
        }
        let parsed = head([Array("HTTP/1.1 200 OK".utf8), Array("ETag: \"".utf8) + [0xE9] + Array("\"".utf8),
                           Array("Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT".utf8), Array("Content-Length: 5".utf8), []])
        #expect(parsed?.etag == nil)
        #expect(parsed?.lastModified == "Sun, 06 Nov 1994 08:49:37 GMT")
        let utf8 = head([Array("HTTP/1.1 200 OK".utf8), Array("ETag: \"caf\u{E9}\"".utf8), Array("Content-Length: 5".utf8), []])
        #expect(utf8?.etag == "\"caf\u{E9}\"", "a tag of UTF-8 text is kept")
        #expect(ResponseHead(status: 200, fields: [(name: "ETag", value: "\"a\u{FFFD}\"")]).etag == nil, "U+FFFD itself")
        #expect(ResponseHead(status: 200, fields: [(name: "ETag", value: "\u{FFFD}")]).etag == nil, "U+FFFD alone")
        #expect(ResponseHead(status: 200, fields: [(name: "ETag", value: " \t\"a\" ")]).etag == "\"a\"", "trimmed")
        #expect(ResponseHead(status: 200, fields: [(name: "ETag", value: "\"\u{FFFC}\"")]).etag == "\"\u{FFFC}\"")
    }

    @Test func onlyAStrongTagGoesIntoIfRange() {
        let date = "Sun, 06 Nov 1994 08:49:37 GMT"
        #expect(RemoteValidators(etag: #""a""#, lastModified: date, size: 1).ifRangeValue == #""a""#)
        #expect(RemoteValidators(etag: #"W/"a""#, lastModified: date, size: 1).ifRangeValue == date)
        #expect(RemoteValidators(etag: #"W/"a""#, lastModified: nil, size: 1).ifRangeValue == nil)
    }

    @Test func aPartOfTheSameVersionUnderAStrongTagIsAppended() {
        let started = RemoteValidators(etag: #"W/"v""#, lastModified: "Sun, 06 Nov 1994 08:49:37 GMT", size: 100)
        let head = ResponseHead(status: 206, fields: [
            (name: "Content-Range", value: "bytes 40-99/100"), (name: "ETag", value: #""v""#),
            (name: "Last-Modified", value: "Sun, 06 Nov 1994 08:49:37 GMT"),
        ])
        #expect(BodyPlacement.decide(offset: 40, head: head, expectedTotal: 100, startedFrom: started) == .write(from: 40, total: 100))
    }
}
