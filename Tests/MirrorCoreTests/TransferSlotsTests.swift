import Synchronization
import Testing
@testable import MirrorCore

struct TransferSlotsTests {
    /// A segmented download's extra slot: only a free one, never ahead of an entry that waits,
    /// and counted against the host's limit.
    @Test func anIdleSlotIsTakenOnlyWhenNoOneWaits() throws {
        let slots = TransferSlots(2, hostLimits: ["h": 1])
        let first = try #require(slots.acquireIfIdle(host: "h"))
        #expect(slots.acquireIfIdle(host: "h") == nil, "the host is at its limit")
        let second = try #require(slots.acquireIfIdle())
        #expect(slots.acquireIfIdle() == nil, "none free")
        let waiter = Mutex<TransferSlots.Slot?>(nil)
        let (granted, _) = slots.acquire(host: nil) { slot in waiter.withLock { $0 = slot } }
        #expect(granted == nil)
        #expect(slots.acquireIfIdle() == nil)
        second.release()
        // The waiter got the freed permit; nothing is idle.
        #expect(waiter.withLock { $0 } != nil)
        #expect(slots.acquireIfIdle() == nil)
        first.release()
        waiter.withLock { $0?.release() }
    }

    /// How many idle slots `acquireIfIdle` would hand out now: the free ones, within the host's
    /// limit and `limit`, none while anyone waits; counting takes none.
    @Test func theIdleSlotsAreCountedAsAcquireIfIdleWouldGrantThem() throws {
        let slots = TransferSlots(3, hostLimits: ["h": 2])
        #expect(slots.idleCount(limit: 15) == 3)
        #expect(slots.idleCount(limit: 2) == 2)
        #expect(slots.idleCount(host: "h", limit: 15) == 2)
        let first = try #require(slots.acquireIfIdle(host: "h"))
        #expect(slots.idleCount(host: "h", limit: 15) == 1)
        #expect(slots.idleCount(limit: 15) == 2)
        let second = try #require(slots.acquireIfIdle())
        let third = try #require(slots.acquireIfIdle())
        #expect(slots.idleCount(limit: 15) == 0)
        let waiter = Mutex<TransferSlots.Slot?>(nil)
        let (granted, _) = slots.acquire(host: nil) { slot in waiter.withLock { $0 = slot } }
        #expect(granted == nil)
        third.release()
        // The waiter took the freed permit.
        #expect(slots.idleCount(limit: 15) == 0)
        second.release()
        #expect(slots.idleCount(limit: 15) == 1)
        first.release()
        waiter.withLock { $0?.release() }
        #expect(slots.idleCount(limit: 15) == 3)
    }

