import Foundation
import Testing
@testable import MirrorCore

/// Nothing a server sends may trap the binary, and nothing it sends may be believed when it
/// cannot be true. Every parser and decision that reads a server's numbers and dates runs here
/// over many generated values, the extremes of each type among them; a trap ends the test
/// process, which fails the run.
struct ServerValueParsingTests {
    /// Pieces servers (and attackers) put in headers, joined at random.
    static let tokens = [
        "0", "1", "-1", "99999", "100000", "9223372036854775807", "9223372036854775808", "-9223372036854775808",
        "18446744073709551615", "99999999999999999999999", "007", "+5", " ", "  ", "\t", ",", ", ", "/", "*", "-",
        "bytes", "bytes ", "Bytes ", "items ", "=", ":", "GMT", "UTC", "Sun,", "Fri,", "31", "06", "Dec", "Nov", "Feb",
        "29", "2600", "1994", "1969", "9999", "10000", "99999999", "23:59:59", "24:00:00", "08:49:61", "99:99:99",
        "W/", "\"x\"", "\"", "é", "\u{0}", "\u{1B}[2J", "\r", "\n", "1e9", "0x10", "NaN", "inf", "s", "ms", "m", "h",
        "KiB", "TB", "d",
    ]

    static func text<G: RandomNumberGenerator>(_ generator: inout G, maxTokens: Int = 8) -> String {
        (0..<Int.random(in: 1...maxTokens, using: &generator)).map { _ in tokens.randomElement(using: &generator)! }.joined()
    }

    /// Integers where arithmetic breaks: the ends of Int64, powers of two either side, small values.
    static func extreme<G: RandomNumberGenerator>(_ generator: inout G) -> Int64 {
        switch Int.random(in: 0..<4, using: &generator) {
        case 0: return [Int64.max, .min, .max - 1, .min + 1, 0, 1, -1].randomElement(using: &generator)!
        case 1:
            let power = Int64(1) << Int64.random(in: 0...62, using: &generator)
            return power + Int64.random(in: -1...1, using: &generator)
        case 2: return Int64.random(in: 0...300_000, using: &generator)
        default: return Int64.random(in: .min ... .max, using: &generator)
        }
    }

