import Glibc

/// Replaces a regular file so that no reader ever sees part of it: the bytes go to a new
/// `DIR/.NAME.PID.tmp`, are fsync'd, then renamed over `DIR/NAME`, and `DIR` is fsync'd. Only `OutputFile` calls it,
/// once it has decided that the path is a regular file or nothing yet.
enum AtomicFile {
    /// Writes `bytes` to a new temporary file beside `path`, fsyncs it and renames it over
    /// `path`; on failure the temporary file is removed and `path` is as it was.
    /// - Parameters:
    ///   - mode: the new file's permissions, set exactly (a replaced file keeps its own); nil
    ///     for a new file: 0666 less the umask.
    ///   - owner: the user and group to give it (the manifest `lock` rewrites keeps its own);
    ///     nil: the running user's, as the file is created.
    static func replace(
        _ path: String, with bytes: [UInt8], mode: mode_t? = nil, owner: (uid_t, gid_t)? = nil
    ) throws(OutputFileError) {
        let (temporary, fd) = try createTemporary(for: path, mode: mode ?? 0o666)
        var failure: OutputFileError?
        var offset = 0
        while offset < bytes.count, failure == nil {
            let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 {
                if errno != EINTR { failure = OutputFileError(path: temporary, operation: "write", errno: errno) }
            } else {
                offset += written
            }
        }
        if let mode { _ = fchmod(fd, mode) }
        if let owner {
            _ = fchown(fd, owner.0, owner.1)
            // fchown may clear set-user-ID and set-group-ID bits.
            if let mode { _ = fchmod(fd, mode) }
        }
        if failure == nil, fsync(fd) != 0 { failure = OutputFileError(path: temporary, operation: "fsync", errno: errno) }
        if close(fd) != 0, failure == nil { failure = OutputFileError(path: temporary, operation: "close", errno: errno) }
        if failure == nil, rename(temporary, path) != 0 {
            failure = OutputFileError(path: path, operation: "rename \(temporary) to", errno: errno)
        }
        if let failure {
            unlink(temporary)
            throw failure
        }
        // The file is in place by now; a directory that cannot be fsync'd is not a reason to
        // report it unwritten.
        _ = FileSystem.syncDirectory(FileSystem.parent(of: path) ?? ".")
    }

    /// A temporary file of its own beside `path`, created exclusively (never one that is
    /// already there, which may be another process's: a process of the same ID in another PID
    /// namespace sharing the directory, or one left by a crash): `DIR/.NAME.PID.tmp`, else
    /// `DIR/.NAME.PID.N.tmp`.
    private static func createTemporary(for path: String, mode: mode_t) throws(OutputFileError) -> (String, Int32) {
        var attempt = 0
        while true {
            let temporary = temporaryPath(for: path, attempt: attempt)
            let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode)
            if fd >= 0 { return (temporary, fd) }
            guard errno == EEXIST, attempt < 100 else {
                throw OutputFileError(path: temporary, operation: "create", errno: errno)
            }
            attempt += 1
        }
    }

    /// `DIR/.NAME.PID.tmp` beside `DIR/NAME` (`DIR/.NAME.PID.N.tmp` after `N` attempts).
    static func temporaryPath(for path: String, attempt: Int = 0) -> String {
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { String(path[...$0]) } ?? ""
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        return "\(directory).\(name).\(getpid())\(attempt == 0 ? "" : ".\(attempt)").tmp"
    }
}
