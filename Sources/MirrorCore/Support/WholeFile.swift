import Glibc

/// Reads a file to its end with read(2), whatever size it states: a pipe, a FIFO, a process
/// substitution or a /proc file states none (Foundation's readers take that size as a hint and
/// return nothing, or the first page). The manifest read from a pipe, the netrc file and the
/// reports `mirror report` merges are read here.
public enum WholeFile {
    public enum Failure: Error, Equatable, Sendable, CustomStringConvertible {
        /// A system call failed with this errno.
        case system(errno: Int32)
        /// More than the limit was read.
        case tooLarge

        /// The system's reason, or that the file passed the limit asked for.
        public var description: String {
            switch self {
            case .system(let code): String(cString: strerror(code))
            case .tooLarge: "it is larger than the limit it is read with"
            }
        }
    }

    /// The bytes of the file at `path`, at most `limit` of them.
    public static func read(path: String, limit: Int = .max) throws(Failure) -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw .system(errno: errno) }
        defer { close(descriptor) }
        return try read(descriptor, limit: limit)
    }

    /// The bytes readable from `descriptor` until its end, at most `limit` of them.
    public static func read(_ descriptor: Int32, limit: Int = .max) throws(Failure) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw .system(errno: errno)
            }
            if count == 0 { return bytes }
            bytes.append(contentsOf: chunk[..<count])
            if bytes.count > limit { throw .tooLarge }
        }
    }
}
