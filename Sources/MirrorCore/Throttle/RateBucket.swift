import Glibc

/// A token bucket that holds transfers to one `RateLimit`: each byte received takes a token,
/// tokens come back at the limit's rate, and a transfer waits while the bucket is in debt.
///
/// A chunk is let through whole when the bucket holds no debt, and may drive it into debt: the
/// transfers sharing it then wait until the debt is repaid, so over any stretch longer than a
/// chunk the bytes let through keep to the rate. Unused tokens are kept for a quarter of a
/// second at most: a pause of the transfers is not made up for by a burst afterwards.
///
/// Touched only on the transfer engine's thread (hence `@unchecked Sendable`).
final class RateBucket: @unchecked Sendable {
    let limit: RateLimit
    private let minuteOfDay: @Sendable () -> Int
    private var tokens: Double = 0
    private var refilledAt: Int64?
    /// The limit now; nil: none. Read from the timetable at most once a second.
    private var rate: Int64?
    private var rateReadAt: Int64?

    /// How much unused rate is kept, in milliseconds of it.
    static let burstMilliseconds: Int64 = 250
    /// How often a timetable is looked at again.
    static let timetableCheckMilliseconds: Int64 = 1000

    init(limit: RateLimit, minuteOfDay: @escaping @Sendable () -> Int = LocalClock.minuteOfDay) {
        self.limit = limit
        self.minuteOfDay = minuteOfDay
    }

    /// Milliseconds from `now` (on `MonotonicClock`) until the bucket lets bytes through; 0:
    /// at once.
    func wait(now: Int64) -> Int64 {
        refill(now: now)
        guard let rate, tokens < 0 else { return 0 }
        return max(1, Int64((-tokens * 1000 / Double(rate)).rounded(.up)))
    }

    /// Takes `bytes` tokens, going into debt if there are fewer.
    func spend(_ bytes: Int, now: Int64) {
        refill(now: now)
        if rate != nil { tokens -= Double(bytes) }
    }

    private func refill(now: Int64) {
        if rateReadAt.map({ now - $0 >= Self.timetableCheckMilliseconds }) ?? true {
            rateReadAt = now
            let current = limit.bytesPerSecond(atMinuteOfDay: minuteOfDay())
            if current != rate {
                rate = current
                // A new limit starts from an empty bucket, not from the debt of the old one.
                tokens = 0
                refilledAt = now
            }
        }
        guard let rate else { return }
        let elapsed = max(0, now - (refilledAt ?? now))
        refilledAt = now
        let capacity = Double(rate) * Double(Self.burstMilliseconds) / 1000
        tokens = min(capacity, tokens + Double(rate) * Double(elapsed) / 1000)
    }
}

/// The buckets one request is held to (the run's, its host's, its entry's), all of which must
/// let bytes through.
struct Throttle: Sendable {
    var buckets: [RateBucket]

    init(_ buckets: [RateBucket]) {
        self.buckets = buckets.filter { !$0.limit.isOff }
    }

    var isEmpty: Bool { buckets.isEmpty }

    /// Milliseconds from `now` until every bucket lets bytes through; 0: at once.
    func wait(now: Int64) -> Int64 {
        buckets.reduce(0) { max($0, $1.wait(now: now)) }
    }

    func spend(_ bytes: Int, now: Int64) {
        for bucket in buckets { bucket.spend(bytes, now: now) }
    }

    /// libcurl's receive buffer for a held transfer: 1/64 s of the lowest rate, at least 16 KiB
    /// (what libcurl hands over at a time anyway). What libcurl has read from the socket but a
    /// paused transfer has not taken is bandwidth used ahead of the limit; a small buffer keeps
    /// that small. Nil: no bucket limits anything, keep the usual size.
    var receiveBufferSize: Int? {
        guard let lowest = buckets.compactMap(\.limit.lowestBytesPerSecond).min() else { return nil }
        return Int(min(max(lowest / 64, Int64(TransferContext.smallestReceiveBuffer)), Int64(TransferContext.receiveBufferSize)))
    }
}

/// The local wall clock, as a timetable reads it.
enum LocalClock {
    /// Minutes since local midnight (0–1439), in the time zone of `TZ` or the system's.
    @Sendable static func minuteOfDay() -> Int {
        var now = time(nil)
        var parts = tm()
        guard localtime_r(&now, &parts) != nil else { return 0 }
        return Int(parts.tm_hour) * 60 + Int(parts.tm_min)
    }
}
