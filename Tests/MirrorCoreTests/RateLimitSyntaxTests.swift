import Synchronization
import Testing
@testable import MirrorCore

/// `rate_limit` values and timetables, and the token bucket that holds transfers to them.
struct RateLimitSyntaxTests {
    @Test(arguments: [
        ("1048576", [(0, Int64?(1_048_576))]),
        ("512KiB", [(0, 524_288)]),
        ("5MiB/s", [(0, 5_242_880)]),
        ("10MB", [(0, 10_000_000)]),
        ("off", [(0, nil)]),
        ("OFF", [(0, nil)]),
        ("08:00,512KiB 19:00,off", [(480, 524_288), (1140, nil)]),
        ("  00:00,1MiB   12:30,2MiB ", [(0, 1_048_576), (750, 2_097_152)]),
    ] as [(String, [(Int, Int64?)])])
    func readsRatesAndTimetables(text: String, changes: [(Int, Int64?)]) throws {
        let limit = try RateLimitSyntax.parse(text)
        #expect(limit.changes.map(\.minuteOfDay) == changes.map(\.0))
        #expect(limit.changes.map(\.bytesPerSecond) == changes.map(\.1))
    }

    @Test(arguments: [
        ("", "found an empty value"),
        ("fast", "found `fast`"),
        ("-5MiB", "found `-5MiB`"),
        ("0", "a rate of 0 would stop every transfer"),
        ("5M", "found `5M`"),
        ("08:00", "found `08:00`"),
        ("08:00,1MiB 19:00", "timetable item `19:00` is not `HH:MM,RATE`"),
        ("8:00,1MiB", "does not start with a time from 00:00 to 23:59"),
        ("08:60,1MiB", "does not start with a time from 00:00 to 23:59"),
        ("10:00,1MiB 09:00,off", "is not later than the one before it"),
        ("10:00,1MiB 10:00,off", "is not later than the one before it"),
        ("10:00,0", "a rate of 0"),
    ])
    func refusesWhatIsNotARate(text: String, phrase: String) {
        #expect {
            _ = try RateLimitSyntax.parse(text)
        } throws: { error in
            "\(error)".contains(phrase) || ((error as? ValueProblem)?.message.contains(phrase) ?? false)
        }
    }

    /// Before the first change of the day, the last one of the day before holds.
    @Test(arguments: [(0, nil), (479, nil), (480, 524_288), (1139, 524_288), (1140, nil), (1439, nil)] as [(Int, Int64?)])
    func aTimetableAnswersByTheMinute(minute: Int, rate: Int64?) throws {
        let limit = try RateLimitSyntax.parse("08:00,512KiB 19:00,off")
        #expect(limit.bytesPerSecond(atMinuteOfDay: minute) == rate)
        let wrapping = try RateLimitSyntax.parse("06:00,off 22:00,1MiB")
        #expect(wrapping.bytesPerSecond(atMinuteOfDay: 60) == 1_048_576)
    }

    /// A chunk goes through when the bucket holds no debt; the debt is repaid at the rate, and
    /// unused rate is kept for a quarter of a second only.
    @Test func theBucketLetsBytesThroughAtItsRate() throws {
        let bucket = RateBucket(limit: try RateLimitSyntax.parse("1000"), minuteOfDay: { 0 })
        #expect(bucket.wait(now: 10_000) == 0)
        bucket.spend(500, now: 10_000)
        #expect(bucket.wait(now: 10_000) == 500)
        #expect(bucket.wait(now: 10_250) == 250)
        #expect(bucket.wait(now: 10_500) == 0)
        // Ten idle seconds earn a quarter of a second's bytes, no more.
        bucket.spend(250 + 1000, now: 20_500)
        #expect(bucket.wait(now: 20_500) == 1000)
    }

    /// A timetable's limit is read again once a second: a change of the hour reaches transfers
    /// under way, and a bucket that turns `off` lets everything through.
    @Test func theBucketFollowsItsTimetable() throws {
        let minute = Mutex(0)
        let bucket = RateBucket(limit: try RateLimitSyntax.parse("00:00,1000 00:01,off"),
                                minuteOfDay: { minute.withLock { $0 } })
        bucket.spend(2000, now: 0)
        #expect(bucket.wait(now: 0) == 2000)
        minute.withLock { $0 = 1 }
        #expect(bucket.wait(now: 500) == 1500, "read again at most once a second")
        #expect(bucket.wait(now: 1000) == 0)
        bucket.spend(1 << 30, now: 1000)
        #expect(bucket.wait(now: 1000) == 0)
    }

    @Test func aThrottleWaitsForItsSlowestBucket() throws {
        let fast = RateBucket(limit: try RateLimitSyntax.parse("10000"), minuteOfDay: { 0 })
        let slow = RateBucket(limit: try RateLimitSyntax.parse("1000"), minuteOfDay: { 0 })
        let off = RateBucket(limit: try RateLimitSyntax.parse("off"), minuteOfDay: { 0 })
        let throttle = Throttle([fast, slow, off])
        #expect(throttle.buckets.count == 2, "an `off` limit holds nothing back")
        throttle.spend(1000, now: 0)
        #expect(throttle.wait(now: 0) == 1000)
        #expect(throttle.receiveBufferSize == 16 * 1024, "the smallest buffer for the slowest rate")
        #expect(Throttle([off]).receiveBufferSize == nil)
    }
}
