/// Every exit code `mirror` uses, in one place (see the EXIT STATUS section of mirror(1)).
enum ExitStatus: Int32, CaseIterable {
    /// Every entry is in its wanted state.
    case success = 0
    /// At least one entry failed; the others were still completed.
    case entriesFailed = 1
    /// Usage or manifest error; nothing was transferred.
    case usage = 2
    /// Another `mirror` run holds the lock on this root.
    case locked = 3
    /// The network stayed unreachable past the connectivity wait.
    case unreachable = 4
    /// `plan --exit-code`: changes are pending.
    case changesPending = 5
    /// Interrupted by SIGINT; partial work is kept.
    case interrupted = 130
    /// Stopped by SIGTERM; partial work is kept.
    case terminated = 143
}

import MirrorCore

extension ExitStatus {
    /// What the status means, for the EXIT STATUS section of `mirror --help`.
    var meaning: String {
        switch self {
        case .success: "every entry is in its wanted state"
        case .entriesFailed: "at least one entry failed; the others were still completed (sync --prune: also when the prune was refused or incomplete)"
        case .usage: "usage or manifest error; nothing was transferred"
        case .locked: "another mirror run holds the lock on this root"
        case .unreachable: "the network stayed unreachable past connectivity.wait"
        case .changesPending: "plan --exit-code: changes are pending"
        case .interrupted: "interrupted by SIGINT: partial work is kept for the next run"
        case .terminated: "terminated by SIGTERM: partial work is kept for the next run"
        }
    }

    /// The status of a run in which some entries failed: 4 when the network stayed away for
    /// one of them (the run could not have succeeded), otherwise 1.
    static func forFailures(_ reports: [EntryReport]) -> ExitStatus {
        let unreachable = reports.contains {
            if case .failed(.unreachable) = $0.outcome { return true }
            if case .failed(.checksumFileUnavailable(_, .unreachable)) = $0.outcome { return true }
            return false
        }
        return unreachable ? .unreachable : .entriesFailed
    }
}

/// Ends a command with an exit status after its output is written.
struct ExitWith: Error {
    var status: ExitStatus
}
