import CLinux
import Glibc
import Synchronization
import Testing
@testable import MirrorCore

/// The engine's thread asks for a short slice (`PromptWakeups`) and keeps everything else the
/// thread was started with.
struct PromptWakeupsTests {
    /// An engine made on a thread at nice 5 (as under `nice -n 5`): its loop's thread runs at
    /// nice 5 still, as the same policy, with the slice asked for where the kernel has slices
    /// (Linux 6.12 and later). Run as root, as the tests are, a request that set nice 0 along
    /// with the slice would succeed and undo the user's `nice`.
    @Test func theEngineThreadGetsTheSliceAndKeepsItsNiceValue() throws {
        let seen = Mutex<(policy: UInt32, nice: Int32, slice: UInt64)??>(nil)
        let creator = JoinableThread {
            _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(gettid()), 5)
            let engine = TransferEngine()
            let done = Mutex(false)
            engine.post {
                seen.withLock { $0 = .some(PromptWakeups.current()) }
                done.withLock { $0 = true }
            }
            for _ in 0..<500 where !done.withLock({ $0 }) { usleep(10_000) }
            withExtendedLifetime(engine) {}
        }
        creator.join()
        let reported = try #require(seen.withLock { $0 }, "the engine ran nothing posted to it in 5 s")
        let scheduling = try #require(reported, "sched_getattr failed on the engine's thread")
        #expect(scheduling.policy == 0, "SCHED_OTHER (0) expected, found policy \(scheduling.policy)")
        #expect(scheduling.nice == 5, "the engine's thread runs at nice \(scheduling.nice), not the 5 it was started with")
        if Self.kernelHasSlices {
            let expected = min(PromptWakeups.slice, try Self.defaultSlice())
            #expect(scheduling.slice == expected, "slice \(scheduling.slice) ns, not \(expected)")
        }
    }

    /// A thread that runs as SCHED_BATCH stays so, and gets the slice too.
    @Test func aBatchThreadStaysBatch() throws {
        let seen = Mutex<(policy: UInt32, nice: Int32, slice: UInt64)?>(nil)
        let worker = JoinableThread {
            var parameters = sched_param()
            _ = sched_setscheduler(0, 3, &parameters)
            PromptWakeups.request()
            seen.withLock { $0 = PromptWakeups.current() }
        }
        worker.join()
        let scheduling = try #require(seen.withLock { $0 })
        #expect(scheduling.policy == 3, "SCHED_BATCH (3) expected, found policy \(scheduling.policy)")
        if Self.kernelHasSlices {
            #expect(scheduling.slice == min(PromptWakeups.slice, try Self.defaultSlice()))
        }
    }

    /// A slice already no longer than the one asked for is left as it is.
    @Test func aShorterSliceIsNotLengthened() throws {
        guard Self.kernelHasSlices else { return }
        let seen = Mutex<UInt64?>(nil)
        let worker = JoinableThread {
            _ = mirror_request_thread_slice(200_000)
            PromptWakeups.request()
            seen.withLock { $0 = PromptWakeups.current()?.slice }
        }
        worker.join()
        #expect(seen.withLock { $0 } == 200_000)
    }

    /// The slice a new thread of this process gets (the kernel's default, or what this thread
    /// was given, which the test's threads do not change).
    static func defaultSlice() throws -> UInt64 {
        let seen = Mutex<UInt64?>(nil)
        let probe = JoinableThread { seen.withLock { $0 = PromptWakeups.current()?.slice } }
        probe.join()
        return try #require(seen.withLock { $0 })
    }

    /// Linux 6.12 or later: a SCHED_OTHER thread may set its slice.
    static var kernelHasSlices: Bool {
        var names = utsname()
        uname(&names)
        let release = withUnsafeBytes(of: &names.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        let numbers = release.split(whereSeparator: { !$0.isNumber }).prefix(2).compactMap { Int($0) }
        guard numbers.count == 2 else { return false }
        return (numbers[0], numbers[1]) >= (6, 12)
    }
}
