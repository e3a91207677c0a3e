import Glibc

/// The run lock, `lock` in the state directory (`ROOT/.mirror`, or `state_dir`; see
/// `StateDirectory`): an exclusive `flock(2)` held for a whole sync, so two runs never work on
/// the same root at once. The kernel drops the lock when its holder exits,
/// however it exits, so a killed run never leaves a stale lock. The file holds the holder's pid
/// for the message the next run prints.
///
/// A shard (`--shard K/N`) holds `lock` shared instead, and its own `lock.shard-K-of-N`
/// exclusively: shards never block each other, the same
/// shard never runs twice at once, and an unsharded run waits for every shard (and they for it).
public final class RunLock: Sendable {
    private let fds: [Int32]
    public let path: String

    private init(fds: [Int32], path: String) {
        self.fds = fds
        self.path = path
    }

    deinit {
        // Released outright, not just by the close: a process forked meanwhile (between its
        // fork and its exec) shares the open file description, and would hold the lock on.
        for fd in fds.reversed() {
            flock(fd, LOCK_UN)
            close(fd)
        }
    }

    static let fileName = "lock"

    /// `lock`, or `lock.shard-K-of-N`.
    static func name(shard: ShardSelection?) -> String {
        shard.map { fileName + "." + $0.fileNamePart } ?? fileName
    }

    /// Takes the lock of `root` (in `ROOT/.mirror`, or in `stateDirectory` when given),
    /// waiting up to `wait` (nil or zero: not at all) for another run to end.
    public static func acquire(
        root: String, stateDirectory: String? = nil, shard: ShardSelection? = nil, balance: ShardBalance = .hash,
        wait: Duration? = nil
    ) async throws(RunLockError) -> RunLock {
        try await acquire(
            in: StateDirectory(root: RootDirectory(path: root), separate: stateDirectory), shard: shard, balance: balance, wait: wait)
    }

    /// The same, in a state directory the run has opened already: the lock and the store are
    /// then both in the one directory it opened, whatever is renamed meanwhile.
    ///
    /// A shard also joins the root's layout (`lock.layout`): the shard count and `balance`
    /// that every shard running in the root shares. Shards of another layout would work on the
    /// same files under other locks and stores, so while any shard runs, one of another layout
    /// is refused (`otherLayout`).
    static func acquire(
        in root: StateDirectory, shard: ShardSelection? = nil, balance: ShardBalance = .hash, wait: Duration? = nil
    ) async throws(RunLockError) -> RunLock {
        let deadline = ContinuousClock.now + (wait ?? .zero)
        let main = try await lock(fileName, in: root, shared: shard != nil, until: deadline, waited: wait)
        guard let shard else {
            let text = Array("\(getpid())\n".utf8)
            _ = ftruncate(main, 0)
            _ = text.withUnsafeBytes { pwrite(main, $0.baseAddress, $0.count, 0) }
            return RunLock(fds: [main], path: root.file(fileName))
        }
        var held = [main]
        do {
            held.append(try await joinLayout("\(shard.count) shards by \(balance.rawValue)", in: root, until: deadline, waited: wait))
            let own = try await lock(name(shard: shard), in: root, shared: false, until: deadline, waited: wait)
            let text = Array("\(getpid())\n".utf8)
            _ = ftruncate(own, 0)
            _ = text.withUnsafeBytes { pwrite(own, $0.baseAddress, $0.count, 0) }
            return RunLock(fds: held + [own], path: root.file(name(shard: shard)))
        } catch {
            for fd in held.reversed() {
                flock(fd, LOCK_UN)
                close(fd)
            }
            throw error
        }
    }

    /// Longest a shard waits for the others joining the layout before it: each holds
    /// `lock.layouts` for a few system calls.
    static let layoutDecisionWait: Duration = .seconds(30)

