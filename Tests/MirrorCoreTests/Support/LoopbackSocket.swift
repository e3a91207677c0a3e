import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A failed POSIX call (socket, mkdtemp, …), with the errno text.
struct SystemCallError: Error, CustomStringConvertible {
    let operation: String
    let code: Int32

    init(_ operation: String, code: Int32 = errno) {
        self.operation = operation
        self.code = code
    }

    var description: String {
        "\(operation) failed: \(String(cString: strerror(code))) (errno \(code))"
    }
}

/// An IPv4 address inside 127.0.0.0/8. Test servers only ever listen on loopback, so building
/// one from any other address throws rather than exposing a test server to the network.
struct LoopbackAddress: Sendable, CustomStringConvertible {
    let host: String
    /// The address in network byte order, as `in_addr.s_addr` wants it.
    let networkOrder: UInt32

    init(_ host: String) throws {
        var parsed = in_addr()
        guard inet_pton(AF_INET, host, &parsed) == 1 else {
            throw NotLoopback(host: host)
        }
        // The first octet is the first byte in memory, whatever the host's endianness.
        guard UInt32(bigEndian: parsed.s_addr) >> 24 == 127 else {
            throw NotLoopback(host: host)
        }
        self.host = host
        self.networkOrder = parsed.s_addr
    }

    var description: String { host }

    struct NotLoopback: Error, CustomStringConvertible {
        let host: String
        var description: String { "test servers listen on 127.0.0.0/8 only; \"\(host)\" is not an IPv4 loopback address" }
    }

    func socketAddress(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr = in_addr(s_addr: networkOrder)
        return address
    }
}

/// Small, bounded socket operations shared by the test servers.
enum LoopbackSocket {
    /// Opens a non-blocking, close-on-exec listening socket on `address:port` (port 0 picks a
    /// free one) and returns it with the port actually bound.
    static func listen(on address: LoopbackAddress, port: UInt16 = 0, backlog: Int32 = 64) throws
        -> (descriptor: Int32, port: UInt16)
    {
        let descriptor = try makeStreamSocket()
        do {
            var reuse: Int32 = 1
            // Lets a test reuse a port that an earlier test's connections left in TIME_WAIT.
            setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
            var socketAddress = address.socketAddress(port: port)
            let bound = withUnsafePointer(to: &socketAddress) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard bound == 0 else { throw SystemCallError("bind to \(address):\(port)") }
            guard Glibc.listen(descriptor, backlog) == 0 else { throw SystemCallError("listen") }
            return (descriptor, try boundPort(of: descriptor))
        } catch {
            close(descriptor)
            throw error
        }
    }

    /// A port that was free on `address` a moment ago, for servers that must be told their port
    /// up front (nginx). Another process may take it before the server binds it, so callers
    /// retry with a fresh port when the bind fails.
    static func pickFreePort(on address: LoopbackAddress) throws -> UInt16 {
        let (descriptor, port) = try listen(on: address)
        close(descriptor)
        return port
    }

    /// Whether something accepts a TCP connection on `address:port` within `timeout`.
    static func acceptsConnections(on address: LoopbackAddress, port: UInt16,
                                   timeout: Duration = .milliseconds(200)) -> Bool {
        guard let descriptor = try? connect(to: address, port: port, timeout: timeout) else { return false }
        close(descriptor)
        return true
    }

    /// A non-blocking, close-on-exec socket connected to `address:port`, for tests that speak
    /// raw HTTP. The caller closes it.
    static func connect(to address: LoopbackAddress, port: UInt16,
                        timeout: Duration = .seconds(2)) throws -> Int32 {
        let descriptor = try makeStreamSocket()
        var socketAddress = address.socketAddress(port: port)
        let result = withUnsafePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        if result == 0 { return descriptor }
        let connectError = errno
        guard connectError == EINPROGRESS else {
            close(descriptor)
            throw SystemCallError("connect to \(address):\(port)", code: connectError)
        }
        guard waitUntil(descriptor, isReadyFor: Int16(POLLOUT), timeout: timeout) else {
            close(descriptor)
            throw SystemCallError("connect to \(address):\(port)", code: ETIMEDOUT)
        }
        var socketError: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &socketError, &length)
        guard socketError == 0 else {
            close(descriptor)
            throw SystemCallError("connect to \(address):\(port)", code: socketError)
        }
        return descriptor
    }

    /// Polls one descriptor for `events`; true when it is ready (or has an error or hang-up that
    /// the next read or write will report), false on timeout.
    static func waitUntil(_ descriptor: Int32, isReadyFor events: Int16, timeout: Duration) -> Bool {
        var entry = pollfd(fd: descriptor, events: events, revents: 0)
        let milliseconds = Int32(clamping: max(0, timeout.components.seconds * 1000
            + timeout.components.attoseconds / 1_000_000_000_000_000))
        while true {
            let ready = poll(&entry, 1, milliseconds)
            if ready < 0 && errno == EINTR { continue }
            return ready > 0
        }
    }

    private static func makeStreamSocket() throws -> Int32 {
        // Non-blocking so that every wait goes through poll with a timeout; close-on-exec so the
        // nginx and curl processes that tests start never inherit a test server's sockets.
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        let descriptor = socket(AF_INET, type, 0)
        guard descriptor >= 0 else { throw SystemCallError("socket") }
        return descriptor
    }

    private static func boundPort(of descriptor: Int32) throws -> UInt16 {
        var socketAddress = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let result = withUnsafeMutablePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                getsockname(descriptor, $0, &length)
            }
        }
        guard result == 0 else { throw SystemCallError("getsockname") }
        return UInt16(bigEndian: socketAddress.sin_port)
    }
}
