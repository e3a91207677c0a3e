import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Reads a file of /proc whole. Foundation's `String(contentsOfFile:)` takes the size /proc
/// reports (0) as a hint and returns the first page only: /proc/net/tcp with a few hundred
/// sockets open (a full parallel test run) lost every line after its first 4 KiB, and with
/// them the listening sockets a test looked for.
enum ProcFile {
    static func read(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            bytes.append(contentsOf: buffer[0..<count])
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
