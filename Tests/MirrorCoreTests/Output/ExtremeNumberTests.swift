import Foundation
import Testing
@testable import MirrorCore
@testable import mirror

/// Numbers from outside the binary (a server's Content-Length, a file's size, a rate that
/// drips under a byte a second) never trap it and never make a formatter's text unbounded.
struct ExtremeNumberTests {
    static let extremeCounts: [Int64] = [
        .min, .min + 1, -1_000_000, -1, 0, 1, 9, 10, 999, 1023, 1024, 1025, 1_048_575, 1_048_576,
        999_999_999, 1 << 40, 1 << 50, (1 << 60) - 1, 1 << 60, .max / 2, .max - 1, .max,
    ]

    static let extremeDoubles: [Double] = [
        -.infinity, -.greatestFiniteMagnitude, -1e300, -9.3e18, -1, -1e-300, -0.0, 0, .leastNonzeroMagnitude,
        1e-9, 0.001, 0.5, 0.9994, 0.9995, 0.99999, 1, 59.94, 59.95, 59.99, 60, 3599.4, 3599.5, 86_399.5,
        86_400, 8_639_999, 8_640_000, 9.2e18, 9.3e18, 1e300, .greatestFiniteMagnitude, .infinity, .nan,
    ]

    /// Every integer at the edges, plus a walk over every power of two and its neighbours.
    static var walkedCounts: [Int64] {
        var values = extremeCounts
        for shift in 0..<63 {
            let power = Int64(1) << shift
            values += [power - 1, power, power + 1, -power]
        }
        return values
    }

    static var walkedDoubles: [Double] {
        var values = extremeDoubles
        var value = 1e-12
        while value < 1e25 {
            values += [value, value * 0.9995, -value]
            value *= 3.7
        }
        return values
    }

    @Test func everyNumberFormatterStaysBoundedOverExtremeInputs() {
        for bytes in Self.walkedCounts {
            let text = ByteCount.format(bytes)
            #expect(text.count <= ByteCount.maxWidth, "ByteCount.format(\(bytes)) = \(text)")
        }
        for value in Self.walkedDoubles {
            let rate = ByteCount.rate(value)
            #expect(rate.count <= ByteCount.maxWidth + 2, "ByteCount.rate(\(value)) = \(rate)")
            let duration = DurationText.format(seconds: value)
            #expect(duration.count <= DurationText.maxWidth, "DurationText.format(seconds: \(value)) = \(duration)")
            for digits in 0...3 {
                // Saturates at Int64's bounds: 20 digits, a sign and the decimals at most.
                #expect(TextFormat.fixed(value, digits: digits).count <= 21 + 1 + digits)
            }
        }
        for seconds in Self.walkedCounts {
            let duration = DurationText.format(Duration.seconds(seconds))
            #expect(duration.count <= DurationText.maxWidth, "DurationText.format(.seconds(\(seconds))) = \(duration)")
        }
        for remaining in Self.walkedCounts {
            for rate in Self.walkedDoubles {
                for unknown in [0, 3] {
                    let eta = ProgressLayout.eta(remaining: remaining, bytesPerSecond: rate, unknownSizes: unknown)
                    #expect((eta?.count ?? 0) <= DurationText.maxWidth + 1, "eta(\(remaining), \(rate)) = \(eta ?? "nil")")
                }
            }
        }
    }

    @Test func formattersReadWellAtTheirEdges() {
        #expect(ByteCount.format(0) == "0 B")
        #expect(ByteCount.format(1023) == "1023 B")
        #expect(ByteCount.format(1024) == "1.00 KiB")
        #expect(ByteCount.format(.max) == "8.00 EiB")
        #expect(ByteCount.rate(0.4) == "0 B/s")
        #expect(ByteCount.rate(.nan) == "0 B/s")
        #expect(ByteCount.rate(1e300) == "8.00 EiB/s")
        #expect(DurationText.format(seconds: 0.9996) == "1.0s")
        #expect(DurationText.format(seconds: 59.96) == "1:00")
        #expect(DurationText.format(seconds: 3599.6) == "1:00:00")
        #expect(DurationText.format(seconds: 90_000) == "1d01h")
        #expect(DurationText.format(seconds: 9.2e18 / 0.5) == ">100d")
        #expect(DurationText.format(seconds: .nan) == "--")
        #expect(DurationText.format(seconds: -1) == "--")
        #expect(TextFormat.fixed(1e300, digits: 2) == "92233720368547758.07")
    }

