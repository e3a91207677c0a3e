import Glibc

/// The run lock, `ROOT/.mirror/lock`: an exclusive `flock(2)` held for a whole sync, so two
/// runs never work on the same root at once. The kernel drops the lock when its holder exits,
/// however it exits, so a killed run never leaves a stale lock. The file holds the holder's pid
/// for the message the next run prints.
public final class RunLock: Sendable {
    private let fd: Int32
    public let path: String

    private init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    deinit {
        // Released outright, not just by the close: a process forked meanwhile (between its
        // fork and its exec) shares the open file description, and would hold the lock on.
        flock(fd, LOCK_UN)
        close(fd)
    }

    static let fileName = "lock"

    public static func location(root: String) -> String {
        (root.endsWithSlash ? root : root + "/") + RootDirectory.stateDirectoryName + "/" + fileName
    }

    /// Takes the lock, waiting up to `wait` (nil or zero: not at all) for another run to end.
    public static func acquire(root: String, wait: Duration? = nil) async throws(RunLockError) -> RunLock {
        try await acquire(in: RootDirectory(path: root), wait: wait)
    }

    /// The same, in a root the run has opened already: the lock, the store and the files are
    /// then all in the one directory it opened, whatever is renamed meanwhile.
    static func acquire(in root: RootDirectory, wait: Duration? = nil) async throws(RunLockError) -> RunLock {
        let path = location(root: root.path)
        let fd = try openLockFile(root: root, path: path)
        let deadline = ContinuousClock.now + (wait ?? .zero)
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let error = errno
            guard error == EWOULDBLOCK || error == EINTR else {
                close(fd)
                throw .unusable(path: path, errno: error)
            }
            if ContinuousClock.now >= deadline {
                let holder = readHolder(fd)
                close(fd)
                throw .held(path: path, pid: holder, waited: wait.flatMap { $0 > .zero ? $0 : nil })
            }
            do {
                try await Task.sleep(for: .milliseconds(100))
            } catch {
                close(fd)
                throw .cancelled
            }
        }
        let text = Array("\(getpid())\n".utf8)
        _ = ftruncate(fd, 0)
        _ = text.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        return RunLock(fd: fd, path: path)
    }

    private static func readHolder(_ fd: Int32) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        let text = String(decoding: buffer[0..<count], as: UTF8.self).split(separator: "\n").first ?? ""
        return Int32(text)
    }

    /// Opens (creating it and `ROOT/.mirror` if needed) the lock file, through the root's
    /// descriptor: a symbolic link at `.mirror` or at the lock file is refused.
    private static func openLockFile(root: RootDirectory, path: String) throws(RunLockError) -> Int32 {
        let opened: Int32?
        do {
            opened = try root.withStateDirectory(create: true) { directory throws(TransferFailure) in
                let fd = openat(directory, fileName, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o666)
                if fd < 0 { throw .localIO(path: path, operation: "open", errno: errno) }
                return fd
            }
        } catch {
            switch error {
            case .localIO(let failed, _, let code): throw .unusable(path: failed, errno: code)
            case .localConflict(let reason): throw .refused(reason)
            default: throw .unusable(path: path, errno: EIO)
            }
        }
        guard let opened else { throw .unusable(path: path, errno: ENOENT) }
        return opened
    }
}

public enum RunLockError: Error, Sendable, CustomStringConvertible {
    /// Another run holds the lock (still, after `waited`, when the caller waited for it).
    case held(path: String, pid: Int32?, waited: Duration?)
    case unusable(path: String, errno: Int32)
    /// `ROOT/.mirror` or the lock file is not what mirror may use (a symbolic link).
    case refused(String)
    /// The wait for the lock was interrupted.
    case cancelled

    public var description: String {
        switch self {
        case .held(let path, let pid, let waited):
            let who = pid.map { "process \($0)" } ?? "another process"
            guard let waited else {
                return "another mirror run (\(who)) holds \(path); try again later or use --wait-lock"
            }
            // Suggesting --wait-lock to someone who used it helps no one.
            return "another mirror run (\(who)) still holds \(path) after waiting \(DurationSyntax.text(waited)); try again once it has finished, or wait longer"
        case .unusable(let path, let code):
            return "cannot lock \(path): \(String(cString: strerror(code)))"
        case .refused(let reason):
            return reason
        case .cancelled:
            return "interrupted while waiting for the lock"
        }
    }
}
