import Glibc

/// Why a file could not be replaced.
public struct AtomicFileError: Error, Sendable, CustomStringConvertible {
    public var path: String
    public var operation: String
    public var errno: Int32

    public var description: String {
        "cannot \(operation) \(path): \(String(cString: strerror(errno)))"
    }
}

/// Replaces a file so that no reader ever sees part of it: the bytes go to `DIR/.NAME.PID.tmp`,
/// are fsync'd, then renamed over `DIR/NAME` (used for `--report`, `--failed-manifest` and
/// `--metrics-file`, whose collector skips the temporary name: it does not end in `.prom`).
public enum AtomicFile {
    public static func replace(_ path: String, with text: String) throws(AtomicFileError) {
        try replace(path, with: Array(text.utf8))
    }

    /// Writes `bytes` to `temporary` (by default `DIR/.NAME.PID.tmp`), fsyncs it and renames it
    /// over `path`; on failure the temporary file is removed and `path` is as it was.
    /// - Parameters:
    ///   - mode: the new file's permissions (before the umask unless `owner` is given).
    ///   - owner: the user and group to give it, with `mode` set exactly: a file replaced in
    ///     place keeps them.
    static func replace(
        _ path: String, with bytes: [UInt8], temporary: String? = nil, mode: mode_t = 0o666, owner: (uid_t, gid_t)? = nil
    ) throws(AtomicFileError) {
        let temporary = temporary ?? temporaryPath(for: path)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode)
        guard fd >= 0 else { throw AtomicFileError(path: temporary, operation: "create", errno: errno) }
        var failure: AtomicFileError?
        var offset = 0
        while offset < bytes.count, failure == nil {
            let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 {
                if errno != EINTR { failure = AtomicFileError(path: temporary, operation: "write", errno: errno) }
            } else {
                offset += written
            }
        }
        if let owner {
            _ = fchmod(fd, mode)
            _ = fchown(fd, owner.0, owner.1)
        }
        if failure == nil, fsync(fd) != 0 { failure = AtomicFileError(path: temporary, operation: "fsync", errno: errno) }
        if close(fd) != 0, failure == nil { failure = AtomicFileError(path: temporary, operation: "close", errno: errno) }
        if failure == nil, rename(temporary, path) != 0 {
            failure = AtomicFileError(path: path, operation: "rename \(temporary) to", errno: errno)
        }
        if let failure {
            unlink(temporary)
            throw failure
        }
    }

    /// `DIR/.NAME.PID.tmp` beside `DIR/NAME`.
    static func temporaryPath(for path: String) -> String {
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { String(path[...$0]) } ?? ""
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        return "\(directory).\(name).\(getpid()).tmp"
    }
}
