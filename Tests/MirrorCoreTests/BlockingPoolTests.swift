import Foundation
import Synchronization
import Testing
@testable import MirrorCore

/// A value shared between threads in a test.
final class Shared<Value: Sendable>: Sendable {
    let value: Mutex<Value>
    init(_ value: Value) { self.value = Mutex(value) }
    func withLock<R>(_ body: (inout Value) -> R) -> R { value.withLock { body(&$0) } }
}

struct BlockingPoolTests {
    @Test func runsEveryJobWithNoMoreThreadsThanItsLimit() async {
        let pool = BlockingPool(limit: 3)
        let running = Shared((now: 0, most: 0))
        let results = await withTaskGroup(of: Int.self) { group in
            for job in 0..<24 {
                group.addTask {
                    await pool.run {
                        running.withLock { $0.now += 1; $0.most = max($0.most, $0.now) }
                        usleep(5_000)
                        running.withLock { $0.now -= 1 }
                        return job * 2
                    }
                }
            }
            return await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(results.sorted() == (0..<24).map { $0 * 2 })
        let most = running.withLock { $0.most }
        #expect(most <= 3)
        #expect(most >= 2, "jobs should run side by side")
    }
}

struct DirectorySyncTests {
    /// Every caller returns only after a sync that began after it called, and callers that
    /// arrive while a sync runs share the next one.
    @Test func concurrentCallersShareSyncsThatBeganAfterThem() async {
        let clock = ContinuousClock()
        let syncs = Shared([(start: ContinuousClock.Instant, end: ContinuousClock.Instant)]())
        let directories = DirectorySync { _ in
            let start = clock.now
            usleep(20_000)
            syncs.withLock { $0.append((start, clock.now)) }
            return nil
        }
        let pool = BlockingPool(limit: 16)
        let calls = await withTaskGroup(of: (ContinuousClock.Instant, ContinuousClock.Instant).self) { group in
            for _ in 0..<16 {
                group.addTask {
                    await pool.run {
                        let called = clock.now
                        _ = directories.sync("/some/directory")
                        return (called, clock.now)
                    }
                }
            }
            return await group.reduce(into: [(ContinuousClock.Instant, ContinuousClock.Instant)]()) { $0.append($1) }
        }
        let done = syncs.withLock { $0 }
        #expect(done.count < 16)
        for (called, returned) in calls {
            #expect(done.contains { $0.start >= called && $0.end <= returned })
        }
    }
}

extension DirectorySyncTests {
    /// A failed fsync is reported to every caller it served, and a later good one clears it.
    @Test func aFailureReachesEveryCallerItServed() async {
        let results = Shared([Int32?]())
        let fail = Shared(true)
        let directories = DirectorySync { _ in
            usleep(10_000)
            return fail.withLock { $0 } ? EIO : nil
        }
        let pool = BlockingPool(limit: 8)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    let result = await pool.run { directories.sync("/d") }
                    results.withLock { $0.append(result) }
                }
            }
        }
        #expect(results.withLock { $0 } == Array(repeating: EIO, count: 8))
        fail.withLock { $0 = false }
        #expect(await pool.run { directories.sync("/d") } == nil)
    }
}
