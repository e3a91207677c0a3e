import Glibc

/// The few file operations sync needs, each turning errno into a `TransferFailure` that names
/// the path. Those that create, rename or remove files under the root are `RootDirectory`'s.
enum FileSystem {
    /// `UTIME_NOW` from <sys/stat.h>, a macro Swift does not import.
    private static let utimeNow = (1 << 30) - 1

    /// Creates `path` and any missing parents, with the umask's permissions. With `durable`,
    /// each directory it makes is fsync'd in its parent, so that a file renamed into it later
    /// cannot vanish with it in a power loss.
    static func makeDirectories(_ path: String, durable: Bool = false) throws(TransferFailure) {
        // Usually the directory is there already: one mkdir says so. Parents are made only
        // when it reports one missing.
        if try makeDirectory(path, durable: durable) { return }
        guard let above = parent(of: path) else {
            throw .localIO(path: path, operation: "create directory", errno: ENOENT)
        }
        try makeDirectories(above, durable: durable)
        if try !makeDirectory(path, durable: durable) {
            throw .localIO(path: path, operation: "create directory", errno: ENOENT)
        }
    }

    /// Opens the directory at `path` as the user named it (symbolic links followed), making it
    /// and its parents first when `create`. Nil when it does not exist and `create` is false.
    static func openDirectory(_ path: String, create: Bool) throws(TransferFailure) -> Int32? {
        if create { try makeDirectories(path) }
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT && !create { return nil }
            throw .localIO(path: path, operation: "open", errno: errno)
        }
        return fd
    }

    /// One mkdir: true when the directory was made or was there, false when a parent is missing.
    private static func makeDirectory(_ path: String, durable: Bool) throws(TransferFailure) -> Bool {
        if mkdir(path, 0o777) == 0 {
            if durable, let above = parent(of: path), let failed = syncDirectory(above) {
                throw .localIO(path: above, operation: "fsync directory", errno: failed)
            }
            return true
        }
        switch errno {
        case EEXIST: return true
        case ENOENT: return false
        case let code: throw .localIO(path: path, operation: "create directory", errno: code)
        }
    }

    /// The directory that holds `path`, ignoring trailing slashes; nil for "/" and plain names.
    static func parent(of path: String) -> String? {
        var trimmed = Substring(path)
        while trimmed.utf8.count > 1, trimmed.endsWithSlash { trimmed = trimmed.dropLast() }
        guard let slash = trimmed.utf8.lastIndex(of: .slash) else { return nil }
        let above = slash == trimmed.startIndex ? "/" : String(trimmed[..<slash])
        return above == trimmed ? nil : above
    }

    static func size(of fd: Int32, path: String) throws(TransferFailure) -> Int64 {
        var info = stat()
        if fstat(fd, &info) != 0 { throw .localIO(path: path, operation: "inspect", errno: errno) }
        return Int64(info.st_size)
    }

    /// Gives a file the server's date as its mtime (nothing when there is none).
    static func setModified(fd: Int32, path: String, modified: Int?) throws(TransferFailure) {
        guard let modified else { return }
        var times = [timespec(tv_sec: 0, tv_nsec: utimeNow), timespec(tv_sec: modified, tv_nsec: 0)]
        if futimens(fd, &times) != 0 {
            throw .localIO(path: path, operation: "set modification time of", errno: errno)
        }
    }

    /// fsync of an open file: its bytes and its metadata (size, date) on disk.
    static func sync(_ fd: Int32, path: String) throws(TransferFailure) {
        if fsync(fd) != 0 { throw .localIO(path: path, operation: "fsync", errno: errno) }
    }

    /// fsync of a directory, so that the names created or renamed in it survive a crash.
    /// Returns the errno of a failure.
    static func syncDirectory(_ path: String) -> Int32? {
        let directoryFD = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directoryFD >= 0 else { return errno }
        defer { close(directoryFD) }
        return fsync(directoryFD) == 0 ? nil : errno
    }

    /// Reads bytes `[offset, offset + length)` of an open file in chunks of up to 1 MiB and
    /// hands each to `body`. Stops with `.cancelled` when the calling task is cancelled, and
    /// with `.sizeMismatch` if the file ends early.
    static func forEachChunk(
        of fd: Int32, path: String, from offset: Int64 = 0, length: Int64,
        _ body: (UnsafeRawBufferPointer) throws(TransferFailure) -> Void
    ) throws(TransferFailure) {
        let chunk = 1 << 20
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        defer { buffer.deallocate() }
        var done: Int64 = 0
        while done < length {
            if Task.isCancelled { throw .cancelled }
            let count = pread(fd, buffer.baseAddress, Int(min(Int64(chunk), length - done)), off_t(offset + done))
            if count < 0 {
                if errno == EINTR { continue }
                throw .localIO(path: path, operation: "read", errno: errno)
            }
            if count == 0 { throw .sizeMismatch(expected: offset + length, actual: offset + done) }
            try body(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
            done += Int64(count)
        }
    }

    /// Writes all of `bytes` at `offset` of an open file.
    static func write(_ bytes: UnsafeRawBufferPointer, to fd: Int32, at offset: Int64, path: String) throws(TransferFailure) {
        if let code = writeAll(bytes, to: fd, at: offset) { throw .localIO(path: path, operation: "write", errno: code) }
    }

    /// Writes all of `bytes` at `offset` of an open file.
    static func write(_ bytes: [UInt8], to fd: Int32, at offset: Int64, path: String) throws(TransferFailure) {
        if let code = bytes.withUnsafeBytes({ writeAll($0, to: fd, at: offset) }) { throw .localIO(path: path, operation: "write", errno: code) }
    }

    /// `pwrite` until every byte is written; the errno of a failure.
    private static func writeAll(_ bytes: UnsafeRawBufferPointer, to fd: Int32, at offset: Int64) -> Int32? {
        var done = 0
        while done < bytes.count {
            let written = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            if written < 0 {
                if errno == EINTR { continue }
                return errno
            }
            done += written
        }
        return nil
    }

    /// Reads `count` bytes at `offset` of an open file.
    static func read(fd: Int32, path: String, at offset: Int64, count: Int) throws(TransferFailure) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let read = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, count - done, off_t(offset) + off_t(done)) }
            if read < 0 {
                if errno == EINTR { continue }
                throw .localIO(path: path, operation: "read", errno: errno)
            }
            if read == 0 { throw .sizeMismatch(expected: offset + Int64(count), actual: offset + Int64(done)) }
            done += read
        }
        return bytes
    }
}
