import Glibc

/// Why an output could not be written.
public struct OutputFileError: Error, Sendable, Equatable, CustomStringConvertible {
    public var path: String
    public var description: String

    /// A system call on `path` failed.
    init(path: String, operation: String, errno code: Int32) {
        self.path = path
        description = "cannot \(operation) \(path): \(String(cString: strerror(code)))"
    }

    /// `path` leads to something an output must not be written to; nothing was written.
    init(path: String, refused reason: String) {
        self.path = path
        description = "\(path) \(reason)"
    }
}

/// A file the tool writes as its output: `sync --report`, `sync --metrics-file`,
/// `report --failed-manifest`, and the manifest that `mirror lock` pins. This type alone decides
/// how each is written, from what is at its path when it is written (`OutputTarget`):
///
/// - a regular file, or nothing yet: replaced whole (`AtomicFile`: a temporary name beside
///   it, fsync, rename), so no reader ever sees part of it; through a symbolic link, the file
///   it points to is replaced and the link kept. A replaced file keeps its permissions, but
///   the new file is owned by the user running the tool, never by the old file's owner (an
///   output pre-created by another user must not stay theirs to rewrite); only the manifest
///   (`Accepts.regularFile`) keeps its owner and group too (as far as the process may set them);
/// - a symbolic link at the path is followed only when the link is owned by the user running
///   the tool, or by root (`/dev/stdout`); a link another user owns, which anyone may plant in
///   a shared directory, is refused whatever it points to;
/// - `-`, or a path that names the file standard output or standard error is open on
///   (`/dev/stdout`, `/proc/self/fd/2`, or the very file stdout was redirected to): written
///   to that descriptor;
/// - an existing character device or FIFO (`/dev/null`, a named pipe): opened without
///   blocking and written in place, never replaced: a FIFO that no process reads is an error,
///   not a hang;
/// - anything else (a directory, a block device, a socket, a symbolic link to nothing) is
///   refused, with nothing written.
///
/// `Accepts.regularFile` (the manifest) allows only the first form.
public struct OutputFile: Sendable {
    public enum Accepts: Sendable {
        /// Every form above.
        case any
        /// Only a regular file (or a symbolic link to one) is written; anything else is refused.
        case regularFile
    }

    public let path: String
    public let accepts: Accepts

    public init(path: String, accepts: Accepts = .any) {
        self.path = path
        self.accepts = accepts
    }

    /// Where a write would go now.
    public var target: OutputTarget {
        OutputTarget(path: path, OutputTarget.Facts(of: path), accepts: accepts)
    }

    public func write(_ text: String) throws(OutputFileError) {
        try write(Array(text.utf8))
    }

    public func write(_ bytes: [UInt8]) throws(OutputFileError) {
        switch target {
        case .standardStream(let descriptor):
            try Self.writeAll(bytes, to: descriptor, path: path)
        case .replace(let file, let existing):
            // Only the manifest keeps its owner: an output is the running user's.
            try AtomicFile.replace(
                file, with: bytes, mode: existing?.mode,
                owner: accepts == .regularFile ? existing.map { ($0.owner, $0.group) } : nil)
        case .stream(let stream):
            try Self.writeInPlace(bytes, to: stream)
        case .refused(let reason):
            throw OutputFileError(path: path, refused: reason)
        }
    }

    /// The bytes the output holds now, up to `limit`, when a write would replace a regular
    /// file: what a new version carries over from the old (the metrics file's last success).
    /// Nil for a new file, a stream, a standard stream or a refused path: they are never read,
    /// and nothing here blocks (the file is opened with `O_NONBLOCK` and read only when it is
    /// still a regular file once open).
    public func currentContents(limit: Int) -> [UInt8]? {
        guard case .replace(let file, .some) = target else { return nil }
        let descriptor = open(file, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while bytes.count < limit {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress!, min($0.count, limit - bytes.count)) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            bytes += buffer[..<count]
        }
        return bytes
    }

