import ArgumentParser
import Glibc
import MirrorCore

/// `--wait-lock`, for the commands that take the root's run lock (sync, lock).
struct LockWaitOption: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("When another run holds the root's lock, wait up to this long (500ms, 30s, 5m, 1h) instead of exiting 3.", valueName: "duration"))
    var waitLock: String?

    func validate() throws {
        if let waitLock, DurationSyntax.duration(waitLock) == nil {
            throw ValidationError("--wait-lock takes a duration such as 30s or 5m, not '\(waitLock)'")
        }
    }

    var duration: Duration? { waitLock.flatMap(DurationSyntax.duration) }

    /// The exit status for a lock that could not be had.
    static func status(for error: RunLockError, interruption: Interruption?) -> ExitStatus {
        if let signal = interruption?.received { return .forSignal(signal) }
        switch error {
        case .held, .otherLayout: return .locked
        case .cancelled: return .interrupted
        case .unusable, .refused: return .usage
        }
    }
}
