import CCurl
import Glibc
import Synchronization

/// TCP connections to a run's first origin, opened as soon as the manifest is read: while
/// libcurl loads and the lock, the store and the first entries' inspections are made ready
/// (about 9 ms at the start of a run), the handshakes are already on their way. The engine's
/// first requests to that origin wait for them (`admit`) and libcurl takes them as the sockets
/// it would have opened (`take`, from `CURLOPT_OPENSOCKETFUNCTION`), so a run opens no more
/// connections than it would have: a request leaves one round trip sooner. Later in the run,
/// when a large file's reply shows it worth splitting, the engine opens its streams'
/// connections to the same origin the same way (`openMore`), while the lead is paced; where the
/// pace then says one connection will do, they are closed unused at `idleLimit`.
///
/// Only where that is sure to be the connection libcurl would make: an `http` or `https`
/// origin reached without a proxy, whose name resolves to addresses of one family (to a host
/// with both, libcurl races the families, and a connection to the first address could be the
/// one that never completes). libcurl 7.88 calls `connect` again on the socket it is given,
/// which succeeds only once the handshake is over: a request is let through when one is
/// (`admit`). What libcurl would have resolved comes from the same lookup (`CURLOPT_RESOLVE`),
/// so a name is not looked up twice.
///
/// Bounded: a lookup or a handshake not over within `holdLimit` is given up and the requests
/// it held go on as if there had been none; a connection not taken within `idleLimit` of its
/// handshake (the first entries needed no request: pinned and verified; the run waited for
/// another's lock) is closed. The engine looks at them every turn (`update`) and wakes for
/// them (`waiting`). `close` closes what is left. Made on any thread; the rest is called on
/// the engine's.
public final class EarlyConnections: @unchecked Sendable {
    /// Where and how many: the plan `plan(...)` makes.
    struct Target: Equatable, Sendable {
        var host: String
        var port: Int
        var count: Int
    }

    private enum SocketState {
        case connecting
        case ready(since: Int64)
    }

    private struct Socket {
        var fd: Int32
        var state: SocketState
        /// When its handshake began (the monotonic clock, ms): the hold counts from it.
        var openedAt: Int64

        var isReady: Bool {
            if case .ready = state { true } else { false }
        }
    }

    private struct State {
        /// Still looking up the name (on a thread of its own).
        var resolving = true
        /// Every address of the name as libcurl would have them, first first (one family).
        var address: [UInt8] = []
        var sockets: [Socket] = []
        /// Ready sockets promised to requests let through and not yet taken by libcurl.
        var promised = 0
        /// `+host:port:addresses` for `CURLOPT_RESOLVE`, when the host is a name; made into
        /// libcurl's list on the engine's thread (`resolveList`), where libcurl is loaded.
        var resolveEntry: String?
        var resolveList: UnsafeMutablePointer<curl_slist>?
        /// Wakes the engine's loop when the lookup ends.
        var wake: (@Sendable () -> Void)?
        var closed = false
        /// Connections libcurl took.
        var taken = 0
        /// Times a request was told to wait (`admit`).
        var refusals = 0
    }

    let target: Target
    /// The host is an address already: no lookup, and nothing for libcurl's.
    private let isNumeric: Bool
    /// When the connections were started (the monotonic clock, ms): the hold counts from it.
    let startedAt: Int64
    private let state = Mutex(State())
    /// A connection whose handshake is not over this long (ms) after the start is given up.
    let holdLimit: Int64
    /// A connection not taken this long (ms) after its handshake is closed.
    let idleLimit: Int64
    static let defaultHoldLimit: Int64 = 1000
    static let defaultIdleLimit: Int64 = 2000

    /// Opens the connections `plan` says for `manifest` (nil: none). Returns at once: a name
    /// is looked up on a thread of its own.
    public static func open(for manifest: Manifest, concurrency: Int, proxies: ProxyEnvironment) -> EarlyConnections? {
        let first = manifest.entries.prefix(max(1, concurrency))
        let urls = first.map { $0.url.string }
        let hostLimit: (String) -> Int? = { url in
            guard let key = HostKey(url: url), let rule = manifest.hosts.rule(for: key) else { return nil }
            return rule.concurrency
        }
        guard let target = plan(urls: urls, concurrency: concurrency, hostLimit: hostLimit, proxied: { proxies.proxy(for: $0) != nil })
        else { return nil }
        return EarlyConnections(target)
    }

