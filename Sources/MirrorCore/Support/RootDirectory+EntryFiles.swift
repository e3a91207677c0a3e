import Glibc

/// An entry's `DEST` and `DEST.part`, each reached through a descriptor of their directory
/// opened from the root (see `RootDirectory`): none of these follows a symbolic link.
extension RootDirectory {
    /// Looks at `DEST` and `DEST.part` without following a symbolic link; reads and writes
    /// nothing. A directory on the way that does not exist means both are missing.
    func inspect(_ paths: DestinationPaths) throws(TransferFailure) -> LocalFacts {
        try withDirectory(paths.relativeDirectory) { directory throws(TransferFailure) in
            try LocalFacts.inspect(paths, in: directory, partialOnlyWhenMissing: false)
        } ?? LocalFacts(destination: .missing, partial: .missing)
    }

    /// Opens (creating it and its directories if needed) the partial file for reading and
    /// writing; new files get 0666 minus the umask. A partial file that is another name of a file
    /// (a placement linked from the blob cache, left by a run that stopped before its rename) is
    /// never written: its name is removed and the partial file made anew, so that nothing
    /// written here reaches the blob or the roots that share it.
    func openPartial(_ paths: DestinationPaths, truncate: Bool, durable: Bool) throws(TransferFailure) -> Int32 {
        let fd = try withDirectory(paths.relativeDirectory, create: true, durable: durable) { directory throws(TransferFailure) in
            func open() throws(TransferFailure) -> Int32 {
                // Not O_TRUNC: a linked file is told apart before any byte of it changes.
                let fd = openat(directory, paths.partialName, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o666)
                if fd < 0 {
                    let code = errno
                    var info = stat()
                    if code == EACCES, fstatat(directory, paths.partialName, &info, AT_SYMLINK_NOFOLLOW) == 0, info.st_nlink > 1 {
                        return -1
                    }
                    throw Self.failure(opening: paths.partialName, in: directory, path: paths.partial, errno: code)
                }
                return fd
            }
            var fd = try open()
            var info = stat()
            if fd < 0 || (fstat(fd, &info) == 0 && info.st_nlink > 1) {
                if fd >= 0 { close(fd) }
                if unlinkat(directory, paths.partialName, 0) != 0 {
                    throw .localIO(path: paths.partial, operation: "remove the linked", errno: errno)
                }
                fd = try open()
                info = stat()
                _ = fstat(fd, &info)
            }
            if truncate, info.st_size != 0, ftruncate(fd, 0) != 0 {
                let code = errno
                close(fd)
                throw .localIO(path: paths.partial, operation: "truncate", errno: code)
            }
            return fd
        }
        guard let fd else { throw .localIO(path: paths.directory, operation: "create directory", errno: ENOENT) }
        return fd
    }

    /// Opens `DEST.part` for reading only: a placed file to fsync and rename, which may be a
    /// read-only link to a blob of the cache.
    func openPartialForReading(_ paths: DestinationPaths) throws(TransferFailure) -> Int32 {
        try openForReading(paths.partialName, of: paths, path: paths.partial)
    }

    /// Links the file at `target` (absolute) as `DEST.part`, making its directories; false when
    /// it cannot be linked there (another file system, or links refused), nothing thrown.
    func linkPartial(_ paths: DestinationPaths, to target: String, durable: Bool) throws(TransferFailure) -> Bool {
        let linked = try withDirectory(paths.relativeDirectory, create: true, durable: durable) { directory throws(TransferFailure) -> Bool in
            _ = unlinkat(directory, paths.partialName, 0)
            if linkat(AT_FDCWD, target, directory, paths.partialName, 0) == 0 { return true }
            let code = errno
            if [EXDEV, EPERM, EMLINK, ENOTSUP, EOPNOTSUPP].contains(code) { return false }
            throw .localIO(path: paths.partial, operation: "link", errno: code)
        }
        return linked ?? false
    }

    /// Opens `DEST` for reading.
    func openDestination(_ paths: DestinationPaths) throws(TransferFailure) -> Int32 {
        try openForReading(paths.name, of: paths, path: paths.destination)
    }