    /// Opens an existing character device or FIFO without blocking (a FIFO with no reader
    /// fails with ENXIO), checks that the opened file is still one, then writes with blocking
    /// writes.
    private static func writeInPlace(_ bytes: [UInt8], to path: String) throws(OutputFileError) {
        let descriptor = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
        guard descriptor >= 0 else {
            if errno == ENXIO { throw OutputFileError(path: path, refused: "is a FIFO that no process is reading; start its reader first") }
            throw OutputFileError(path: path, operation: "open", errno: errno)
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0, [S_IFCHR, S_IFIFO].contains(info.st_mode & S_IFMT) else {
            throw OutputFileError(path: path, refused: "changed while it was opened; nothing was written")
        }
        let flags = fcntl(descriptor, F_GETFL)
        if flags >= 0 { _ = fcntl(descriptor, F_SETFL, flags & ~O_NONBLOCK) }
        try writeAll(bytes, to: descriptor, path: path)
    }

    /// Writes every byte to `descriptor`, waiting for it when it is non-blocking. A reader that
    /// goes away is an error (EPIPE), not the end of the process: SIGPIPE is held back on this
    /// thread while writing, and one raised is taken back.
    private static func writeAll(_ bytes: [UInt8], to descriptor: Int32, path: String) throws(OutputFileError) {
        var pipeSignal = sigset_t()
        sigemptyset(&pipeSignal)
        sigaddset(&pipeSignal, SIGPIPE)
        var previous = sigset_t()
        pthread_sigmask(SIG_BLOCK, &pipeSignal, &previous)
        defer {
            var pending = sigset_t()
            if sigpending(&pending) == 0, sigismember(&pending, SIGPIPE) == 1, sigismember(&previous, SIGPIPE) == 0 {
                var none = timespec()
                _ = sigtimedwait(&pipeSignal, nil, &none)
            }
            pthread_sigmask(SIG_SETMASK, &previous, nil)
        }
        if let code = bytes.withUnsafeBytes({ DescriptorWrite.all($0, to: descriptor) }) {
            throw OutputFileError(path: path, operation: "write", errno: code)
        }
    }
}

/// How `OutputFile` writes to a path, decided from what is there: a pure function of `Facts`,
/// tested as a table.
public enum OutputTarget: Sendable, Equatable {
    /// The permissions and owner of a regular file that is replaced.
    public struct Existing: Sendable, Equatable {
        public var mode: mode_t
        public var owner: uid_t
        public var group: gid_t
    }

    /// Standard output or standard error, by its descriptor.
    case standardStream(Int32)
    /// Replace the regular file at this path (the symbolic link's target, made absolute), or
    /// create it when `existing` is nil.
    case replace(String, existing: Existing?)
    /// Write in place to the character device or FIFO at this path.
    case stream(String)
    /// Write nothing; the reason completes a sentence that begins with the path.
    case refused(String)

    /// What is at an output's path.
    public struct Facts: Sendable, Equatable {
        public enum Kind: Sendable, Equatable {
            case missing, regular, directory, characterDevice, fifo, blockDevice, socket
        }

        /// The path is `-`.
        var isDash = false
        /// The path itself is a symbolic link.
        var isLink = false
        /// The owner of that link (not of what it leads to).
        var linkOwner: uid_t?
        /// The user running the tool (`geteuid()`).
        var user: uid_t = geteuid()
        /// What the path leads to, through any links.
        var kind: Kind
        /// The path through its links, made absolute; nil when it leads nowhere.
        var resolved: String?
        /// The descriptor, 1 or 2, whose file the path leads to.
        var standardStream: Int32?
        var existing: Existing?

        init(
            isDash: Bool = false, isLink: Bool = false, linkOwner: uid_t? = nil, user: uid_t = geteuid(), kind: Kind,
            resolved: String? = nil, standardStream: Int32? = nil, existing: Existing? = nil
        ) {
            self.isDash = isDash
            self.isLink = isLink
            self.linkOwner = isLink ? (linkOwner ?? user) : nil
            self.user = user
            self.kind = kind
            self.resolved = resolved
            self.standardStream = standardStream
            self.existing = existing
        }

