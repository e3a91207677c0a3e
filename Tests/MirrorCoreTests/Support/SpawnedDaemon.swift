import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A long-running program started with `posix_spawn` and reaped by its pid, for daemons that
/// close the descriptors they inherit (slurmctld, slurmd).
///
/// Foundation's `Process` cannot run those: it hands each child one end of a socket pair and,
/// when that end closes, its single process-manager thread calls a blocking `waitpid` on the
/// child. A daemon that closes every inherited descriptor at start-up thus parks that thread
/// until the daemon exits, and no other `Process` of the test run is seen to exit meanwhile.
///
/// The child starts with no signal blocked (test threads block SIGTERM), stdin from /dev/null,
/// stdout and stderr appended to `output`, and no other descriptor of the test process.
final class SpawnedDaemon: Sendable {
    let pid: pid_t
    /// The wait status once the daemon has been reaped.
    private let reaped = Mutex<Int32?>(nil)

    private init(pid: pid_t) {
        self.pid = pid
    }

    deinit { terminateAndWait() }

    /// Starts `executable arguments`. - Throws: `SystemCallError` when posix_spawn fails.
    static func spawn(_ executable: String, _ arguments: [String], output: String) throws -> SpawnedDaemon {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, output, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO)
        try closeFrom(3, &actions)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let result = argv.withUnsafeBufferPointer { argvPointer in
            posix_spawn(&pid, executable, &actions, &attributes,
                        UnsafeMutablePointer(mutating: argvPointer.baseAddress!), environ)
        }
        guard result == 0 else { throw SystemCallError("posix_spawn \(executable)", code: result) }
        return SpawnedDaemon(pid: pid)
    }

    /// Adds glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), which the Glibc
    /// module does not import: closing every descriptor from `lowest` in the child, with no
    /// window in which another thread's new descriptor slips through.
    private static func closeFrom(_ lowest: Int32, _ actions: inout posix_spawn_file_actions_t) throws {
        typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        guard let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") else {
            throw SystemCallError("posix_spawn_file_actions_addclosefrom_np (glibc 2.34 or later)", code: ENOSYS)
        }
        let result = unsafeBitCast(symbol, to: AddCloseFrom.self)(&actions, lowest)
        guard result == 0 else { throw SystemCallError("posix_spawn_file_actions_addclosefrom_np", code: result) }
    }

    /// Whether the daemon is still running; reaps it once it has exited.
    var isRunning: Bool {
        reaped.withLock { status in
            guard status == nil else { return false }
            var waitStatus: Int32 = 0
            let result = waitpid(pid, &waitStatus, WNOHANG)
            if result == pid || (result < 0 && errno == ECHILD) {
                status = waitStatus
                return false
            }
            return true
        }
    }

    /// How it ended, for failure messages: "exit N", "signal N" or "running".
    var termination: String {
        guard !isRunning, let status = reaped.withLock({ $0 }) else { return "running" }
        return status & 0x7f == 0 ? "exit \((status >> 8) & 0xff)" : "signal \(status & 0x7f)"
    }

    /// SIGTERM by its pid, then SIGKILL if it is still there after 5 s; returns once it has been
    /// reaped (or after 10 s at the most). Idempotent.
    func terminateAndWait() {
        stopByPid(pid) { isRunning }
    }
}
