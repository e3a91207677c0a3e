import Foundation
import Synchronization
import Testing
@testable import MirrorCore
import CCurl
#if canImport(Glibc)
import Glibc
#endif

/// The connections a run opens to its first origin before the engine is made
/// (`EarlyConnections`): which and how many, that the first requests take them and open no
/// others, and that a refused, slow or unused one changes nothing else.
struct EarlyConnectionsTests {
    // MARK: The plan

    struct PlanCase: Sendable, CustomTestStringConvertible {
        let name: String
        let urls: [String]
        let concurrency: Int
        let hostLimit: Int?
        let proxied: Bool
        let expected: EarlyConnections.Target?
        var testDescription: String { name }
    }

    static let planCases: [PlanCase] = [
        PlanCase(name: "http: concurrency", urls: (0..<20).map { "http://h.example:8080/f\($0)" }, concurrency: 8, hostLimit: nil,
                 proxied: false, expected: .init(host: "h.example", port: 8080, count: 8)),
        PlanCase(name: "https: the first requests that open connections", urls: (0..<20).map { "https://h.example/f\($0)" },
                 concurrency: 8, hostLimit: nil, proxied: false, expected: .init(host: "h.example", port: 443, count: RequestBudget.streamConnections)),
        PlanCase(name: "fewer entries than concurrency", urls: ["http://h.example/a", "http://h.example/b"], concurrency: 8,
                 hostLimit: nil, proxied: false, expected: .init(host: "h.example", port: 80, count: 2)),
        PlanCase(name: "only the first origin's share of the first requests",
                 urls: ["http://a.example/1", "http://b.example/1", "http://a.example/2", "https://a.example/3", "http://a.example:80/4"],
                 concurrency: 4, hostLimit: nil, proxied: false, expected: .init(host: "a.example", port: 80, count: 2)),
        PlanCase(name: "the host's own concurrency", urls: (0..<20).map { "http://h.example/f\($0)" }, concurrency: 8, hostLimit: 3,
                 proxied: false, expected: .init(host: "h.example", port: 80, count: 3)),
        PlanCase(name: "through a proxy: none", urls: ["http://h.example/a"], concurrency: 8, hostLimit: nil, proxied: true, expected: nil),
        PlanCase(name: "ftp: none", urls: ["ftp://h.example/a"], concurrency: 8, hostLimit: nil, proxied: false, expected: nil),
        PlanCase(name: "file: none", urls: ["file:///tmp/a"], concurrency: 8, hostLimit: nil, proxied: false, expected: nil),
        PlanCase(name: "a name that is not ASCII: none (libcurl converts it)", urls: ["http://bücher.example/a"], concurrency: 8,
                 hostLimit: nil, proxied: false, expected: nil),
        PlanCase(name: "an IPv6 literal", urls: ["http://[::1]:8080/a"], concurrency: 2, hostLimit: nil, proxied: false,
                 expected: .init(host: "::1", port: 8080, count: 1)),
        PlanCase(name: "no entries", urls: [], concurrency: 8, hostLimit: nil, proxied: false, expected: nil),
    ]

    @Test(arguments: planCases)
    func plan(_ given: PlanCase) {
        let target = EarlyConnections.plan(urls: given.urls, concurrency: given.concurrency, hostLimit: { _ in given.hostLimit },
                                           proxied: { _ in given.proxied })
        #expect(target == given.expected)
    }

    // MARK: Runs

    private static func site(_ count: Int, seed: UInt64) -> [String: Data] {
        var site: [String: Data] = [:]
        for index in 0..<count { site[String(format: "f%03d.bin", index)] = randomData(count: 3_000, seed: seed + UInt64(index)) }
        return site
    }

