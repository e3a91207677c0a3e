import Glibc
import Synchronization

/// What is on disk for one entry, as the planner needs it. Gathered with `lstat`: a symlink
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

    public init(
        destination: FileState, partial: FileState, destinationIdentity: LocalIdentity? = nil,
        destinationModified: Int64? = nil
    ) {
        self.destination = destination
        self.partial = partial
        self.destinationIdentity = destinationIdentity
        self.destinationModified = destinationModified
    }

    public var isEmpty: Bool { destination == .missing && partial == .missing }

    /// Looks at `DEST` and `DEST.part`; reads nothing and writes nothing. Fails when a
    /// directory on the way to them leads out of the root through a symbolic link.
    public static func inspect(_ paths: DestinationPaths, resolved: ResolvedDirectories? = nil) throws(TransferFailure) -> LocalFacts {
        try checkInsideRoot(paths, resolved: resolved)
        let (destination, identity, modified) = try inspectFile(paths.destination)
        let (partial, _, _) = try inspectFile(paths.partial)
        return LocalFacts(destination: destination, partial: partial, destinationIdentity: identity, destinationModified: modified)
    }

    /// The deepest existing directory on the way from the root to `DEST`, resolved, must lie
    /// inside the resolved root: a symlink inside the root may not lead writes out of it.
    static func checkInsideRoot(_ paths: DestinationPaths, resolved cache: ResolvedDirectories? = nil) throws(TransferFailure) {
        let resolve = { (path: String) in cache?.resolve(path) ?? resolved(path) }
        guard let realRoot = resolve(paths.root) else { return }
        var candidate = paths.directory
        while candidate.utf8.count > paths.root.utf8.count {
            if let real = resolve(candidate) {
                // Compared as bytes, as the kernel names files: Swift's == and hasPrefix would
                // take "é" and "e\u{301}", two different directories, for the same.
                let inside = realRoot.endsWithSlash ? realRoot : realRoot + "/"
                if !real.utf8.elementsEqual(realRoot.utf8) && !real.utf8.starts(with: inside.utf8) {
                    throw .localConflict("\(candidate) resolves to \(real), outside the root \(realRoot); mirror does not follow symbolic links out of the root")
                }
                return
            }
            guard let slash = candidate.lastSlash else { return }
            candidate = String(candidate[..<slash])
        }
    }

    static func resolved(_ path: String) -> String? {
        guard let real = realpath(path, nil) else { return nil }
        defer { free(real) }
        return String(cString: real)
    }

    static func inspectFile(_ path: String) throws(TransferFailure) -> (FileState, LocalIdentity?, Int64?) {
        var info = stat()
        if lstat(path, &info) != 0 {
            // A missing parent directory means the file is missing too.
            if errno == ENOENT || errno == ENOTDIR { return (.missing, nil, nil) }
            throw .localIO(path: path, operation: "inspect", errno: errno)
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

/// Directories already resolved in this run, so that thousands of entries in one directory
/// cost one `realpath` instead of thousands. Only directories that exist are remembered.
public final class ResolvedDirectories: Sendable {
    private let known = Mutex<[String: String]>([:])

    public init() {}

    func resolve(_ path: String) -> String? {
        if let hit = known.withLock({ $0[path] }) { return hit }
        guard let real = LocalFacts.resolved(path) else { return nil }
        known.withLock { $0[path] = real }
        return real
    }
}