        /// The facts at `path` now (`lstat`, `stat`, `realpath`, and `fstat` of 1 and 2).
        init(of path: String) {
            guard path != "-" else {
                self.init(isDash: true, kind: .missing)
                return
            }
            var link = stat()
            guard lstat(path, &link) == 0 else {
                self.init(kind: .missing)
                return
            }
            let isLink = link.st_mode & S_IFMT == S_IFLNK
            let linkOwner: uid_t? = isLink ? link.st_uid : nil
            if isLink, let linkOwner, linkOwner != geteuid(), linkOwner != 0 {
                // Not followed at all: nothing is learnt about what another user's link names.
                self.init(isLink: true, linkOwner: linkOwner, kind: .missing)
                return
            }
            var info = stat()
            guard stat(path, &info) == 0 else {
                self.init(isLink: isLink, linkOwner: linkOwner, kind: .missing)
                return
            }
            let kind: Kind = switch info.st_mode & S_IFMT {
            case S_IFREG: .regular
            case S_IFDIR: .directory
            case S_IFCHR: .characterDevice
            case S_IFIFO: .fifo
            case S_IFBLK: .blockDevice
            default: .socket
            }
            var resolved: String?
            if isLink, let real = realpath(path, nil) {
                resolved = String(cString: real)
                free(real)
            }
            var standardStream: Int32?
            for descriptor in [STDOUT_FILENO, STDERR_FILENO] {
                var open = stat()
                if fstat(descriptor, &open) == 0, open.st_dev == info.st_dev, open.st_ino == info.st_ino {
                    standardStream = descriptor
                    break
                }
            }
            self.init(
                isLink: isLink, linkOwner: linkOwner, kind: kind, resolved: resolved, standardStream: standardStream,
                existing: Existing(mode: info.st_mode & 0o7777, owner: info.st_uid, group: info.st_gid))
        }
    }

    /// The decision for an output of `path`, at which `facts` were found.
    init(path: String, _ facts: Facts, accepts: OutputFile.Accepts) {
        let streams = accepts == .any
        if facts.isDash {
            self = streams ? .standardStream(STDOUT_FILENO) : .refused("is standard output, not a file")
            return
        }
        // Before anything the link leads to: another user's link is never followed.
        if facts.isLink, let owner = facts.linkOwner, owner != facts.user, owner != 0 {
            self = .refused(
                "is a symbolic link owned by uid \(owner), not by the user running mirror (uid \(facts.user)) or root; "
                    + "it is not followed: remove it, or give another path")
            return
        }
        if streams, let descriptor = facts.standardStream {
            self = .standardStream(descriptor)
            return
        }
        switch facts.kind {
        case .missing where facts.isLink:
            self = .refused("is a symbolic link to nothing; create the file it names, or give that name")
        case .missing:
            self = .replace(path, existing: nil)
        case .regular where facts.isLink:
            // The link is kept: the file it names is replaced, in its own directory.
            self = facts.resolved.map { .replace($0, existing: facts.existing) }
                ?? .refused("is a symbolic link whose target cannot be resolved")
        case .regular:
            self = .replace(path, existing: facts.existing)
        case .characterDevice, .fifo:
            self = streams ? .stream(path) : .refused("is a \(facts.kind == .fifo ? "FIFO" : "character device"), not a regular file")
        case .directory:
            self = .refused("is a directory")
        case .blockDevice:
            self = .refused("is a block device; an output is written only to a regular file, a character device or a FIFO")
        case .socket:
            self = .refused("is a socket; an output is written only to a regular file, a character device or a FIFO")
        }
    }
}

/// Writing a whole buffer to a descriptor: again after a signal interrupts, and after waiting
/// for room when the descriptor is non-blocking.
public enum DescriptorWrite {
    /// Writes all of `bytes` to `descriptor`; nil when done, else the errno that stopped it
    /// (`ETIMEDOUT` when `deadline`, on the monotonic clock in ms, came first).
    public static func all(_ bytes: UnsafeRawBufferPointer, to descriptor: Int32, until deadline: Int64? = nil) -> Int32? {
        var offset = 0
        while offset < bytes.count {
            if let deadline {
                var ready = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
                let left = deadline - MonotonicClock.milliseconds()
                if left <= 0 || poll(&ready, 1, Int32(clamping: left)) <= 0 { return ETIMEDOUT }
            }
            let written = Glibc.write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
            if written >= 0 {
                offset += written
                continue
            }
            switch errno {
            case EINTR: continue
            case EAGAIN:
                var ready = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
                _ = poll(&ready, 1, deadline.map { Int32(clamping: max(0, $0 - MonotonicClock.milliseconds())) } ?? -1)
            case let code:
                return code
            }
        }
        return nil
    }
}
