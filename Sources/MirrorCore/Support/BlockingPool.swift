import Dispatch
import Synchronization

/// Threads of the run's own for work that blocks in the kernel: finishing a hash, fsync,
/// rename. Swift's cooperative pool has one thread per core, so a blocking call there stalls
/// every other task, and on two cores no more than two fsyncs could be in flight; here up to
/// `limit` run at once, which lets the file system commit them to its journal together.
///
/// Threads are started on demand, only when every thread is busy, and leave after `linger`
/// without work.
final class BlockingPool: Sendable {
    private struct State {
        var queue: [@Sendable () -> Void] = []
        var threads = 0
        /// Threads waiting for a job: a job they can take starts no thread.
        var waiting = 0
    }

    private let limit: Int
    private let state = Mutex(State())
    /// Signalled once per queued job.
    private let queued = DispatchSemaphore(value: 0)
    static let linger = DispatchTimeInterval.milliseconds(200)

    init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Threads waiting for a job now.
    var waitingThreads: Int { state.withLock { $0.waiting } }

    /// Runs `body` on one of the pool's threads and returns its result.
    func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            submit { continuation.resume(returning: body()) }
        }
    }

    /// Runs `job` on one of the pool's threads.
    func submit(_ job: @escaping @Sendable () -> Void) {
        let startThread = state.withLock { state -> Bool in
            state.queue.append(job)
            // A thread that was woken but has not taken its job yet still counts as waiting:
            // a job may then wait for a busy thread, never go untaken (each is signalled).
            guard state.queue.count > state.waiting, state.threads < limit else { return false }
            state.threads += 1
            return true
        }
        if startThread {
            DetachedThread.start { [self] in work() }
        }
        queued.signal()
    }

    private func work() {
        while true {
            state.withLock { $0.waiting += 1 }
            let woken = queued.wait(timeout: .now() + Self.linger)
            state.withLock { $0.waiting -= 1 }
            if woken == .timedOut {
                // Leave only with nothing queued: a job queued from here on starts a thread,
                // since this one no longer counts.
                let leave = state.withLock { state -> Bool in
                    guard state.queue.isEmpty else { return false }
                    state.threads -= 1
                    return true
                }
                if leave { return }
                continue
            }
            let job = state.withLock { state in state.queue.removeFirst() }
            job()
        }
    }
}
