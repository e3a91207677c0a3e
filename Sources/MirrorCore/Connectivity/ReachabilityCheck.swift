import Dispatch
import Glibc

/// "Is the network there?" for one host: DNS resolution, then a TCP connect to any of its
/// addresses within a timeout. Runs the blocking calls on a dispatch queue, never on the
/// caller's task thread.
public enum ReachabilityCheck {
    public static func isReachable(_ host: HostKey, timeout: Duration = .seconds(3)) async -> Bool {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(returning: connects(host, timeoutMilliseconds: Int32(timeout.milliseconds)))
            }
        }
    }

    private static func connects(_ host: HostKey, timeoutMilliseconds: Int32) -> Bool {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host.host, String(host.port), &hints, &list) == 0, let first = list else { return false }
        defer { freeaddrinfo(list) }
        var candidate: UnsafeMutablePointer<addrinfo>? = first
        while let address = candidate {
            if connect(to: address.pointee, timeoutMilliseconds: timeoutMilliseconds) { return true }
            candidate = address.pointee.ai_next
        }
        return false
    }

    private static func connect(to address: addrinfo, timeoutMilliseconds: Int32) -> Bool {
        let fd = socket(address.ai_family, address.ai_socktype | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), address.ai_protocol)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        if Glibc.connect(fd, address.ai_addr, address.ai_addrlen) == 0 { return true }
        guard errno == EINPROGRESS else { return false }
        var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        guard poll(&poller, 1, timeoutMilliseconds) == 1 else { return false }
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 else { return false }
        return error == 0
    }
}