    /// Through the link emulator (20 ms each way), so that a handshake takes time: the run's
    /// first requests take every early connection, and the run opens no connection besides
    /// (plain HTTP: `concurrency`; HTTP/2: the first `streamConnections`, the rest as streams).
    /// A name (`localhost`) is looked up on a thread of its own, and libcurl is handed that
    /// lookup.
    @Test(arguments: [("http", "127.0.0.1"), ("https", "127.0.0.1"), ("http", "localhost")])
    func theFirstRequestsTakeTheEarlyConnectionsAndOpenNoOthers(scheme: String, host: String) async throws {
        let ca = try PrivateCA()
        let site = Self.site(24, seed: 31_000)
        let options = scheme == "https" ? NginxOptions(tls: ca.serverTLS, http2: true) : NginxOptions()
        let scenario = try SyncScenario(.nginx(site: site, options: options))
        let link = try await LinkProxy.start(upstreamPort: scenario.nginx.port, delay: .milliseconds(20))
        defer { link.stop() }
        let manifest = try scenario.load(ManifestText(top: ["concurrency: 4", "defaults:", "  ca_file: \(ca.caCertificate)"],
                                                      entries: site.keys.sorted().map { .init("\(scheme)://\(host):\(link.port)/\($0)") }))
        let early = try #require(EarlyConnections.open(for: manifest, concurrency: 4, proxies: .direct))
        #expect(early.target == .init(host: host, port: Int(link.port), count: 4))
        var settings = SyncScenario.Settings()
        settings.early = early
        let reports = try await scenario.sync(manifest, settings)
        #expect(reports.allSatisfy { $0.outcome == .transferred }, "\(reports.map(\.outcome))")
        for (name, data) in site { #expect(scenario.local(name)?.fingerprint == data.fingerprint, "\(name)") }
        let counts = early.counts
        #expect(counts.taken == 4 && counts.open == 0, "\(counts)")
        let requests = try scenario.nginxRequests()
        let connections = Set(requests.map(\.connection))
        #expect(requests.count == 24 && connections.count == 4, "\(requests.count) requests on connections \(connections.sorted())")
    }

    /// To an origin that refuses connections, the early ones fail at once and the requests go
    /// on to fail as they would have without them: the same failures, and none taken.
    @Test func aRefusedOriginFailsAsItWouldHaveWithout() async throws {
        let closed = try ClosedPort()
        let scenario = try SyncScenario()
        let manifest = try scenario.load(ManifestText(top: ["concurrency: 2", "defaults:", "  retries: 0"],
                                                      entries: ["a", "b", "c"].map { .init("http://127.0.0.1:\(closed.port)/\($0)") }))
        let early = try #require(EarlyConnections.open(for: manifest, concurrency: 2, proxies: .direct))
        var settings = SyncScenario.Settings()
        settings.early = early
        let with = try await scenario.sync(manifest, settings)
        let without = try await scenario.sync(manifest)
        // libcurl's message says how long the attempt took: that may differ by a millisecond.
        let described = { (reports: [EntryReport]) in reports.map { "\($0.outcome)".replacing(/after \d+ ms/, with: "after N ms") } }
        #expect(described(with) == described(without))
        #expect(with.allSatisfy { if case .failed = $0.outcome { true } else { false } }, "\(with.map(\.outcome))")
        #expect(early.counts.taken == 0 && early.counts.open == 0, "\(early.counts)")
    }

    /// A listener whose queue of connections not yet accepted is full: a further handshake
    /// stays unanswered (its SYN dropped) until the test accepts the one in the queue; the
    /// kernel then completes it at the SYN's next try, about a second after it began.
    private final class FullListener: Sendable {
        let descriptor: Int32
        let port: UInt16
        private let filler: Int32

        init() throws {
            (descriptor, port) = try LoopbackSocket.listen(on: try LoopbackAddress("127.0.0.1"), backlog: 0)
            filler = try LoopbackSocket.connect(to: try LoopbackAddress("127.0.0.1"), port: port)
        }

        /// Accepts the connection that filled the queue (and closes both ends of it).
        func makeRoom() {
            #expect(LoopbackSocket.waitUntil(descriptor, isReadyFor: Int16(POLLIN), timeout: .seconds(5)))
            let accepted = accept(descriptor, nil, nil)
            if accepted >= 0 { close(accepted) }
            close(filler)
        }

        deinit { close(descriptor) }
    }

    /// A handshake not over within the hold limit is given up: the connection is closed and a
    /// request to its origin may go (libcurl then connects as it would have).
    @Test func aHandshakeNotOverWithinTheHoldLimitIsGivenUp() throws {
        let listener = try FullListener()
        let early = EarlyConnections(.init(host: "127.0.0.1", port: Int(listener.port), count: 1), holdLimit: 300)
        let start = early.startedAt
        #expect(early.counts.open == 1)
        #expect(early.admit(host: "127.0.0.1", port: Int(listener.port)).admitted == false, "held while the handshake goes on")
        #expect(early.admit(host: "127.0.0.2", port: Int(listener.port)).admitted, "another origin is not held")
        #expect(early.waiting(now: start).descriptors.count == 1)
        #expect(early.update(now: start + 100) == false)
        #expect(early.counts.open == 1)
        #expect(early.update(now: start + 300))
        #expect(early.counts.open == 0)
        #expect(early.admit(host: "127.0.0.1", port: Int(listener.port)).admitted)
    }

    /// A connection opened later for the requests about to follow has a hold of its own,
    /// counted from when it was opened, not from the start.
    @Test func aConnectionOpenedLaterIsHeldFromItsOwnStart() throws {
        let listener = try FullListener()
        let early = EarlyConnections(.init(host: "127.0.0.1", port: Int(listener.port), count: 1), holdLimit: 300)
        let start = early.startedAt
        Thread.sleep(forTimeInterval: 0.05)
        let later = MonotonicClock.milliseconds()
        // One is under way, not promised: one more makes two.
        #expect(early.openMore(2) == 2)
        #expect(early.counts.open == 2)
        #expect(early.update(now: start + 300))
        #expect(early.counts.open == 1, "the first is given up at the start's hold, the later one is not")
        #expect(early.admit(host: "127.0.0.1", port: Int(listener.port)).admitted == false, "held for the later one")
        #expect(early.update(now: later + 1000))
        #expect(early.counts.open == 0)
        #expect(early.admit(host: "127.0.0.1", port: Int(listener.port)).admitted)
    }

    /// A ready connection not taken within the idle limit is closed, not handed to a later
    /// request (the server may have given up on it).
    @Test func aConnectionNotTakenWithinTheIdleLimitIsClosed() throws {
        let (descriptor, port) = try LoopbackSocket.listen(on: try LoopbackAddress("127.0.0.1"))
        defer { close(descriptor) }
        let early = EarlyConnections(.init(host: "127.0.0.1", port: Int(port), count: 2), idleLimit: 200)
        for _ in 0..<400 where early.counts.ready < 2 {
            _ = early.update()
            if early.counts.ready < 2 { Thread.sleep(forTimeInterval: 0.005) }
        }
        #expect(early.counts.ready == 2)
        #expect(early.admit(host: "127.0.0.1", port: Int(port)).admitted)
        #expect(early.update(now: MonotonicClock.milliseconds() + 200))
        #expect(early.counts.open == 0)
        var address = try LoopbackAddress("127.0.0.1").socketAddress(port: port)
        let taken = withUnsafeBytes(of: &address) { early.take($0) }
        #expect(taken == nil)
    }

    /// More connections to the same address for the requests about to follow (a segmented
    /// download's streams): as many as asked beyond those ready and not promised, each taken
    /// once; none once the connections are closed.
    @Test func moreConnectionsAreOpenedForTheRequestsAboutToFollow() throws {
        let (descriptor, port) = try LoopbackSocket.listen(on: try LoopbackAddress("127.0.0.1"))
        defer { close(descriptor) }
        let early = EarlyConnections(.init(host: "127.0.0.1", port: Int(port), count: 1))
        func waitReady(_ count: Int) {
            for _ in 0..<400 where early.counts.ready < count {
                _ = early.update()
                if early.counts.ready < count { Thread.sleep(forTimeInterval: 0.005) }
            }
        }
        waitReady(1)
        // One is there, not promised: two more make three.
        #expect(early.openMore(3) == 3)
        #expect(early.counts.open == 3)
        #expect(early.admit(host: "127.0.0.1", port: Int(port)).admitted, "the ready one is promised")
        #expect(early.admit(host: "127.0.0.1", port: Int(port)).admitted == false, "held while the new handshakes go on")
        waitReady(3)
        var address = try LoopbackAddress("127.0.0.1").socketAddress(port: port)
        var taken: [Int32] = []
        for _ in 0..<4 {
            if let fd = withUnsafeBytes(of: &address, { early.take($0) }) { taken.append(fd) }
        }
        #expect(taken.count == 3)
        for fd in taken { close(fd) }
        #expect(early.counts.open == 0)
        early.close()
        #expect(early.openMore(2) == 0)
        #expect(early.counts.open == 0)
    }

    /// The engine holds a request to the origin while its early connection's handshake goes
    /// on, and sends it on that connection once it is over: the server accepts no other. (The
    /// limits are far off: on a loaded machine the SYN's next tries come 1, 3, 7, 15 s after
    /// the first.)
    @Test func theEngineHoldsARequestUntilItsEarlyConnectionIsReady() async throws {
        let listener = try FullListener()
        let early = EarlyConnections(.init(host: "127.0.0.1", port: Int(listener.port), count: 1), holdLimit: 120_000, idleLimit: 120_000)
        let engine = TransferEngine(early: early)
        let request = TransferRequest(url: "http://127.0.0.1:\(listener.port)/a", method: .get)
        let outcome = Mutex<TransferOutcome?>(nil)
        // The server's side on a thread of its own, so that a busy cooperative pool cannot
        // delay it past the SYN's next tries: room made after 0.2 s, then one connection served.
        let served = Mutex<(takenBeforeRoom: Int, request: String, accepted: Bool)?>(nil)
        let server = Thread {
            Thread.sleep(forTimeInterval: 0.2)
            let takenBeforeRoom = early.counts.taken
            listener.makeRoom()
            var request = ""
            var accepted = false
            if LoopbackSocket.waitUntil(listener.descriptor, isReadyFor: Int16(POLLIN), timeout: .seconds(60)) {
                let connection = accept(listener.descriptor, nil, nil)
                if connection >= 0 {
                    accepted = true
                    if LoopbackSocket.waitUntil(connection, isReadyFor: Int16(POLLIN), timeout: .seconds(60)) {
                        var buffer = [UInt8](repeating: 0, count: 4096)
                        let read = recv(connection, &buffer, buffer.count, 0)
                        request = String(decoding: buffer.prefix(max(0, read)), as: UTF8.self)
                        let reply = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
                        _ = reply.withCString { send(connection, $0, strlen($0), 0) }
                    }
                    close(connection)
                }
            }
            served.withLock { $0 = (takenBeforeRoom, request, accepted) }
        }
        server.start()
        engine.post { engine.start(request, sink: nil) { result in outcome.withLock { $0 = result } } }
        for _ in 0..<12_000 where outcome.withLock({ $0 }) == nil || served.withLock({ $0 }) == nil {
            try await Task.sleep(for: .milliseconds(10))
        }
        let server_ = try #require(served.withLock { $0 })
        #expect(server_.takenBeforeRoom == 0, "held: libcurl had not opened a socket before the handshake could end")
        #expect(server_.accepted && server_.request.hasPrefix("GET /a HTTP/1.1"), "\(server_.request)")
        let ended = try #require(outcome.withLock { $0 })
        #expect(ended.succeeded && ended.head?.status == 200, "\(ended)")
        #expect(early.counts.taken == 1)
        // No connection but the one taken: nothing else waits in the queue.
        var pending = pollfd(fd: listener.descriptor, events: Int16(POLLIN), revents: 0)
        #expect(poll(&pending, 1, 0) == 0)
    }

    /// A request held for an early connection is cancelled in the engine's turn that cancels
    /// it, as a running one is, not when the hold ends.
    @Test func aHeldRequestIsCancelledAtOnce() async throws {
        let listener = try FullListener()
        let early = EarlyConnections(.init(host: "127.0.0.1", port: Int(listener.port), count: 1), holdLimit: 120_000)
        let engine = TransferEngine(early: early)
        let request = TransferRequest(url: "http://127.0.0.1:\(listener.port)/a", method: .get)
        let cancelledAt = Mutex<Int64>(0)
        let (outcome, endedAt): (TransferOutcome, Int64) = await withCheckedContinuation { continuation in
            engine.post {
                let id = engine.start(request, sink: nil) { continuation.resume(returning: ($0, MonotonicClock.milliseconds())) }
                engine.post {
                    cancelledAt.withLock { $0 = MonotonicClock.milliseconds() }
                    engine.cancel(id)
                }
            }
        }
        #expect(outcome.cancelled, "\(outcome)")
        #expect(early.counts.refusals >= 1, "the request was held")
        #expect(endedAt - cancelledAt.withLock { $0 } < 1_000, "ended \(endedAt - cancelledAt.withLock { $0 }) ms after its cancel")
        #expect(early.counts.taken == 0)
        listener.makeRoom()
    }

    /// With no request held, the engine still closes a ready connection nobody took once its
    /// idle limit passes (the run's first entries needed no request, or it waited for a lock).
    @Test func theEngineClosesAnUntakenConnectionAtItsIdleLimit() async throws {
        let (descriptor, port) = try LoopbackSocket.listen(on: LoopbackAddress("127.0.0.1"))
        defer { close(descriptor) }
        let early = EarlyConnections(.init(host: "127.0.0.1", port: Int(port), count: 2), idleLimit: 300)
        let engine = TransferEngine(early: early)
        for _ in 0..<1000 where early.counts.open > 0 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(early.counts.open == 0 && early.counts.taken == 0, "\(early.counts)")
        withExtendedLifetime(engine) {}
    }

    /// An IPv6 address is matched by family, port and address, from the whole of libcurl's
    /// socket address (longer than `struct sockaddr`).
    @Test func anIPv6ConnectionIsTakenForItsAddress() throws {
        let listener = socket(AF_INET6, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        try #require(listener >= 0)
        defer { close(listener) }
        var address = sockaddr_in6()
        address.sin6_family = sa_family_t(AF_INET6)
        address.sin6_addr = in6addr_loopback
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
        }
        try #require(bound == 0 && listen(listener, 8) == 0, "IPv6 loopback (::1) is needed: \(String(cString: strerror(errno)))")
        var length = socklen_t(MemoryLayout<sockaddr_in6>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        let port = Int(UInt16(bigEndian: address.sin6_port))
        let early = EarlyConnections(.init(host: "::1", port: port, count: 1))
        for _ in 0..<400 where early.counts.ready < 1 {
            _ = early.update()
            if early.counts.ready < 1 { Thread.sleep(forTimeInterval: 0.005) }
        }
        #expect(early.counts.ready == 1)
        // As libcurl hands it to CURLOPT_OPENSOCKETFUNCTION: the address after four ints,
        // `addrlen` bytes of it.
        func curlAddress(port: UInt16) -> UnsafeMutableRawPointer {
            let offset = MemoryLayout<curl_sockaddr>.offset(of: \curl_sockaddr.addr)!
            let memory = UnsafeMutableRawPointer.allocate(byteCount: offset + MemoryLayout<sockaddr_in6>.size, alignment: 8)
            memory.initializeMemory(as: UInt8.self, repeating: 0, count: offset + MemoryLayout<sockaddr_in6>.size)
            let header = memory.assumingMemoryBound(to: curl_sockaddr.self)
            header.pointee.family = AF_INET6
            header.pointee.socktype = Int32(SOCK_STREAM.rawValue)
            header.pointee.addrlen = UInt32(MemoryLayout<sockaddr_in6>.size)
            var v6 = sockaddr_in6()
            v6.sin6_family = sa_family_t(AF_INET6)
            v6.sin6_port = port.bigEndian
            v6.sin6_addr = in6addr_loopback
            withUnsafeBytes(of: v6) { (memory + offset).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            return memory
        }
        let other = curlAddress(port: UInt16(port == 65535 ? 1 : port + 1))
        defer { other.deallocate() }
        #expect(early.take(UnsafePointer(other.assumingMemoryBound(to: curl_sockaddr.self))) == nil, "another port")
        let same = curlAddress(port: UInt16(port))
        defer { same.deallocate() }
        let taken = early.take(UnsafePointer(same.assumingMemoryBound(to: curl_sockaddr.self)))
        #expect(taken != nil && early.counts.taken == 1)
        if let taken { close(taken) }
    }
}
