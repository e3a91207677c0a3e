import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A loopback port where connections are refused, and stay refused while the value lives: the
/// port is bound (without SO_REUSEADDR) but never listened on, so no other test's server can
/// take it and answer in the meantime.
final class ClosedPort: Sendable {
    let port: UInt16
    private let descriptor: Int32

    /// - Parameter port: a specific port to hold closed (0: any free one).
    init(port wanted: UInt16 = 0) throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw SystemCallError("socket") }
        if wanted != 0 {
            // The port's last server may have left connections in TIME_WAIT.
            var reuse: Int32 = 1
            setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = wanted.bigEndian
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else {
            close(descriptor)
            throw SystemCallError("bind to 127.0.0.1:\(wanted)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        guard named == 0 else {
            close(descriptor)
            throw SystemCallError("getsockname")
        }
        self.descriptor = descriptor
        port = UInt16(bigEndian: address.sin_port)
    }

    deinit {
        close(descriptor)
    }
}
