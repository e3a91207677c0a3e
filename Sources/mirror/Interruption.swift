import Dispatch
import FoundationEssentials
import Glibc
import MirrorCore
import Synchronization

/// Where the signal handler writes the number of a signal received: the write end of a pipe
/// that `Interruption`'s thread reads. Set before the handler is installed, never changed after.
nonisolated(unsafe) private var signalPipe: Int32 = -1

/// Turns the first SIGINT or SIGTERM into a call to `stop` (the caller cancels its work, which
/// leaves partial files consistent), and a second one into an immediate exit.
///
/// The handler is a plain `sigaction` handler, installed before `init` returns: a signal that
/// arrives any time after that is caught. (A dispatch signal source registers itself later, on
/// another thread, and a signal arriving between ignoring the signal and that registration was
/// lost: the run went on to the end and exited 0.) The handler only writes the signal's number
/// to a pipe, which is all a signal handler may safely do; a thread of this type's own reads it.
final class Interruption {
    private final class Record: Sendable {
        let signal = Mutex<Int32?>(nil)
    }

    private let record = Record()
    private let pipe: (read: Int32, write: Int32)

    init(stop: @escaping @Sendable () -> Void) {
        var ends: [Int32] = [-1, -1]
        if Glibc.pipe(&ends) != 0 || fcntl(ends[0], F_SETFD, FD_CLOEXEC) != 0 || fcntl(ends[1], F_SETFD, FD_CLOEXEC) != 0 {
            // No pipe, no clean stop: the signals keep their default action.
            pipe = (-1, -1)
            return
        }
        pipe = (ends[0], ends[1])
        signalPipe = ends[1]
        let record = self.record
        let readEnd = ends[0]
        DetachedThread.start {
            var byte: UInt8 = 0
            while read(readEnd, &byte, 1) == 1 {
                let number = Int32(byte)
                let first = record.signal.withLock { received -> Bool in
                    defer { if received == nil { received = number } }
                    return received == nil
                }
                if first {
                    stop()
                } else {
                    Glibc.exit(number == SIGINT ? ExitStatus.interrupted.rawValue : ExitStatus.terminated.rawValue)
                }
            }
            close(readEnd)
        }
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { number in
            var byte = UInt8(truncatingIfNeeded: number)
            _ = write(signalPipe, &byte, 1)
        }
        sigemptyset(&action.sa_mask)
        action.sa_flags = SA_RESTART
        sigaction(SIGINT, &action, nil)
        sigaction(SIGTERM, &action, nil)
    }

    /// The first signal received, if any.
    var received: Int32? { record.signal.withLock { $0 } }

    func stopListening() {
        Glibc.signal(SIGINT, SIG_DFL)
        Glibc.signal(SIGTERM, SIG_DFL)
        // The reading thread sees the end of the pipe and leaves.
        if pipe.write >= 0 { close(pipe.write) }
    }
}

extension ManifestRunner {
    /// Runs `syncAndPrune()` so that the first SIGINT or SIGTERM stops it cleanly. `cleanUp` runs once
    /// the work has ended, however it ended. A run lock that cannot be had ends the command
    /// with the matching exit status.
    func syncInterruptibly(console: Console, cleanUp: () async -> Void = {}) async throws -> (result: SyncResult, signal: Int32?) {
        // Listening before the work starts: a signal at any moment from here on stops it.
        let started = Mutex<Task<SyncResult, any Error>?>(nil)
        let cancelled = Mutex(false)
        let interruption = Interruption {
            let work = started.withLock { work in
                cancelled.withLock { $0 = true }
                return work
            }
            work?.cancel()
        }
        defer { interruption.stopListening() }
        let work = Task { try await syncAndPrune() }
        let cancelNow = started.withLock { started in
            started = work
            return cancelled.withLock { $0 }
        }
        if cancelNow { work.cancel() }
        do {
            let result = try await work.value
            await cleanUp()
            return (result, interruption.received)
        } catch let error as RunLockError {
            await cleanUp()
            throw console.stop("lock", error.description, status: LockWaitOption.status(for: error, interruption: interruption))
        }
    }
}

extension ExitStatus {
    static func forSignal(_ signal: Int32) -> ExitStatus {
        signal == SIGINT ? .interrupted : .terminated
    }
}