    /// The run's first origin and how many connections its first requests open there: an
    /// `http`/`https` URL with a host, no proxy; at most `concurrency`, its host's own limit,
    /// the number of the first `concurrency` entries that go there, and for `https` (where
    /// the requests after the first `RequestBudget.streamConnections` wait to ride on those as
    /// HTTP/2 streams) that many. Nil when there is nothing to open.
    static func plan(urls: [String], concurrency: Int, hostLimit: (String) -> Int?, proxied: (String) -> Bool) -> Target? {
        guard let first = urls.first else { return nil }
        let scheme = RemoteProbe.scheme(of: first)
        guard scheme == "http" || scheme == "https", !proxied(first), let key = HostKey(url: first),
              key.host.utf8.allSatisfy({ $0 < 0x80 })
        else { return nil }
        let origin = OriginKey(url: first, proxy: nil)
        let sameOrigin = urls.prefix(max(1, concurrency)).filter { OriginKey(url: $0, proxy: nil) == origin }.count
        var count = min(max(1, concurrency), sameOrigin)
        if let limit = hostLimit(first) { count = min(count, max(1, limit)) }
        if scheme == "https" { count = min(count, RequestBudget.streamConnections) }
        return Target(host: key.host, port: key.port, count: count)
    }

    init(_ target: Target, holdLimit: Int64 = defaultHoldLimit, idleLimit: Int64 = defaultIdleLimit) {
        self.target = target
        self.holdLimit = holdLimit
        self.idleLimit = idleLimit
        startedAt = MonotonicClock.milliseconds()
        isNumeric = Self.isAddress(target.host)
        if isNumeric {
            resolveAndConnect()
        } else {
            DetachedThread.start { [self] in resolveAndConnect() }
        }
    }

    deinit {
        close()
        state.withLock { state in
            if let list = state.resolveList { mirror_curl_slist_free_all(list) }
        }
    }

    /// Looks the host up as libcurl would (`getaddrinfo`, any family, stream sockets) and
    /// starts the connections to its first address.
    private func resolveAndConnect() {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        var addresses: [(family: Int32, bytes: [UInt8], text: String)] = []
        if getaddrinfo(target.host, String(target.port), &hints, &list) == 0 {
            var next = list
            while let item = next {
                if let address = item.pointee.ai_addr, item.pointee.ai_family == AF_INET || item.pointee.ai_family == AF_INET6 {
                    let bytes = Array(UnsafeRawBufferPointer(start: address, count: Int(item.pointee.ai_addrlen)))
                    addresses.append((item.pointee.ai_family, bytes, Self.text(of: address, family: item.pointee.ai_family)))
                }
                next = item.pointee.ai_next
            }
            freeaddrinfo(list)
        }
        var sockets: [Socket] = []
        var resolveEntry: String?
        // A lookup that outlasted the hold: the requests went on without these connections.
        let late = MonotonicClock.milliseconds() - startedAt >= holdLimit
        if !late, let first = addresses.first, addresses.allSatisfy({ $0.family == first.family }) {
            for _ in 0..<target.count {
                guard let socket = Self.connect(first.bytes, family: first.family, openedAt: startedAt) else { break }
                sockets.append(socket)
            }
            if !isNumeric {
                resolveEntry = "+\(target.host):\(target.port):" + addresses.map { $0.family == AF_INET6 ? "[\($0.text)]" : $0.text }.joined(separator: ",")
            }
        }
        let (wake, closed) = state.withLock { state in
            state.resolving = false
            state.address = sockets.isEmpty ? [] : addresses[0].bytes
            state.sockets = sockets
            state.resolveEntry = resolveEntry
            return (state.wake, state.closed)
        }
        if closed { close() }
        wake?()
    }

    /// `openedAt`: when its hold begins (the first connections': the start, `startedAt`).
    private static func connect(_ address: [UInt8], family: Int32, openedAt: Int64) -> Socket? {
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        let started = address.withUnsafeBytes { bytes in
            Glibc.connect(fd, bytes.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(bytes.count))
        }
        // Only one whose handshake is under way: libcurl's own `connect` on a socket connected
        // at once would fail (EISCONN), where one connected since succeeds.
        guard started != 0, errno == EINPROGRESS else {
            Glibc.close(fd)
            return nil
        }
        return Socket(fd: fd, state: .connecting, openedAt: openedAt)
    }

    /// Whether the host is written as an IPv4 or IPv6 address (no lookup needed).
    private static func isAddress(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }

    private static func text(of address: UnsafePointer<sockaddr>, family: Int32) -> String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        let raw = UnsafeRawPointer(address)
        if family == AF_INET {
            var v4 = raw.assumingMemoryBound(to: sockaddr_in.self).pointee.sin_addr
            inet_ntop(AF_INET, &v4, &buffer, socklen_t(buffer.count))
        } else {
            var v6 = raw.assumingMemoryBound(to: sockaddr_in6.self).pointee.sin6_addr
            inet_ntop(AF_INET6, &v6, &buffer, socklen_t(buffer.count))
        }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    // MARK: The engine's side