    /// Opens `name` in the directory of `paths` for reading, not following a symbolic link;
    /// `path` names it in errors.
    private func openForReading(_ name: String, of paths: DestinationPaths, path: String) throws(TransferFailure) -> Int32 {
        let fd = try withDirectory(paths.relativeDirectory) { directory throws(TransferFailure) in
            let fd = openat(directory, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
            if fd < 0 { let code = errno; throw Self.failure(opening: name, in: directory, path: path, errno: code) }
            return fd
        }
        guard let fd else { throw .localIO(path: path, operation: "open", errno: ENOENT) }
        return fd
    }

    /// Writes the first `length` bytes of `DEST` into a new partial file, replacing any.
    func copyPrefix(_ paths: DestinationPaths, length: Int64, durable: Bool) throws(TransferFailure) {
        let input = try openDestination(paths)
        defer { close(input) }
        let done: Void? = try withDirectory(paths.relativeDirectory, create: true, durable: durable) { directory throws(TransferFailure) in
            let output = openat(directory, paths.partialName, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o666)
            if output < 0 { let code = errno; throw Self.failure(opening: paths.partialName, in: directory, path: paths.partial, errno: code) }
            var copiedAll = false
            defer {
                close(output)
                // A half-made copy is nothing to resume from, and may hold the space a full disk lacks.
                if !copiedAll { unlinkat(directory, paths.partialName, 0) }
            }
            var copied: Int64 = 0
            try FileSystem.forEachChunk(of: input, path: paths.destination, length: length) { bytes throws(TransferFailure) in
                try FileSystem.write(bytes, to: output, at: copied, path: paths.partial)
                copied += Int64(bytes.count)
            }
            copiedAll = true
        }
        if done == nil { throw .localIO(path: paths.directory, operation: "create directory", errno: ENOENT) }
    }

    /// Renames the partial file to its final name. The caller has made the file durable first
    /// (see `GroupCommit`), and makes the directory durable after.
    func rename(_ paths: DestinationPaths) throws(TransferFailure) {
        let renamed: Void? = try withDirectory(paths.relativeDirectory) { directory throws(TransferFailure) in
            if renameat(directory, paths.partialName, directory, paths.name) != 0 {
                let code = errno
                throw .localIO(path: paths.destination, operation: "rename into", errno: code)
            }
        }
        if renamed == nil { throw .localIO(path: paths.destination, operation: "rename into", errno: ENOENT) }
    }

    /// The digest (SHA-256 unless told otherwise) of a whole `DEST`, opened without following
    /// a symbolic link.
    func digestOfDestination(_ paths: DestinationPaths, _ algorithm: DigestAlgorithm = .sha256) throws(TransferFailure) -> String {
        let fd = try openDestination(paths)
        defer { close(fd) }
        let hasher = DigestHasher(algorithm)
        let path = paths.destination
        try hasher.update(fileDescriptor: fd, length: FileSystem.size(of: fd, path: path), path: path)
        return hasher.finalize()
    }

    /// Removes the partial file if it is there and empty: it holds nothing worth resuming.
    /// A symbolic link, there or on the way, is left alone.
    func removePartialIfEmpty(_ paths: DestinationPaths) {
        _ = try? withDirectory(paths.relativeDirectory) { directory in
            var status = stat()
            guard fstatat(directory, paths.partialName, &status, AT_SYMLINK_NOFOLLOW) == 0,
                  status.st_mode & S_IFMT == S_IFREG, status.st_size == 0 else { return }
            _ = unlinkat(directory, paths.partialName, 0)
        }
    }

    /// Removes the partial file, if it is there; a symbolic link on the way is left alone.
    func removePartial(_ paths: DestinationPaths) {
        _ = try? withDirectory(paths.relativeDirectory) { directory in
            _ = unlinkat(directory, paths.partialName, 0)
        }
    }

    /// The failure of an `openat` of `name`: a symbolic link there is refused by name.
    private static func failure(opening name: String, in directory: Int32, path: String, errno code: Int32) -> TransferFailure {
        var info = stat()
        if code == ELOOP, fstatat(directory, name, &info, AT_SYMLINK_NOFOLLOW) == 0, info.st_mode & S_IFMT == S_IFLNK {
            return refusal(path)
        }
        return .localIO(path: path, operation: "open", errno: code)
    }
}

/// Looks at entries' files one after another for a reader of the disk (a worker of `verify`),
/// keeping the directory of the last one open while the entries that follow are in it too,
/// instead of opening and closing it for each (two of the four system calls an entry in a
/// subdirectory cost). For reading only: a directory renamed, or swapped for a symbolic link,
/// once it was opened is still read where it was opened, the same as a change made a moment
/// after the look; what writes opens its directory each time (`RootDirectory.withDirectory`).
/// Used by one thread at a time.
final class DirectoryReader {
    private let root: RootDirectory
    /// The directory held open, relative to the root, and its descriptor.
    private var held: (relative: String, fd: Int32)?

    init(root: RootDirectory) {
        self.root = root
    }

    deinit {
        if let held { close(held.fd) }
    }

    /// `RootDirectory.inspect`, except that `DEST.part` is looked at only when `DEST` is
    /// missing (reported missing otherwise, not looked for).
    func inspectDestinationFirst(_ paths: DestinationPaths) throws(TransferFailure) -> LocalFacts {
        try withDirectory(paths.relativeDirectory) { directory throws(TransferFailure) in
            try LocalFacts.inspect(paths, in: directory, partialOnlyWhenMissing: true)
        } ?? LocalFacts(destination: .missing, partial: .missing)
    }

    private func withDirectory<Result>(
        _ relative: String, _ body: (Int32) throws(TransferFailure) -> Result
    ) throws(TransferFailure) -> Result? {
        if relative.isEmpty { return try root.withDirectory("", body) }
        if let held, held.relative == relative { return try body(held.fd) }
        if let held { close(held.fd) }
        held = nil
        guard let fd = try root.openDirectory(relative) else { return nil }
        held = (relative, fd)
        return try body(fd)
    }
}