    /// Takes `lock.layout` shared for `layout`: at once when no shard holds it (the layout is
    /// then written into it) or when the shards holding it share `layout`. Decided under
    /// `lock.layouts`, held only meanwhile, so two layouts never both get in.
    private static func joinLayout(
        _ layout: String, in root: StateDirectory, until deadline: ContinuousClock.Instant, waited wait: Duration?
    ) async throws(RunLockError) -> Int32 {
        // Held only while one shard joins, so always waited for (shards started together meet
        // here), whatever `--wait-lock` says.
        let guardian = try await lock(
            fileName + ".layouts", in: root, shared: false, until: max(deadline, ContinuousClock.now + Self.layoutDecisionWait), waited: wait)
        defer {
            flock(guardian, LOCK_UN)
            close(guardian)
        }
        let name = fileName + ".layout"
        let path = root.file(name)
        let fd = try openLockFile(name, in: root, path: path)
        if flock(fd, LOCK_EX | LOCK_NB) == 0 {
            // No shard runs: this run's layout is the root's now. (From exclusive to shared,
            // under `lock.layouts`: no one can come between.)
            let text = Array((layout + "\n").utf8)
            _ = ftruncate(fd, 0)
            _ = text.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
            flock(fd, LOCK_SH)
            return fd
        }
        var buffer = [UInt8](repeating: 0, count: 128)
        let count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        let running = String(decoding: buffer.prefix(max(0, count)).prefix { $0 != UInt8(ascii: "\n") }, as: UTF8.self)
        guard running == layout, flock(fd, LOCK_SH | LOCK_NB) == 0 else {
            close(fd)
            throw .otherLayout(path: path, running: running, wanted: layout)
        }
        return fd
    }

    /// `lock.pins` in the state directory of `manifest`, held exclusively while `mirror lock
    /// --shard` rewrites the manifest shared by every shard, for up to `wait`: each shard's pins
    /// are added to what the others wrote, never over it.
    public static func acquirePinWriting(for manifest: Manifest, wait: Duration = .seconds(600)) async throws(RunLockError) -> RunLock {
        let directory = StateDirectory(for: manifest)
        let name = fileName + ".pins"
        let fd = try await lock(name, in: directory, shared: false, until: ContinuousClock.now + wait, waited: wait)
        return RunLock(fds: [fd], path: directory.file(name))
    }

    /// Opens `name` in the state directory and `flock`s it, polling until `deadline`.
    private static func lock(_ name: String, in root: StateDirectory, shared: Bool, until deadline: ContinuousClock.Instant, waited wait: Duration?) async throws(RunLockError) -> Int32 {
        let path = root.file(name)
        let fd = try openLockFile(name, in: root, path: path)
        while flock(fd, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0 {
            let error = errno
            guard error == EWOULDBLOCK || error == EINTR else {
                close(fd)
                throw .unusable(path: path, errno: error)
            }
            if ContinuousClock.now >= deadline {
                let holder = holderPid(fd, wantedShared: shared)
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
        return fd
    }

    /// The pid written by the exclusive holder, or nil when the holders are shards (which
    /// share the lock and write no pid into it).
    private static func holderPid(_ fd: Int32, wantedShared: Bool) -> Int32? {
        if !wantedShared, flock(fd, LOCK_SH | LOCK_NB) == 0 {
            // Shared holders only: sharded runs, whose pids are in their own lock files.
            flock(fd, LOCK_UN)
            return nil
        }
        return readHolder(fd)
    }

    private static func readHolder(_ fd: Int32) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        let text = String(decoding: buffer[0..<count], as: UTF8.self).split(separator: "\n").first ?? ""
        return Int32(text)
    }

    /// Opens (creating it and the state directory if needed) the lock file, through the state
    /// directory's descriptor: a symbolic link at `ROOT/.mirror` or at the lock file is refused.
    private static func openLockFile(_ name: String, in root: StateDirectory, path: String) throws(RunLockError) -> Int32 {
        let opened: Int32?
        do {
            opened = try root.withDescriptor(create: true) { directory throws(TransferFailure) in
                let fd = openat(directory, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o666)
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
    /// The state directory or the lock file is not what mirror may use (a symbolic link at
    /// `ROOT/.mirror`, a `state_dir` inside the root or beside a `ROOT/.mirror`).
    case refused(String)
    /// The wait for the lock was interrupted.
    case cancelled
    /// Shards of another layout (shard count, `--shard-by`) are running in the root.
    case otherLayout(path: String, running: String, wanted: String)

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
        case .otherLayout(let path, let running, let wanted):
            return "shards of another layout (\(running)) are running in this root (\(path)); this run is one of \(wanted), and both would work on the same files: run one layout at a time"
        }
    }
}