    @Test func noMoreThanTheCountAreHeldAtOnce() async {
        let slots = TransferSlots(3)
        let held = Shared((now: 0, most: 0, done: 0))
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<20 {
                group.addTask {
                    guard let slot = await slots.acquire() else { return }
                    held.withLock { $0.now += 1; $0.most = max($0.most, $0.now) }
                    try? await Task.sleep(for: .milliseconds(2))
                    held.withLock { $0.now -= 1; $0.done += 1 }
                    slot.release()
                }
            }
        }
        let final = held.withLock { $0 }
        #expect(final.done == 20)
        #expect(final.most == 3)
    }

    @Test func aCancelledWaiterGetsNoSlotAndTakesNone() async throws {
        let slots = TransferSlots(1)
        let first = try #require(await slots.acquire())
        let waiter = Task { await slots.acquire() }
        try await Task.sleep(for: .milliseconds(50))
        waiter.cancel()
        #expect(await waiter.value == nil)
        first.release()
        first.release()   // a second release gives nothing back
        let second = try #require(await slots.acquire())
        let third = Task { await slots.acquire() }
        try await Task.sleep(for: .milliseconds(50))
        third.cancel()
        #expect(await third.value == nil, "only one permit exists, and it is held")
        second.release()
    }

    @Test func aTaskCancelledBeforeAskingGetsNone() async {
        let slots = TransferSlots(2)
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await slots.acquire()
        }
        #expect(await task.value == nil)
    }

    /// Asks for a permit for `host`; one granted later is kept, by name, in `granted`.
    private static func ask(_ slots: TransferSlots, _ host: String?, _ name: String,
                            _ granted: Shared<[(name: String, slot: TransferSlots.Slot)]>) -> TransferSlots.Slot? {
        slots.acquire(host: host) { slot in granted.withLock { $0.append((name, slot)) } }.0
    }

    /// A host with its own `concurrency` gets no more permits than that, and its waiters do not
    /// hold up another host's requests queued behind them.
    @Test func aLimitedHostWaitsAloneForItsOwnPermits() throws {
        let slots = TransferSlots(3, hostLimits: ["a": 1])
        let granted = Shared([(name: String, slot: TransferSlots.Slot)]())
        let a1 = try #require(Self.ask(slots, "a", "a1", granted))
        #expect(Self.ask(slots, "a", "a2", granted) == nil, "host a is at its limit of 1")
        let b1 = try #require(Self.ask(slots, "b", "b1", granted), "a waiter of host a holds up no other host")
        let c1 = try #require(Self.ask(slots, nil, "c1", granted))
        #expect(Self.ask(slots, nil, "c2", granted) == nil, "3 permits in all are out")
        b1.release()
        #expect(granted.withLock { $0.map(\.name) } == ["c2"], "the freed permit goes to the first waiter that may have it")
        a1.release()
        #expect(granted.withLock { $0.map(\.name) } == ["c2", "a2"], "host a's permit lets its own waiter in")
        #expect(Self.ask(slots, "b", "b2", granted) == nil, "a1's permit went to a2: none is free")
        c1.release()
        #expect(granted.withLock { $0.map(\.name) } == ["c2", "a2", "b2"])
    }

    private static let origin = OriginKey(url: "https://h2.example/", proxy: nil)!

    /// A light request to an HTTP/2 origin, or `request` to it.
    private static func want(_ request: RequestBudget.Request = .light, host: String? = nil, multiplexable: Bool = true) -> TransferSlots.Want {
        TransferSlots.Want(host: host, origin: origin, request: request, multiplexable: multiplexable)
    }

    /// Before the origin's first reply, its requests take connection permits; once it is known
    /// to speak HTTP/2, light ones take stream permits, beyond `concurrency`, and a waiter
    /// queued meanwhile is granted a stream. The cap counts every request riding on the
    /// origin's connection, those on connection permits too (libcurl multiplexes them as well).
    @Test func lightRequestsRideOnAnHTTP2OriginsStreamsUpToTheCap() throws {
        let slots = TransferSlots(2, streamCap: 4, streamConnections: 1)
        let granted = Shared([(name: String, slot: TransferSlots.Slot)]())
        func ask(_ want: TransferSlots.Want, _ name: String) -> TransferSlots.Slot? {
            slots.acquire(want) { slot in granted.withLock { $0.append((name, slot)) } }.0
        }
        let first = try #require(ask(Self.want(), "first"))
        #expect(first.budget == .connection, "nothing is known of the origin yet")
        let second = try #require(ask(Self.want(), "second"))
        #expect(second.budget == .connection)
        #expect(ask(Self.want(), "third") == nil, "2 connection permits, both out")
        slots.learn(Self.origin, speaks: .http2)
        #expect(granted.withLock { $0.map(\.name) } == ["third"], "the waiter rides on the connection now known to multiplex")
        #expect(granted.withLock { $0.first?.slot.budget } == .stream)
        let fourth = try #require(ask(Self.want(), "fourth"))
        #expect(fourth.budget == .stream)
        #expect(slots.inUse == (connections: 2, streams: 2))
        #expect(ask(Self.want(), "fifth") == nil, "4 on the connection: 2 streams, 2 requests on connection permits")
        #expect(ask(Self.want(.body(RequestBudget.largeBody)), "large") == nil, "a large GET waits for a connection permit")
        fourth.release()
        #expect(granted.withLock { $0.map(\.name) } == ["third", "fifth"], "a stream freed goes to the light waiter only")
        first.release()
        #expect(granted.withLock { $0.map(\.name) } == ["third", "fifth", "large"])
        #expect(granted.withLock { $0.last?.slot.budget } == .connection)
        #expect(slots.inUse == (connections: 2, streams: 2))
        #expect(ask(Self.want(), "sixth") == nil, "the large GET rides on the connection too")
        second.release()
        #expect(granted.withLock { $0.map(\.name) } == ["third", "fifth", "large", "sixth"])
        granted.withLock { $0.forEach { $0.slot.release() } }
        #expect(slots.inUse == (connections: 0, streams: 0), "every permit came back")
    }

    /// A request that may not share a connection (forced to HTTP/1.1) holds its connection
    /// permit without taking a place on the origin's HTTP/2 connection.
    @Test func aRequestOnItsOwnConnectionLeavesTheStreamsAlone() throws {
        let slots = TransferSlots(2, streamCap: 2, streamConnections: 1)
        slots.learn(Self.origin, speaks: .http2)
        let own = try #require(slots.acquireNow(Self.want(.body(.max), multiplexable: false)))
        #expect(own.budget == .connection)
        let streams = (0..<3).compactMap { _ in slots.acquireNow(Self.want()) }
        #expect(streams.count == 2 && streams.allSatisfy { $0.budget == .stream }, "both streams are free")
        own.release()
        streams.forEach { $0.release() }
    }

    /// An origin not heard yet has its first `streamConnections` requests open connections;
    /// the others, and every request once it has answered, wait for one being set up. Each
    /// origin counts its own.
    @Test func anOriginsFirstRequestsOpenConnectionsUntilItAnswers() throws {
        let slots = TransferSlots(8, streamCap: 100, streamConnections: 3)
        let other = try #require(OriginKey(url: "https://other.example/", proxy: nil))
        #expect((0..<5).map { _ in slots.waitsForConnection(to: Self.origin) } == [false, false, false, true, true])
        #expect(slots.waitsForConnection(to: other) == false, "another origin opens its own")
        slots.learn(other, speaks: .http2)
        #expect(slots.waitsForConnection(to: other), "heard: its requests wait for its connections")
        slots.learn(Self.origin, speaks: .http1)
        #expect(slots.waitsForConnection(to: Self.origin))
    }

    /// Requests that may not share a connection, or to an origin heard to speak HTTP/1.1, stay
    /// on connection permits however light they are.
    @Test func http1AndUnmultiplexableRequestsStayOnConnections() throws {
        let slots = TransferSlots(1, streamCap: 10, streamConnections: 1)
        slots.learn(Self.origin, speaks: .http2)
        let limited = try #require(slots.acquireNow(Self.want(multiplexable: false)))
        #expect(limited.budget == .connection, "a rate-limited request goes over HTTP/1.1")
        #expect(slots.acquireNow(Self.want(multiplexable: false)) == nil)
        #expect(slots.acquireNow(Self.want())?.budget == .stream, "a light request still rides on the stream")
        slots.learn(Self.origin, speaks: .http1)
        #expect(slots.acquireNow(Self.want()) == nil, "heard as HTTP/1.1 now: connection permits only")
        limited.release()
    }

    /// A host's `concurrency` holds its connection permits, not the streams on its connection.
    @Test func aHostsLimitBoundsItsConnectionPermitsNotItsStreams() throws {
        let slots = TransferSlots(4, hostLimits: ["h2.example": 1], streamCap: 5, streamConnections: 4)
        slots.learn(Self.origin, speaks: .http2)
        let large = try #require(slots.acquireNow(Self.want(.body(.max), host: "h2.example")))
        #expect(large.budget == .connection)
        #expect(slots.acquireNow(Self.want(.body(.max), host: "h2.example")) == nil, "the host's one connection permit is out")
        let streams = (0..<5).compactMap { _ in slots.acquireNow(Self.want(host: "h2.example")) }
        #expect(streams.count == 4 && streams.allSatisfy { $0.budget == .stream },
                "light requests go beyond the host's limit, up to the cap with the large GET on the connection")
        #expect(slots.acquireNow(Self.want(host: "h2.example")) == nil)
        large.release()
        streams.forEach { $0.release() }
        #expect(slots.inUse == (connections: 0, streams: 0))
    }
    /// Waiters are granted in the order they asked, across hosts with limits and without, and
    /// one taken out of the middle of its queue leaves the others their turn.
    @Test func waitersAreGrantedInTurnAcrossHostsAndAWithdrawnOneIsSkipped() throws {
        let slots = TransferSlots(1, hostLimits: ["a": 1])
        let holder = try #require(slots.acquireNow(TransferSlots.Want()))
        let order = Mutex<[String]>([])
        var ids: [String: UInt64] = [:]
        var granted: [TransferSlots.Slot] = []
        let lock = Mutex<[TransferSlots.Slot]>([])
        for (name, host) in [("a1", "a"), ("n1", nil), ("a2", "a"), ("n2", nil), ("a3", "a"), ("n3", nil)] as [(String, String?)] {
            let (now, id) = slots.acquire(host: host) { slot in
                order.withLock { $0.append(name) }
                lock.withLock { $0.append(slot) }
            }
            #expect(now == nil, "\(name): nothing is free")
            ids[name] = id
        }
        #expect(slots.withdraw(try #require(ids["a2"])), "a2 was waiting")
        #expect(!slots.withdraw(try #require(ids["a2"])), "and is no longer")
        holder.release()
        // One permit: each release lets exactly the next waiter in, in the order they asked.
        for _ in 0..<5 {
            let next = lock.withLock { $0.isEmpty ? nil : $0.removeFirst() }
            granted.append(try #require(next))
            granted.last?.release()
        }
        #expect(order.withLock { $0 } == ["a1", "n1", "n2", "a3", "n3"])
        #expect(slots.acquireIfIdle() != nil, "every waiter was served; the permit is free again")
    }
}
