import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Records, through inotify, every change the kernel makes under a directory tree: a file or
/// directory created, removed or renamed in or out, written to, closed after being opened for
/// writing, or changed in its attributes. The kernel queues each event when the system call
/// happens, so reading them after the code under test has returned misses nothing.
final class WriteWatch {
    private let fd: Int32
    private var directories: [Int32: String] = [:]

    static let mask = UInt32(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_MODIFY | IN_CLOSE_WRITE
        | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF)

    /// Watches `path` and every directory below it (not following symbolic links).
    init(_ path: String) throws {
        fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { throw SystemCallError("inotify_init1") }
        try add(path)
        let enumerator = FileManager.default.enumerator(atPath: path)
        while let relative = enumerator?.nextObject() as? String {
            let full = path + "/" + relative
            var info = stat()
            if lstat(full, &info) == 0, info.st_mode & S_IFMT == S_IFDIR { try add(full) }
        }
    }

    deinit { close(fd) }

    /// Writes `text` to the file `path` (under the directory to be watched) through a shell that
    /// has exited before this returns. Written by this process instead, a process another test
    /// forks meanwhile would hold the write descriptor until it execs, and its close would be
    /// reported after the watch had started, as a write.
    static func writeBeforeWatching(_ text: String, to path: String) throws {
        let result = try ExternalCommand.run("/bin/sh", ["-c", "printf '%s' \"$0\" > \"$1\"", text, path], in: "/")
        guard result.status == 0 else { throw SystemCallError("writing \(path): \(result)") }
    }

    private func add(_ directory: String) throws {
        let wd = inotify_add_watch(fd, directory, Self.mask | UInt32(IN_DONT_FOLLOW | IN_ONLYDIR))
        guard wd >= 0 else { throw SystemCallError("inotify_add_watch \(directory)") }
        directories[wd] = directory
    }

    /// The changes seen since the last call, each as "EVENT path".
    func changes() -> [String] {
        var seen: [String] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            var offset = 0
            // struct inotify_event: wd, mask, cookie, len, then len bytes of NUL-padded name.
            while offset + 16 <= count {
                func word(_ at: Int) -> UInt32 {
                    buffer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset + at, as: UInt32.self) }
                }
                let wd = Int32(bitPattern: word(0))
                let mask = word(4)
                let length = Int(word(12))
                let nameBytes = buffer[(offset + 16)..<(offset + 16 + length)].prefix { $0 != 0 }
                let name = String(decoding: nameBytes, as: UTF8.self)
                let directory = directories[wd] ?? "?"
                if mask & UInt32(IN_Q_OVERFLOW) != 0 {
                    seen.append("OVERFLOW (events were lost)")
                } else if mask & UInt32(IN_IGNORED) == 0 {
                    seen.append("\(Self.name(of: mask)) \(directory)\(name.isEmpty ? "" : "/" + name)")
                }
                offset += 16 + length
            }
        }
        return seen
    }

    private static func name(of mask: UInt32) -> String {
        let names: [(Int32, String)] = [
            (IN_CREATE, "CREATE"), (IN_DELETE, "DELETE"), (IN_MOVED_FROM, "MOVED_FROM"), (IN_MOVED_TO, "MOVED_TO"),
            (IN_MODIFY, "MODIFY"), (IN_CLOSE_WRITE, "CLOSE_WRITE"), (IN_ATTRIB, "ATTRIB"),
            (IN_DELETE_SELF, "DELETE_SELF"), (IN_MOVE_SELF, "MOVE_SELF"),
        ]
        return names.filter { mask & UInt32($0.0) != 0 }.map(\.1).joined(separator: "|")
    }
}
