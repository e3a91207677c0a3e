import Foundation
#if canImport(Glibc)
import Glibc
#endif

extension Process {
    /// Starts the process with no signals blocked, as a shell would.
    ///
    /// Foundation's `Process.run()` spawns the child on the calling thread and the child inherits
    /// that thread's signal mask. Test code runs on Swift concurrency's worker threads, which block
    /// SIGINT, SIGTERM and most other signals, so a child started plainly with `run()` would
    /// never see the SIGTERM that is meant to stop it (nginx) or the SIGINT a test sends to check
    /// interruption handling (`mirror`). The mask is cleared only for the spawn and then restored.
    func runWithDefaultSignalMask() throws {
        var empty = sigset_t()
        sigemptyset(&empty)
        var previous = sigset_t()
        pthread_sigmask(SIG_SETMASK, &empty, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        try run()
    }
}