    /// Sets what wakes the engine's loop when the lookup ends.
    func onResolved(_ wake: @escaping @Sendable () -> Void) {
        let resolved = state.withLock { state in
            state.wake = wake
            return !state.resolving
        }
        if resolved { wake() }
    }

    /// Whether a request to `host`:`port` (no proxy) may be added now: it goes elsewhere, or
    /// nothing is under way for it any more, or a ready connection is there for it (promised
    /// to it). When it may not, the engine holds it until `update` says something changed.
    /// `resolve`: the `CURLOPT_RESOLVE` list the request should carry, if any.
    func admit(host: String, port: Int) -> (admitted: Bool, resolve: UnsafeMutablePointer<curl_slist>?) {
        guard host == target.host, port == target.port else { return (true, nil) }
        let now = MonotonicClock.milliseconds()
        return state.withLock { state in
            if state.closed { return (true, nil) }
            if state.resolving {
                // A lookup that takes longer than the hold is left to libcurl's own, with its
                // timeouts.
                if now - startedAt >= holdLimit { return (true, nil) }
                state.refusals += 1
                return (false, nil)
            }
            if state.resolveList == nil, let entry = state.resolveEntry {
                state.resolveList = mirror_curl_slist_append(nil, entry)
            }
            let ready = state.sockets.filter { $0.isReady }.count
            if ready > state.promised {
                state.promised += 1
                return (true, state.resolveList)
            }
            let connecting = state.sockets.contains { !$0.isReady }
            if connecting { state.refusals += 1 }
            return (!connecting, state.resolveList)
        }
    }

