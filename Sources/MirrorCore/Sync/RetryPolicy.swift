/// How long to wait before attempt `n + 1`: exponential backoff with full jitter, capped.
///
/// `delay(afterAttempt:)` draws uniformly from `0 ... min(cap, base * 2^(attempt-1))`, so many
/// clients retrying at once spread out instead of arriving together.
public struct RetryPolicy: Sendable, Equatable {
    public var base: Duration
    public var cap: Duration

    public static let standard = RetryPolicy(base: .seconds(1), cap: .seconds(60))

    public init(base: Duration, cap: Duration) {
        self.base = base
        self.cap = cap
    }

    /// The ceiling of the delay after the given failed attempt (1 for the first failure).
    public func ceiling(afterAttempt attempt: Int) -> Duration {
        let exponent = min(max(attempt - 1, 0), 30)
        let grown = base * (1 << exponent)
        return grown < cap ? grown : cap
    }

    /// - Parameter unitRandom: a number in `0...1`; the caller supplies it so tests can pin it.
    public func delay(afterAttempt attempt: Int, unitRandom: Double) -> Duration {
        ceiling(afterAttempt: attempt) * min(max(unitRandom, 0), 1)
    }
}
