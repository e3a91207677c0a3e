import Dispatch
import Glibc

/// "Is the network there?" for one host: DNS resolution, then a TCP connect to any of its
/// addresses within a timeout. Runs the blocking calls on a dispatch queue, never on the
/// caller's task thread.
public enum ReachabilityCheck {
    public static func check(_ host: HostKey, timeout: Duration = .seconds(3)) async -> Reachability {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(returning: connects(host, timeoutMilliseconds: Int32(timeout.milliseconds)))
            }
        }
    }

    private static func connects(_ host: HostKey, timeoutMilliseconds: Int32) -> Reachability {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var list: UnsafeMutablePointer<addrinfo>?
        var resolved = getaddrinfo(host.host, String(host.port), &hints, &list)
        // A signal handled meanwhile (the CLI's SIGINT handler) is no answer about the network:
        // ask again, a few times at most.
        for _ in 0..<3 where resolved == EAI_SYSTEM && errno == EINTR {
            resolved = getaddrinfo(host.host, String(host.port), &hints, &list)
        }
        guard resolved == 0, let first = list else { return resolution(failed: resolved) }
        defer { freeaddrinfo(list) }
        var refused = false
        var lastError: Int32 = ETIMEDOUT
        var candidate: UnsafeMutablePointer<addrinfo>? = first
        while let address = candidate {
            let error = connect(to: address.pointee, timeoutMilliseconds: timeoutMilliseconds)
            if error == 0 { return .reachable }
            if error == ECONNREFUSED { refused = true } else { lastError = error }
            candidate = address.pointee.ai_next
        }
        // One address that refuses proves the network works, even if another (say IPv6 on an
        // IPv4-only network) is unreachable.
        if refused { return .refused("connection refused") }
        return .noAnswer(String(cString: strerror(lastError)))
    }

    /// An authoritative "no such host" (or "no address for it") is an answer; anything else
    /// (EAI_AGAIN: the resolver could not be reached or did not answer) is not.
    private static func resolution(failed code: Int32) -> Reachability {
        let text = String(cString: gai_strerror(code))
        switch code {
        case EAI_NONAME, noAddress: return .refused("no such host (\(text))")
        case EAI_SYSTEM: return .noAnswer(String(cString: strerror(errno)))
        default: return .noAnswer(text)
        }
    }

    /// glibc's EAI_NODATA (the name exists, with no address), which Swift's Glibc does not
    /// import: it is a GNU extension.
    private static let noAddress: Int32 = -5

    /// 0 when the connection was made, else the errno that stopped it.
    private static func connect(to address: addrinfo, timeoutMilliseconds: Int32) -> Int32 {
        let fd = socket(address.ai_family, address.ai_socktype | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), address.ai_protocol)
        guard fd >= 0 else { return errno }
        defer { close(fd) }
        if Glibc.connect(fd, address.ai_addr, address.ai_addrlen) == 0 { return 0 }
        guard errno == EINPROGRESS else { return errno }
        var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        let deadline = MonotonicClock.milliseconds() + Int64(timeoutMilliseconds)
        var ready = poll(&poller, 1, timeoutMilliseconds)
        // Interrupted by a signal handler: wait out the rest of the time, not less.
        while ready < 0 && errno == EINTR {
            ready = poll(&poller, 1, Int32(clamping: max(0, deadline - MonotonicClock.milliseconds())))
        }
        guard ready == 1 else { return ready == 0 ? ETIMEDOUT : errno }
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 else { return errno }
        return error
    }
}