    /// Looks at the connections still being made (without waiting), gives up those past
    /// `holdLimit` and closes ready ones unused past `idleLimit`. Returns whether a held
    /// request may now go (`admit` again).
    @discardableResult
    func update(now: Int64 = MonotonicClock.milliseconds()) -> Bool {
        state.withLock { state in
            guard !state.closed, !state.resolving, !state.sockets.isEmpty else { return !state.resolving }
            var changed = false
            var descriptors = state.sockets.map { pollfd(fd: $0.fd, events: Int16(POLLOUT), revents: 0) }
            let connecting = state.sockets.contains { !$0.isReady }
            if connecting { _ = poll(&descriptors, nfds_t(descriptors.count), 0) }
            var kept: [Socket] = []
            for (index, var socket) in state.sockets.enumerated() {
                switch socket.state {
                case .connecting:
                    if descriptors[index].revents != 0 {
                        var error: Int32 = 0
                        var length = socklen_t(MemoryLayout<Int32>.size)
                        if getsockopt(socket.fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0 || error != 0 {
                            Glibc.close(socket.fd)
                            changed = true
                            continue
                        }
                        // Seen ready only after the hold: when its handshake ended is not known.
                        if now - socket.openedAt >= holdLimit {
                            Glibc.close(socket.fd)
                            changed = true
                            continue
                        }
                        socket.state = .ready(since: now)
                        changed = true
                    } else if now - socket.openedAt >= holdLimit {
                        Glibc.close(socket.fd)
                        changed = true
                        continue
                    }
                case .ready(let since):
                    if now - since >= idleLimit {
                        Glibc.close(socket.fd)
                        state.promised = max(0, state.promised - 1)
                        changed = true
                        continue
                    }
                }
                kept.append(socket)
            }
            state.sockets = kept
            return changed
        }
    }

    /// The connections still being made, for the engine's poll to wake when one is over;
    /// and the longest it may sleep before `update` has something to give up or close (ms).
    /// Nothing once every connection was taken or closed.
    func waiting(now: Int64 = MonotonicClock.milliseconds()) -> (descriptors: [curl_waitfd], wakeIn: Int64?) {
        state.withLock { state in
            guard !state.closed else { return ([], nil) }
            var descriptors: [curl_waitfd] = []
            var wakeAt: Int64?
            func wake(at time: Int64) { wakeAt = min(wakeAt ?? time, time) }
            if state.resolving, now - startedAt < holdLimit { wake(at: startedAt + holdLimit) }
            for socket in state.sockets {
                switch socket.state {
                case .connecting:
                    descriptors.append(curl_waitfd(fd: socket.fd, events: Int16(CURL_WAIT_POLLOUT), revents: 0))
                    wake(at: socket.openedAt + holdLimit)
                case .ready(let since):
                    wake(at: since + idleLimit)
                }
            }
            return (descriptors, wakeAt.map { max(0, $0 - now) })
        }
    }

    /// Starts `count` more connections to the address the first ones went to, for requests
    /// about to follow (the streams of a segmented download, once its lead showed a file worth
    /// splitting): their handshakes run while the lead is paced. None when the lookup is not
    /// over, gave nothing, or the connections were closed; at most `count` ready or under way
    /// beyond those already promised. Returns how many are now ready or under way for them.
    @discardableResult
    func openMore(_ count: Int) -> Int {
        state.withLock { state in
            guard !state.closed, !state.resolving, !state.address.isEmpty else { return 0 }
            var spare = state.sockets.count - state.promised
            let now = MonotonicClock.milliseconds()
            // The socket address begins with its family.
            let family = Int32(state.address.withUnsafeBytes { $0.loadUnaligned(as: sa_family_t.self) })
            while spare < count, let socket = Self.connect(state.address, family: family, openedAt: now) {
                state.sockets.append(socket)
                spare += 1
            }
            return min(spare, count)
        }
    }

    /// Whether anything is left to look after: a lookup, or connections not taken or closed.
    var isSettled: Bool { state.withLock { $0.closed || (!$0.resolving && $0.sockets.isEmpty) } }

    /// A ready connection to `address` (libcurl's `sockaddr`, as it is about to open a socket
    /// for it), if there is one; libcurl then owns it. One the server closed meanwhile is not
    /// handed on.
    func take(_ address: UnsafePointer<curl_sockaddr>) -> Int32? {
        // libcurl's storage behind `addr` holds `addrlen` bytes (an IPv6 address is longer
        // than `struct sockaddr`).
        let offset = MemoryLayout<curl_sockaddr>.offset(of: \curl_sockaddr.addr)!
        let bytes = UnsafeRawBufferPointer(start: UnsafeRawPointer(address) + offset, count: Int(address.pointee.addrlen))
        return take(bytes)
    }

    /// The same for the socket address itself (`sockaddr_in` or `sockaddr_in6`).
    func take(_ address: UnsafeRawBufferPointer) -> Int32? {
        state.withLock { state in
            guard !state.closed, Self.sameEndpoint(state.address, address) else { return nil }
            while let index = state.sockets.firstIndex(where: { $0.isReady }) {
                let socket = state.sockets.remove(at: index)
                state.promised = max(0, state.promised - 1)
                var check = pollfd(fd: socket.fd, events: Int16(POLLIN), revents: 0)
                if case .ready(let since) = socket.state, MonotonicClock.milliseconds() - since < idleLimit, poll(&check, 1, 0) == 0 {
                    state.taken += 1
                    return socket.fd
                }
                // Readable before a request: the server closed it (or sent something unasked).
                Glibc.close(socket.fd)
            }
            return nil
        }
    }

    /// Whether two socket addresses name the same family, port and address (and IPv6 scope).
    static func sameEndpoint(_ first: [UInt8], _ second: UnsafeRawBufferPointer) -> Bool {
        first.withUnsafeBytes { first in
            guard first.count >= MemoryLayout<sockaddr_in>.size, second.count >= MemoryLayout<sockaddr_in>.size else { return false }
            let family = first.loadUnaligned(as: sa_family_t.self)
            guard family == second.loadUnaligned(as: sa_family_t.self) else { return false }
            switch Int32(family) {
            case AF_INET:
                let a = first.loadUnaligned(as: sockaddr_in.self), b = second.loadUnaligned(as: sockaddr_in.self)
                return a.sin_port == b.sin_port && a.sin_addr.s_addr == b.sin_addr.s_addr
            case AF_INET6:
                guard first.count >= MemoryLayout<sockaddr_in6>.size, second.count >= MemoryLayout<sockaddr_in6>.size else { return false }
                let a = first.loadUnaligned(as: sockaddr_in6.self), b = second.loadUnaligned(as: sockaddr_in6.self)
                return a.sin6_port == b.sin6_port && a.sin6_scope_id == b.sin6_scope_id
                    && withUnsafeBytes(of: a.sin6_addr) { x in withUnsafeBytes(of: b.sin6_addr) { y in x.elementsEqual(y) } }
            default:
                return false
            }
        }
    }

    /// Closes every connection not taken; later requests go on as if there had been none.
    /// The `CURLOPT_RESOLVE` list stays until the object goes: requests added meanwhile point to it.
    func close() {
        state.withLock { state in
            state.closed = true
            state.wake = nil
            for socket in state.sockets { Glibc.close(socket.fd) }
            state.sockets = []
        }
    }

    /// How many connections are still being made or ready and not taken, how many are ready,
    /// how many libcurl took, and how many times a request was told to wait.
    var counts: (open: Int, ready: Int, taken: Int, refusals: Int) {
        state.withLock { state in
            let ready = state.sockets.filter { $0.isReady }.count
            return (state.sockets.count, ready, state.taken, state.refusals)
        }
    }
}
