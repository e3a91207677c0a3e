/// Decides, each time a transfer reports its progress, whether it goes on: it stops one that
/// has moved no byte for the whole timeout (stalled), or that averaged under the minimum speed
/// over a window (too slow). Pure: the time is given, never read.
///
/// Fed about once a second (libcurl's progress callback). Time held back by the transfer's
/// rate limits counts as neither: it restarts the clocks.
struct StallWatchdog {
    enum Verdict: Equatable {
        case keepGoing
        /// No byte received or sent for the whole timeout.
        case stalled
        /// Fewer than `minSpeed` bytes/s over a `minSpeedTime` window.
        case tooSlow
    }

    let timeout: Duration
    let minSpeed: Int64?
    let minSpeedTime: Duration
    private let timeoutMilliseconds: Int64
    private let minSpeedMilliseconds: Int64

    /// The counts seen last, and when they last changed; nil before the first report.
    private var lastReceived: Int64 = -1
    private var lastSent: Int64 = -1
    private var lastMovement: Int64?
    /// The minimum-speed window: when it began and the bytes received by then.
    private var windowStart: Int64?
    private var windowBytes: Int64 = 0
    /// The verdict that stopped the transfer; a stopped transfer stays stopped.
    private(set) var verdict = Verdict.keepGoing

    init(timeout: Duration, minSpeed: Int64?, minSpeedTime: Duration) {
        self.timeout = timeout
        self.minSpeed = minSpeed
        self.minSpeedTime = minSpeedTime
        timeoutMilliseconds = timeout.milliseconds
        minSpeedMilliseconds = minSpeedTime.milliseconds
    }

    /// Takes one progress report: the bytes received and sent so far, at `now` (milliseconds
    /// on a clock that never jumps), and whether the rate limits hold the transfer back.
    mutating func observe(now: Int64, received: Int64, sent: Int64, heldByThrottle: Bool) -> Verdict {
        guard verdict == .keepGoing else { return verdict }
        if heldByThrottle {
            restartClocks(now: now)
            return .keepGoing
        }
        if let minSpeed {
            if let start = windowStart {
                if now - start >= minSpeedMilliseconds {
                    let rate = (received - windowBytes).saturatingMultiplied(by: 1000) / max(1, now - start)
                    if rate < minSpeed {
                        verdict = .tooSlow
                        return verdict
                    }
                    windowStart = now
                    windowBytes = received
                }
            } else {
                windowStart = now
                windowBytes = received
            }
        }
        guard let lastMovement, received == lastReceived, sent == lastSent else {
            lastReceived = received
            lastSent = sent
            lastMovement = now
            return .keepGoing
        }
        if now - lastMovement >= timeoutMilliseconds {
            verdict = .stalled
        }
        return verdict
    }

    /// Starts both clocks afresh at `now`: the transfer was held back by its rate limits until
    /// then, which is neither a stall nor slowness of the peer.
    mutating func restartClocks(now: Int64) {
        lastMovement = now
        windowStart = nil
    }

    /// Why the transfer was stopped, as the failure says it; nil while it goes on.
    var stopMessage: String? {
        switch verdict {
        case .keepGoing: nil
        case .stalled: "no data received for \(DurationSyntax.text(timeout))"
        case .tooSlow: "slower than \(minSpeed ?? 0) bytes/s for \(DurationSyntax.text(minSpeedTime))"
        }
    }
}
