import Glibc

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

    public init(destination: FileState, partial: FileState) {
        self.destination = destination
        self.partial = partial
    }

    public var isEmpty: Bool { destination == .missing && partial == .missing }

    /// Looks at `DEST` and `DEST.part`; reads nothing and writes nothing.
    public static func inspect(_ paths: DestinationPaths) throws(TransferFailure) -> LocalFacts {
        LocalFacts(destination: try state(of: paths.destination), partial: try state(of: paths.partial))
    }

    static func state(of path: String) throws(TransferFailure) -> FileState {
        var info = stat()
        if lstat(path, &info) != 0 {
            // A missing parent directory means the file is missing too.
            if errno == ENOENT || errno == ENOTDIR { return .missing }
            throw .localIO(path: path, operation: "inspect", errno: errno)
        }
        switch info.st_mode & S_IFMT {
        case S_IFREG: return .file(size: Int64(info.st_size))
        case S_IFDIR: return .other(kind: "a directory")
        case S_IFLNK: return .other(kind: "a symbolic link")
        default: return .other(kind: "not a regular file")
        }
    }
}