    @Test(arguments: [
        // (a, b, a + b, a - b, a * b), each held at Int64's bounds.
        (Int64.max, Int64(1), Int64.max, Int64.max - 1, Int64.max),
        (Int64.max, Int64.max, Int64.max, Int64(0), Int64.max),
        (Int64.min, Int64(-1), Int64.min, Int64.min + 1, Int64.max),
        (Int64.min, Int64(1), Int64.min + 1, Int64.min, Int64.min),
        (Int64(0), Int64.min, Int64.min, Int64.max, Int64(0)),
        (Int64(-2), Int64.max, Int64.max - 2, Int64.min, Int64.min),
        (Int64(3), Int64(4), Int64(7), Int64(-1), Int64(12)),
    ])
    func saturatingArithmeticStopsAtTheBounds(_ a: Int64, _ b: Int64, _ sum: Int64, _ difference: Int64, _ product: Int64) {
        #expect(a.saturatingAdding(b) == sum)
        #expect(a.saturatingSubtracting(b) == difference)
        #expect(a.saturatingMultiplied(by: b) == product)
    }

    @Test func doublesConvertByClamping() {
        #expect(Int64(saturating: 1e300) == .max)
        #expect(Int64(saturating: 9_223_372_036_854_775_807.0) == .max)
        #expect(Int64(saturating: -1e300) == .min)
        #expect(Int64(saturating: .nan) == 0)
        #expect(Int64(saturating: -.infinity) == .min)
        #expect(Int64(saturating: 2.9) == 2)
        #expect([Int64.max, 5, Int64.max].saturatingSum() == .max)
    }

    /// Two transfers of `Content-Length: 9223372036854775807`, one dripping under a byte a
    /// second: the progress sums, the frame and its lines are all made without a trap.
    @Test func progressOfTwoMaximalTransfersDrawsWithoutTrapping() {
        let progress = SyncProgress()
        progress.expect([("a", Int64.max), ("b", Int64.max), ("c", Int64.max)])
        let first = progress.startTransfer(dest: "a", total: .max)
        let second = progress.startTransfer(dest: "b", total: .max)
        first.add(.max)
        first.add(.max)
        second.add(1)
        let snapshot = progress.snapshot()
        #expect(snapshot.bytesReceived == .max)
        #expect(snapshot.bytesKnownTotal == .max)
        var rates = TransferRates()
        let start = ContinuousClock.now
        _ = rates.frame(snapshot, at: start)
        second.add(1)
        let frame = rates.frame(progress.snapshot(), at: start + .seconds(2))
        for width in [1, 10, 40, 80, 200] {
            for line in ProgressLayout.lines(frame, width: width) {
                #expect(TerminalText.columns(line) <= width, "\(line)")
            }
        }
        var slow = frame
        slow.bytesReceived = 1
        slow.bytesRemaining = .max
        slow.bytesPerSecond = 0.5
        #expect(ProgressLayout.summary(slow, width: 200).contains("ETA >100d"))
        first.finish()
        second.finish()
        #expect(progress.snapshot().bytesRemaining == .max, "what the unfinished transfer did not fetch is still to come")
    }

    /// Two entries whose HEAD says `Content-Length: 9223372036854775807`: `plan` adds them up
    /// for its summary, in text and JSON.
    @Test func planAddsUpTwoMaximalContentLengthsWithoutTrapping() throws {
        let scenario = try SyncScenario(.faultServer)
        let server = scenario.server
        for name in ["a", "b"] {
            server.route("/\(name).bin", reply: .status(200, headers: ["Content-Length": "\(Int64.max)"]))
        }
        try scenario.write(ManifestText(entries: ["a", "b"].map { .url(server.url("/\($0).bin"), dest: "\($0).bin") }), to: "mirror.yaml")
        let text = try scenario.run(["plan", "mirror.yaml"])
        #expect(text.status == 0, "\(text)")
        #expect(text.stdout.contains("2 download") && text.stdout.contains("8.00 EiB to transfer"), "\(text)")
        let json = try scenario.run(["plan", "--json", "mirror.yaml"])
        #expect(json.status == 0, "\(json)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        let summary = try #require(object["summary"] as? [String: Any])
        #expect((summary["bytes_to_transfer"] as? NSNumber)?.int64Value == .max)
    }
}


extension ExtremeNumberTests {
    @Test(arguments: [Duration.zero, .seconds(1), .milliseconds(Int64.max), .seconds(Int64.max)])
    func theOutageClockTimeNeverTraps(_ wait: Duration) {
        let text = Console.clockTime(after: wait)
        #expect(text.count == 8, "\(text)")
    }
}
