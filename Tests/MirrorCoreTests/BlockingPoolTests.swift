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

    /// Jobs that come one after another, each done before the next, are all run by one
    /// thread: a thread is started only when every thread is busy (a sync of 300 small files
    /// started 79 threads, one for nearly every group commit, where 9 do now).
    @Test func jobsOneAtATimeShareOneThread() {
        let pool = BlockingPool(limit: 8)
        let threads = Shared(Set<UInt64>())
        let done = DispatchSemaphore(value: 0)
        for _ in 0..<30 {
            pool.submit {
                let id = UInt64(pthread_self())
                threads.withLock { _ = $0.insert(id) }
                done.signal()
            }
            done.wait()
            // The next job comes once the thread is back waiting (a fixed pause was not always
            // long enough on a loaded machine).
            for _ in 0..<2_000 where pool.waitingThreads == 0 { usleep(1_000) }
        }
        #expect(threads.withLock { $0.count } == 1)
    }
}
