import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A bare TCP connection to a loopback server, for tests that must control the exact bytes on the
/// wire (pipelined requests, idle keep-alive connections) where curl would hide them. Every read
/// is bounded by a timeout.
final class RawConnection {
    private var descriptor: Int32

    init(host: String = "127.0.0.1", port: UInt16) throws {
        descriptor = try LoopbackSocket.connect(to: LoopbackAddress(host), port: port)
    }

    deinit { close() }

    /// Sends all of `text` (as UTF-8), or throws.
    func send(_ text: String) throws {
        let bytes = Array(text.utf8)
        var offset = 0
        let deadline = ContinuousClock.now + .seconds(5)
        while offset < bytes.count {
            guard ContinuousClock.now < deadline else { throw SystemCallError("send", code: ETIMEDOUT) }
            let written = bytes[offset...].withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if written > 0 {
                offset += written
            } else if errno == EAGAIN || errno == EINTR {
                _ = LoopbackSocket.waitUntil(descriptor, isReadyFor: Int16(POLLOUT), timeout: .milliseconds(50))
            } else {
                throw SystemCallError("send")
            }
        }
    }

    /// Everything the server sends until it closes the connection or `timeout` passes.
    func receiveUntilClosed(timeout: Duration = .seconds(5)) -> Data {
        receive(timeout: timeout) { _ in false }
    }

    /// What the server sends until `enough` says the bytes so far suffice, the server closes the
    /// connection, or `timeout` passes.
    func receive(timeout: Duration = .seconds(5), until enough: (Data) -> Bool) -> Data {
        var received = Data()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        let deadline = ContinuousClock.now + timeout
        while !enough(received), ContinuousClock.now < deadline {
            guard LoopbackSocket.waitUntil(descriptor, isReadyFor: Int16(POLLIN), timeout: .milliseconds(50)) else {
                continue
            }
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                received.append(contentsOf: buffer[..<count])
            } else if count == 0 || (errno != EAGAIN && errno != EINTR) {
                break
            }
        }
        return received
    }

    /// Whether the server has closed its end (reading returns end-of-file) within `timeout`.
    func isClosedByServer(within timeout: Duration) -> Bool {
        let deadline = ContinuousClock.now + timeout
        var byte: UInt8 = 0
        while ContinuousClock.now < deadline {
            guard LoopbackSocket.waitUntil(descriptor, isReadyFor: Int16(POLLIN), timeout: .milliseconds(50)) else {
                continue
            }
            let count = recv(descriptor, &byte, 1, 0)
            if count == 0 || (count < 0 && errno != EAGAIN && errno != EINTR) { return true }
        }
        return false
    }

    func close() {
        guard descriptor >= 0 else { return }
        Glibc.close(descriptor)
        descriptor = -1
    }
}
