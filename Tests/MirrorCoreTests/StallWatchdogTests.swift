import Testing
@testable import MirrorCore

/// When the watchdog stops a transfer: no byte moved for the whole timeout, or too few over a
/// minimum-speed window; time held back by the rate limits counts as neither.
/// Each row is a sequence of progress reports (or clock restarts) and the verdict after each.
struct StallWatchdogTests {
    enum Step: Sendable {
        /// A progress report at `now` ms: bytes received and sent so far, whether held by the
        /// rate limits, and the verdict expected.
        case report(Int64, received: Int64, sent: Int64 = 0, held: Bool = false, StallWatchdog.Verdict)
        /// The rate limits let the transfer on again at `now` (`resumeIfAllowed`).
        case restart(Int64)
    }

    struct Row: CustomTestStringConvertible, Sendable {
        var name: String
        var timeout: Duration = .seconds(10)
        var minSpeed: Int64?
        var minSpeedTime: Duration = .seconds(5)
        var steps: [Step]
        /// The failure's message after the last step.
        var message: String?
        var testDescription: String { name }
    }

    static let rows: [Row] = [
        Row(name: "the first report starts the clock, even with nothing moved",
            steps: [.report(1000, received: 0, .keepGoing)]),
        Row(name: "a stall exactly at the timeout stops; a millisecond before does not",
            steps: [.report(1000, received: 0, .keepGoing), .report(10_999, received: 0, .keepGoing),
                    .report(11_000, received: 0, .stalled)],
            message: "no data received for 10s"),
        Row(name: "bytes received restart the stall clock",
            steps: [.report(1000, received: 0, .keepGoing), .report(10_000, received: 5, .keepGoing),
                    .report(19_999, received: 5, .keepGoing), .report(20_000, received: 5, .stalled)],
            message: "no data received for 10s"),
        Row(name: "bytes sent count as movement too",
            steps: [.report(1000, received: 0, .keepGoing), .report(10_000, received: 0, sent: 7, .keepGoing),
                    .report(19_000, received: 0, sent: 7, .keepGoing), .report(20_000, received: 0, sent: 7, .stalled)],
            message: "no data received for 10s"),
        Row(name: "a throttle hold restarts the clocks: the wait is no stall",
            steps: [.report(1000, received: 0, .keepGoing), .report(10_500, received: 0, held: true, .keepGoing),
                    .report(20_499, received: 0, .keepGoing), .report(20_500, received: 0, .stalled)]),
        Row(name: "held past the timeout is never a stall",
            steps: [.report(1000, received: 0, .keepGoing), .report(50_000, received: 0, held: true, .keepGoing),
                    .report(90_000, received: 0, held: true, .keepGoing)]),
        Row(name: "a hold before the first report: the first free report starts the clock",
            steps: [.report(1000, received: 0, held: true, .keepGoing), .report(11_000, received: 0, .keepGoing),
                    .report(20_999, received: 0, .keepGoing), .report(21_000, received: 0, .stalled)]),
        Row(name: "resuming after a hold restarts the clocks",
            steps: [.report(1000, received: 0, .keepGoing), .restart(9000),
                    .report(18_999, received: 0, .keepGoing), .report(19_000, received: 0, .stalled)]),
        Row(name: "under the minimum speed over a whole window is too slow",
            minSpeed: 100,
            steps: [.report(1000, received: 0, .keepGoing), .report(5999, received: 400, .keepGoing),
                    .report(6000, received: 499, .tooSlow)],
            message: "slower than 100 bytes/s for 5s"),
        Row(name: "exactly the minimum speed goes on, and a new window begins",
            minSpeed: 100,
            steps: [.report(1000, received: 0, .keepGoing), .report(6000, received: 500, .keepGoing),
                    .report(10_999, received: 500, .keepGoing), .report(11_000, received: 999, .tooSlow)],
            message: "slower than 100 bytes/s for 5s"),
        Row(name: "bytes before the first report do not count toward the window",
            minSpeed: 100,
            steps: [.report(1000, received: 300, .keepGoing), .report(6000, received: 700, .tooSlow)]),
        Row(name: "a throttle hold restarts the window",
            minSpeed: 100,
            steps: [.report(1000, received: 0, .keepGoing), .report(4000, received: 0, held: true, .keepGoing),
                    .report(5000, received: 0, .keepGoing), .report(9999, received: 0, .keepGoing),
                    .report(10_000, received: 0, .tooSlow)]),
        Row(name: "too slow is checked before the stall",
            timeout: .seconds(5), minSpeed: 1,
            steps: [.report(1000, received: 0, .keepGoing), .report(6000, received: 0, .tooSlow)],
            message: "slower than 1 bytes/s for 5s"),
        Row(name: "without a minimum speed, slow movement never stops",
            steps: [.report(1000, received: 0, .keepGoing), .report(10_000, received: 1, .keepGoing),
                    .report(19_000, received: 2, .keepGoing), .report(28_000, received: 3, .keepGoing)]),
        Row(name: "a stopped transfer stays stopped",
            steps: [.report(1000, received: 0, .keepGoing), .report(11_000, received: 0, .stalled),
                    .report(12_000, received: 100, .stalled), .report(13_000, received: 200, held: true, .stalled)],
            message: "no data received for 10s"),
    ]

    @Test(arguments: rows)
    func verdicts(_ row: Row) {
        var watchdog = StallWatchdog(timeout: row.timeout, minSpeed: row.minSpeed, minSpeedTime: row.minSpeedTime)
        for (index, step) in row.steps.enumerated() {
            switch step {
            case let .report(now, received, sent, held, expected):
                let verdict = watchdog.observe(now: now, received: received, sent: sent, heldByThrottle: held)
                #expect(verdict == expected, "step \(index) at \(now) ms")
                #expect(watchdog.verdict == expected, "step \(index): the verdict is kept")
            case let .restart(now):
                watchdog.restartClocks(now: now)
            }
        }
        if let message = row.message { #expect(watchdog.stopMessage == message) }
        #expect((watchdog.stopMessage == nil) == (watchdog.verdict == .keepGoing))
    }
}
