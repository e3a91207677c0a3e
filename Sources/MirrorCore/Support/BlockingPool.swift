import Dispatch
import Synchronization

/// Threads of the run's own for work that blocks in the kernel: finishing a hash, fsync,
/// rename. Swift's cooperative pool has one thread per core, so a blocking call there stalls
/// every other task, and on two cores no more than two fsyncs could be in flight; here up to
/// `limit` run at once, which lets the file system commit them to its journal together.
///
/// Threads are started on demand and leave after `linger` without work.
final class BlockingPool: Sendable {
    private struct State {
        var queue: [@Sendable () -> Void] = []
        var threads = 0
    }

    private let limit: Int
    private let state = Mutex(State())
    /// Signalled once per queued job.
    private let queued = DispatchSemaphore(value: 0)
    static let linger = DispatchTimeInterval.milliseconds(200)

    init(limit: Int) {
        self.limit = max(1, limit)
    }

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
            guard state.threads < limit else { return false }
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
            if queued.wait(timeout: .now() + Self.linger) == .timedOut {
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

/// fsync of directories after renames into them, shared between the files renamed at about the
/// same time: a caller needs an fsync that began after its rename, and every caller waiting
/// for the next fsync of a directory is served by that one call.
final class DirectorySync: Sendable {
    private struct Directory {
        var started = 0
        var completed = 0
        var running = false
        /// How the last completed fsync ended: the errno of a failure.
        var lastFailure: Int32?
        var waiting: [DispatchSemaphore] = []
    }

    private let directories = Mutex([String: Directory]())
    private let syncDirectory: @Sendable (String) -> Int32?

    init(syncDirectory: @escaping @Sendable (String) -> Int32? = FileSystem.syncDirectory) {
        self.syncDirectory = syncDirectory
    }

    /// Returns once an fsync of `path`, begun after this call, has returned, with the errno
    /// it failed with. Blocks: call it from a `BlockingPool` thread.
    func sync(_ path: String) -> Int32? {
        // The first fsync that begins from now on.
        let needed = directories.withLock { $0[path, default: Directory()].started + 1 }
        while true {
            enum Step { case done(Int32?), lead(Int), wait(DispatchSemaphore) }
            let step = directories.withLock { directories -> Step in
                var directory = directories[path, default: Directory()]
                defer { directories[path] = directory }
                // The last fsync to complete began after this call: its outcome is ours.
                if directory.completed >= needed { return .done(directory.lastFailure) }
                if directory.running {
                    let wake = DispatchSemaphore(value: 0)
                    directory.waiting.append(wake)
                    return .wait(wake)
                }
                directory.running = true
                directory.started += 1
                return .lead(directory.started)
            }
            switch step {
            case .done(let failure):
                return failure
            case .wait(let wake):
                wake.wait()
            case .lead(let number):
                let failure = syncDirectory(path)
                let waiting = directories.withLock { directories -> [DispatchSemaphore] in
                    var directory = directories[path, default: Directory()]
                    directory.completed = number
                    directory.lastFailure = failure
                    directory.running = false
                    let waiting = directory.waiting
                    directory.waiting = []
                    directories[path] = directory
                    return waiting
                }
                for wake in waiting { wake.signal() }
            }
        }
    }
}