    @Test func contentRangesAreEitherCoherentOrRefused() {
        var generator = SeededGenerator(seed: 0xA1)
        for _ in 0..<20_000 {
            let header = Bool.random(using: &generator)
                ? "bytes \(Self.extreme(&generator))-\(Self.extreme(&generator))/\(Bool.random(using: &generator) ? "*" : String(Self.extreme(&generator)))"
                : Self.text(&generator)
            guard let range = ContentRange(header) else { continue }
            if let first = range.first, let last = range.last {
                #expect(first >= 0 && first <= last, "\(header)")
                if let total = range.total { #expect(last < total, "\(header)") }
            } else {
                #expect(range.first == nil && range.last == nil && range.total != nil, "\(header)")
            }
            if let total = range.total { #expect(total >= 0, "\(header)") }
        }
    }

    /// Random heads against random requests: a body is placed only at the offset asked for (or
    /// at 0), and only where it runs to the end of a file whose size is known and agreed.
    @Test func bodyPlacementNeverPlacesWhatTheReplyCannotVouchFor() {
        var generator = SeededGenerator(seed: 0xA2)
        let names = ["Content-Length", "Content-Range", "ETag", "Last-Modified", "Content-Encoding", "Transfer-Encoding"]
        for _ in 0..<20_000 {
            var fields: [(name: String, value: String)] = []
            for _ in 0..<Int.random(in: 0...4, using: &generator) {
                let name = names.randomElement(using: &generator)!
                let value: String
                switch name {
                case "Content-Length": value = Bool.random(using: &generator) ? String(Self.extreme(&generator)) : Self.text(&generator, maxTokens: 3)
                case "Content-Range":
                    value = "bytes \(Self.extreme(&generator))-\(Self.extreme(&generator))/\(Self.extreme(&generator))"
                default: value = Self.text(&generator, maxTokens: 3)
                }
                fields.append((name: name, value: value))
            }
            let status = [200, 206, 416, 304, 500, 0, 999].randomElement(using: &generator)!
            let head = ResponseHead(status: status, fields: fields)
            let offset = Bool.random(using: &generator) ? 0 : abs(Self.extreme(&generator) % 1_000_000)
            let expected: Int64? = Bool.random(using: &generator) ? nil : abs(Self.extreme(&generator) % 1_000_000)
            _ = (head.contentLength, head.totalSize, head.contradiction, head.isChunked, head.etag, head.lastModified)
            if let length = head.contentLength { #expect(length >= 0) }

            switch BodyPlacement.decide(offset: offset, head: head, expectedTotal: expected) {
            case .write(let from, let total):
                #expect(head.contradiction == nil, "\(fields)")
                #expect(from == 0 || from == offset)
                if let expected { #expect(total == expected, "\(status) \(fields), expected \(expected)") }
                if status == 206 {
                    #expect(offset > 0, "a part for a request of the whole file")
                    let range = head.contentRange
                    #expect(range?.first == offset && total.map { range?.last == $0 - 1 } == true, "\(fields)")
                }
            case .alreadyComplete(let total):
                #expect(total == offset && offset > 0 && (expected == nil || expected == total))
            case .reject:
                break
            }
        }
    }

    @Test func httpDatesParseFormatAndRoundTripWithoutTrapping() {
        var generator = SeededGenerator(seed: 0xA3)
        for _ in 0..<20_000 {
            _ = HTTPDate.parse(Self.text(&generator, maxTokens: 12))
            let fields = ["Sun,", String(Self.extreme(&generator)), "Dec", String(Self.extreme(&generator)), "23:59:59", "GMT"]
            if let seconds = HTTPDate.parse(fields.joined(separator: " ")) { #expect(seconds >= 0) }
            let moment = Self.extreme(&generator)
            if let text = HTTPDate.format(moment) {
                #expect(HTTPDate.parse(text) == Int(moment), "\(moment) → \(text)")
            } else {
                #expect(moment < 0 || moment >= 253_402_300_800)
            }
        }
        #expect(HTTPDate.format(784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.format(0) == "Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(HTTPDate.format(19_880_899_199) == "Tue, 31 Dec 2599 23:59:59 GMT")
        #expect(HTTPDate.parse("Fri, 31 Dec 2600 23:59:59 GMT") == 19_912_435_199)
    }

    @Test func retryAfterIsNeverPastItsCapAndNeverTraps() {
        var generator = SeededGenerator(seed: 0xA4)
        let cap = Duration.seconds(600)
        for _ in 0..<20_000 {
            let header = Bool.random(using: &generator) ? String(Self.extreme(&generator)) : Self.text(&generator, maxTokens: 10)
            let now = Int(Self.extreme(&generator))
            if let delay = RetryAfter.delay(header, now: now, cap: cap) {
                #expect(delay >= .zero && delay <= cap, "\(header) at \(now)")
            }
        }
    }

    /// Durations and sizes come from the manifest: any text either reads as a value that every
    /// later use can take, or is refused.
    @Test func manifestDurationsAndSizesAreUsableOrRefused() throws {
        var generator = SeededGenerator(seed: 0xA5)
        for _ in 0..<20_000 {
            let text = Self.text(&generator, maxTokens: 4)
            if let duration = try? DurationSyntax.parse(text) {
                #expect(duration > .zero)
                #expect(duration.milliseconds > 0)
                _ = ContinuousClock.now + duration
                #expect(try DurationSyntax.parse(DurationSyntax.text(duration)) == duration, "\(text)")
            }
            if let bytes = try? ByteCountSyntax.parse(text) { #expect(bytes >= 0, "\(text)") }
        }
        let longest = Duration.milliseconds(Int64.max)
        #expect(longest.milliseconds == Int64.max)
        #expect(Duration.seconds(Int64.max).milliseconds == Int64.max, "saturates")
    }

    @Test func statusLinesAndFileTimesNeverTrap() {
        var generator = SeededGenerator(seed: 0xA6)
        for _ in 0..<20_000 {
            let line = Array(("HTTP/1.1 " + Self.text(&generator, maxTokens: 3)).utf8)
            let code = line.withUnsafeBytes { HeaderLineParser.statusCode(ofStatusLine: $0) }
            #expect((0...999).contains(code))
            _ = LocalIdentity.nanoseconds(seconds: Self.extreme(&generator), nanoseconds: Self.extreme(&generator) % 1_000_000_000)
            let size = Self.extreme(&generator)
            _ = Action.resume(from: abs(size % 1_000_000), source: .partial).bytesToTransfer(remoteSize: max(0, Self.extreme(&generator)))
        }
    }
}
