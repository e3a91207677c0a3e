/// A bandwidth limit: bytes per second, fixed or changing with the local time of day
/// (`rate_limit`, `--rate-limit`).
///
/// A timetable is a list of changes, each from a minute of the day until the next one; before
/// the first change of a day, the last one of the day before still holds.
public struct RateLimit: Sendable, Equatable, CustomStringConvertible {
    /// From `minuteOfDay` (0–1439, local time) on, at most `bytesPerSecond`; nil: no limit.
    public struct Change: Sendable, Equatable {
        public var minuteOfDay: Int
        public var bytesPerSecond: Int64?

        public init(minuteOfDay: Int, bytesPerSecond: Int64?) {
            self.minuteOfDay = minuteOfDay
            self.bytesPerSecond = bytesPerSecond
        }
    }

    /// In increasing order of `minuteOfDay`, at least one.
    public private(set) var changes: [Change]
    /// The text it was read from, for messages.
    public var description: String

    /// The same limit all day long.
    public init(bytesPerSecond: Int64?, description: String) {
        changes = [Change(minuteOfDay: 0, bytesPerSecond: bytesPerSecond)]
        self.description = description
    }

    /// A timetable; `changes` must be non-empty and in increasing order of minute.
    init(changes: [Change], description: String) {
        precondition(!changes.isEmpty, "a timetable needs at least one change")
        self.changes = changes
        self.description = description
    }

    /// The limit at `minuteOfDay` (0–1439) of the local day; nil: none.
    public func bytesPerSecond(atMinuteOfDay minute: Int) -> Int64? {
        // The last change at or before the minute; before the first, the day before's last.
        (changes.last { $0.minuteOfDay <= minute } ?? changes[changes.count - 1]).bytesPerSecond
    }

    /// The lowest limit the timetable ever sets; nil when it never limits.
    var lowestBytesPerSecond: Int64? {
        changes.compactMap(\.bytesPerSecond).min()
    }

    /// `text` read as `rate_limit` is written (see mirror-manifest(5)).
    public static func parse(_ text: String) throws(InvalidRateLimit) -> RateLimit {
        do {
            return try RateLimitSyntax.parse(text)
        } catch {
            throw InvalidRateLimit(message: error.message)
        }
    }

    /// Why a rate limit given outside a manifest (`--rate-limit`) is unusable.
    public struct InvalidRateLimit: Error, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }

    /// Whether it never limits anything (`off`, or a timetable of `off` only).
    var isOff: Bool { lowestBytesPerSecond == nil }
}
