import Glibc

/// What is on disk for one entry, as the planner needs it. Gathered with `fstatat`: a symlink
/// is reported as what it is, never followed.
public struct LocalFacts: Sendable, Equatable {
    public enum FileState: Sendable, Equatable {
        case missing
        case file(size: Int64)
        /// Something that is not a regular file (a directory, a symlink, a device).
        case other(kind: String)

        public var size: Int64? {
            if case .file(let size) = self { return size }
            return nil
        }
    }

    public var destination: FileState
    public var partial: FileState
    /// Size, mtime and inode of `DEST`, to match against what the state store verified.
    public var destinationIdentity: LocalIdentity?
    /// `DEST`'s modification time in whole seconds since 1970: mirror sets it to the server's
    /// Last-Modified, as `wget -N` and `curl -R` do.
    public var destinationModified: Int64?
    /// The size of the cache's blob of the entry's pinned SHA-256, when a cache is used, `DEST`
    /// is missing and the cache holds that blob (`BlobCache.lookup`); nil otherwise.
    public var cached: Int64?

    public init(
        destination: FileState, partial: FileState, destinationIdentity: LocalIdentity? = nil,
        destinationModified: Int64? = nil, cached: Int64? = nil
    ) {
        self.destination = destination
        self.partial = partial
        self.destinationIdentity = destinationIdentity
        self.destinationModified = destinationModified
        self.cached = cached
    }

    public var isEmpty: Bool { destination == .missing && partial == .missing }

    /// Looks at `DEST` and `DEST.part`; reads nothing and writes nothing. Fails when a
    /// directory on the way to them is a symbolic link (see `RootDirectory`).
    public static func inspect(_ paths: DestinationPaths, in root: RootDirectory) throws(TransferFailure) -> LocalFacts {
        try root.inspect(paths)
    }

    /// `DEST` and `DEST.part` of `paths` in their open `directory`; with `partialOnlyWhenMissing`
    /// the partial file is looked at only when `DEST` is missing (reported missing otherwise).
    static func inspect(_ paths: DestinationPaths, in directory: Int32, partialOnlyWhenMissing: Bool) throws(TransferFailure) -> LocalFacts {
        let (destination, identity, modified) = try inspectFile(paths.name, in: directory, path: paths.destination)
        var partial = FileState.missing
        if !partialOnlyWhenMissing || destination == .missing {
            (partial, _, _) = try inspectFile(paths.partialName, in: directory, path: paths.partial)
        }
        return LocalFacts(destination: destination, partial: partial, destinationIdentity: identity, destinationModified: modified)
    }

    /// What `name` in the open `directory` is, without following a symbolic link; `path` is
    /// its name in messages, made only for one.
    static func inspectFile(_ name: String, in directory: Int32, path: @autoclosure () -> String) throws(TransferFailure) -> (FileState, LocalIdentity?, Int64?) {
        var info = stat()
        if fstatat(directory, name, &info, AT_SYMLINK_NOFOLLOW) != 0 {
            // A missing parent directory means the file is missing too.
            if errno == ENOENT || errno == ENOTDIR { return (.missing, nil, nil) }
            let code = errno
            throw .localIO(path: path(), operation: "inspect", errno: code)
        }
        switch info.st_mode & S_IFMT {
        case S_IFREG: return (.file(size: Int64(info.st_size)), LocalIdentity(info), Int64(info.st_mtim.tv_sec))
        case S_IFDIR: return (.other(kind: "a directory"), nil, nil)
        case S_IFLNK: return (.other(kind: "a symbolic link"), nil, nil)
        default: return (.other(kind: "not a regular file"), nil, nil)
        }
    }
}

extension LocalIdentity {
    init(_ info: stat) {
        self.init(
            size: Int64(info.st_size),
            modifiedNanoseconds: Self.nanoseconds(seconds: Int64(info.st_mtim.tv_sec), nanoseconds: Int64(info.st_mtim.tv_nsec)),
            inode: UInt64(info.st_ino)
        )
    }

    /// An mtime as one number, for telling whether a file was touched. Any time a file system
    /// can hold is taken, even one past 2262 that nanoseconds since 1970 cannot count: the
    /// arithmetic wraps, so two times compare equal only when they are equal or exactly
    /// 2^64 ns (584 years) apart, and nothing a file's date says can trap the binary.
    static func nanoseconds(seconds: Int64, nanoseconds: Int64) -> Int64 {
        seconds &* 1_000_000_000 &+ nanoseconds
    }

    /// The identity of an open file.
    static func of(fd: Int32, path: String) throws(TransferFailure) -> LocalIdentity {
        var info = stat()
        if fstat(fd, &info) != 0 { throw .localIO(path: path, operation: "inspect", errno: errno) }
        return LocalIdentity(info)
    }
}
