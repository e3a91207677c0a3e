import Dispatch
import FoundationEssentials
import Glibc
import MirrorCore
import Synchronization

/// Turns the first SIGINT or SIGTERM into a call to `stop` (the caller cancels its work, which
/// leaves partial files consistent), and a second one into an immediate exit.
///
/// Used by the task that runs the command; the signal handlers share only `record`.
final class Interruption {
    private final class Record: Sendable {
        let signal = Mutex<Int32?>(nil)
    }

    private let sources: [any DispatchSourceSignal]
    private let record = Record()

    init(stop: @escaping @Sendable () -> Void) {
        var sources: [any DispatchSourceSignal] = []
        let record = self.record
        for number in [SIGINT, SIGTERM] {
            // The default action would kill the process before partial work is recorded.
            Glibc.signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
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
            source.resume()
            sources.append(source)
        }
        self.sources = sources
    }

    /// The first signal received, if any.
    var received: Int32? { record.signal.withLock { $0 } }

    func stopListening() {
        for source in sources { source.cancel() }
        Glibc.signal(SIGINT, SIG_DFL)
        Glibc.signal(SIGTERM, SIG_DFL)
    }
}

extension ManifestRunner {
    /// Runs `sync()` so that the first SIGINT or SIGTERM stops it cleanly. `cleanUp` runs once
    /// the work has ended, however it ended. A run lock that cannot be had ends the command
    /// with the matching exit status.
    func syncInterruptibly(console: Console, cleanUp: () async -> Void = {}) async throws -> (reports: [EntryReport], signal: Int32?) {
        let work = Task { try await sync() }
        let interruption = Interruption { work.cancel() }
        defer { interruption.stopListening() }
        do {
            let reports = try await work.value
            await cleanUp()
            return (reports, interruption.received)
        } catch let error as RunLockError {
            await cleanUp()
            if console.mode == .json { console.json(ErrorJSON.document(kind: "lock", message: error.description)) }
            console.error("mirror: \(error)")
            throw ExitWith(status: LockWaitOption.status(for: error, interruption: interruption))
        }
    }
}

extension ExitStatus {
    static func forSignal(_ signal: Int32) -> ExitStatus {
        signal == SIGINT ? .interrupted : .terminated
    }
}
