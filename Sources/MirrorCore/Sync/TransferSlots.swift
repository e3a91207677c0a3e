import Synchronization

/// The permits for the network part of an attempt (probe and transfer) of `sync` and `plan`.
/// Entries hold one from before they ask the connectivity gate and the Retry-After pauses until
/// their request is done, and give it back before their file is hashed to the end, fsync'd and
/// renamed: more entries than `concurrency` can then be on the disk at once, and the disk
/// commits them together.
///
/// Two budgets (`RequestBudget` decides which a request takes, when it is granted):
/// - `concurrency` connection permits: connections and large transfers. A host with its own
///   `concurrency` (`hosts:`) is held to it as well: one of its connection permits is granted
///   only while fewer than that many are out.
/// - per origin known to speak HTTP/2, up to `streamCap` stream permits on each of its
///   connections (`RequestBudget.streamBudget`): light requests that ride on its connection,
///   beyond `concurrency` and beyond a host's limit. Its connection permits held by requests
///   that may share its connection count against them too: libcurl puts those on the same
///   connections, and more than the connections carry would open further ones.
///
/// What an origin speaks is learned from the TLS handshake of its first connection, or from its
/// first reply through a proxy (`learn`); until then its requests
/// take connection permits, and a waiter that could now have a stream gets one. Waiters are
/// served in turn, but one that cannot be granted does not hold up those behind it.
final class TransferSlots: Sendable {
    /// One permit; giving it back twice gives it back once.
    final class Slot: Sendable {
        private let slots: TransferSlots
        let budget: RequestBudget
        /// What it was asked for.
        let want: Want
        private let held = Mutex(true)

        fileprivate init(_ slots: TransferSlots, budget: RequestBudget, want: Want) {
            self.slots = slots
            self.budget = budget
            self.want = want
        }

        /// The limited host it counts against; nil: none.
        var host: String? { want.host }

        func release() {
            let wasHeld = held.withLock { held in
                defer { held = false }
                return held
            }
            if wasHeld { slots.giveBack(self) }
        }

        deinit { release() }
    }

    /// What a permit is asked for.
    struct Want: Sendable, Equatable {
        /// The `hosts:` key whose `concurrency` its connection permit counts against; nil: none.
        var host: String?
        /// The origin whose connection it may share; nil: none (`file:`).
        var origin: OriginKey?
        var request: RequestBudget.Request = .light
        /// See `RequestBudget.multiplexes`.
        var multiplexable = false

        init(host: String? = nil, origin: OriginKey? = nil, request: RequestBudget.Request = .light, multiplexable: Bool = false) {
            self.host = host
            self.origin = origin
            self.request = request
            self.multiplexable = multiplexable
        }
    }

    /// What decides whether a want can be granted: wants of one class are granted in turn, so
    /// the waiters of a class queue behind its first (see `State.grantWaiters`).
    fileprivate struct WantClass: Hashable {
        var host: String?
        var origin: OriginKey?
        /// What `RequestBudget.choose` reads of the request.
        var isLarge: Bool
        var multiplexable: Bool

        init(_ want: Want) {
            host = want.host
            origin = want.origin
            isLarge = want.request.isLarge
            multiplexable = want.multiplexable
        }
    }

    fileprivate struct Waiter {
        let id: UInt64
        let want: Want
        let answer: @Sendable (RequestBudget?) -> Void
    }

    /// The waiters of one class, first in line at `head`. A waiter taken out leaves nil behind:
    /// what its answer holds (the entry waiting, with everything it owns) is let go when it is
    /// granted, not in a batch when the queue is compacted, in the middle of some later grant.
    fileprivate struct WaiterQueue {
        var items: [Waiter?] = []
        var head = 0

        var first: Waiter? { head < items.count ? items[head] : nil }

        mutating func removeFirst() -> Waiter {
            let waiter = items[head]!
            items[head] = nil
            head += 1
            if head == items.count {
                items.removeAll(keepingCapacity: true)
                head = 0
            } else if head >= 64, head * 2 >= items.count {
                items.removeFirst(head)
                head = 0
            }
            return waiter
        }
    }

    private struct State {
        var free: Int
        let total: Int
        /// Connection permits out per limited host.
        var inUse: [String: Int] = [:]
        /// Stream permits out per origin.
        var streams: [OriginKey: Int] = [:]
        /// Connection permits out per origin for requests that may share its connection: they
        /// ride on its HTTP/2 connections as streams too (libcurl multiplexes every request
        /// that may), so the origin's stream budget counts them.
        var sharing: [OriginKey: Int] = [:]
        var protocols: [OriginKey: RequestBudget.OriginProtocol] = [:]
        /// Requests per origin that opened a connection of their own while its protocol was
        /// not known (`RequestBudget.waitsForConnection`).
        var openedWhileUnknown: [OriginKey: Int] = [:]
        /// The waiters by class, each in the order it asked; each is told its permit's budget,
        /// or nil when it is withdrawn. Whether a waiter can be granted depends only on its
        /// class, so a pass over the classes' first waiters finds the earliest one that can.
        var queues: [WantClass: WaiterQueue] = [:]
        var waitingCount = 0
        var nextID: UInt64 = 0
        let hostLimits: [String: Int]
        let streamCap: Int
        let streamConnections: Int

        /// The budget `want` is granted from now; nil: it waits.
        func grantable(_ want: Want) -> RequestBudget? {
            // No origin's protocol is known in most runs over plain HTTP: no key hashed then.
            let origin = protocols.isEmpty ? .unknown : want.origin.flatMap { protocols[$0] } ?? .unknown
            switch RequestBudget.choose(want.request, origin: origin, multiplexable: want.multiplexable) {
            case .stream:
                let connections = want.host.flatMap { hostLimits[$0] }.map { min($0, total) } ?? total
                let budget = RequestBudget.streamBudget(connections: connections, streamCap: streamCap, spread: streamConnections)
                guard let key = want.origin, streams[key, default: 0] + sharing[key, default: 0] < budget else { return nil }
                return .stream
            case .connection:
                guard free > 0 else { return nil }
                if let host = want.host, let limit = hostLimits[host], inUse[host, default: 0] >= limit { return nil }
                return .connection
            }
        }

        mutating func take(_ budget: RequestBudget, for want: Want) {
            switch budget {
            case .stream:
                if let key = want.origin { streams[key, default: 0] += 1 }
            case .connection:
                free -= 1
                if let host = want.host, hostLimits[host] != nil { inUse[host, default: 0] += 1 }
                if want.multiplexable, let key = want.origin { sharing[key, default: 0] += 1 }
            }
        }

        mutating func putBack(_ budget: RequestBudget, for want: Want) {
            switch budget {
            case .stream:
                if let key = want.origin { streams[key, default: 1] -= 1 }
            case .connection:
                free += 1
                if let host = want.host, hostLimits[host] != nil { inUse[host, default: 1] -= 1 }
                if want.multiplexable, let key = want.origin { sharing[key, default: 1] -= 1 }
            }
        }

        mutating func enqueue(_ waiter: Waiter) {
            queues[WantClass(waiter.want), default: WaiterQueue()].items.append(waiter)
            waitingCount += 1
        }

        /// Grants what is free to the first waiters that may have it, in the order they asked:
        /// each step grants the earliest first waiter of a class that can be granted. Taking a
        /// permit only ever narrows what is free, so a class found blocked stays blocked for
        /// the rest of the pass: a pass costs the number of classes per grant, not the number
        /// of waiters.
        mutating func grantWaiters() -> [(@Sendable (RequestBudget?) -> Void, RequestBudget)] {
            var granted: [(@Sendable (RequestBudget?) -> Void, RequestBudget)] = []
            guard waitingCount > 0 else { return granted }
            if queues.count == 1 {
                // One class waits, as in most runs: its waiters in turn while its first can be
                // granted, with no pass over the classes.
                let position = queues.startIndex
                while let first = queues.values[position].first, let budget = grantable(first.want) {
                    let waiter = queues.values[position].removeFirst()
                    waitingCount -= 1
                    take(budget, for: waiter.want)
                    granted.append((waiter.answer, budget))
                }
                if queues.values[position].first == nil { queues.remove(at: position) }
                return granted
            }
            // By position in `queues`, which holds while no class is added or removed: a queue
            // emptied here goes only after the pass. Nothing is hashed, and each queue is
            // changed in place.
            typealias Position = Dictionary<WantClass, WaiterQueue>.Index
            var blocked: [Position] = []
            var emptied: [Position] = []
            while true {
                var earliest: (position: Position, id: UInt64, budget: RequestBudget)?
                var position = queues.startIndex
                while position != queues.endIndex {
                    defer { position = queues.index(after: position) }
                    guard !blocked.contains(position), let first = queues.values[position].first else { continue }
                    guard let budget = grantable(first.want) else {
                        blocked.append(position)
                        continue
                    }
                    if first.id < earliest?.id ?? .max { earliest = (position, first.id, budget) }
                }
                guard let earliest else { break }
                let waiter = queues.values[earliest.position].removeFirst()
                if queues.values[earliest.position].first == nil { emptied.append(earliest.position) }
                waitingCount -= 1
                take(earliest.budget, for: waiter.want)
                granted.append((waiter.answer, earliest.budget))
            }
            if !emptied.isEmpty {
                for key in emptied.map({ queues.keys[$0] }) { queues[key] = nil }
            }
            return granted
        }

        /// Takes the waiter `id` out of its queue; nil when it is not waiting.
        mutating func remove(_ id: UInt64) -> Waiter? {
            for (key, queue) in queues {
                guard let index = queue.items[queue.head...].firstIndex(where: { $0?.id == id }) else { continue }
                let waiter = queues[key]!.items.remove(at: index)!
                if queues[key]!.first == nil { queues[key] = nil }
                waitingCount -= 1
                return waiter
            }
            return nil
        }
    }

    private let state: Mutex<State>

    /// `count` connection permits in all; `hostLimits` caps the connection permits out at once
    /// for each named host; an HTTP/2 origin has `streamCap` stream permits for each of its
    /// connections, up to `streamConnections` of them (`RequestBudget.streamBudget`).
    init(_ count: Int, hostLimits: [String: Int] = [:], streamCap: Int = RequestBudget.streamCap,
         streamConnections: Int = RequestBudget.streamConnections) {
        state = Mutex(State(free: max(1, count), total: max(1, count), hostLimits: hostLimits, streamCap: max(1, streamCap),
                            streamConnections: max(1, streamConnections)))
    }

    /// Waits, in turn, for a connection permit. Nil when the task is cancelled first.
    func acquire() async -> Slot? {
        let want = Want()
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        let granted = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<RequestBudget?, Never>) in
                let answer = state.withLock { state -> RequestBudget?? in
                    // Checked under the lock the cancellation handler takes too: a task
                    // cancelled before it queued is answered here, one cancelled after is
                    // found in the queue by the handler.
                    if Task.isCancelled { return .some(nil) }
                    if let budget = state.grantable(want) {
                        state.take(budget, for: want)
                        return budget
                    }
                    state.enqueue(Waiter(id: id, want: want, answer: { continuation.resume(returning: $0) }))
                    return nil
                }
                if let answer { continuation.resume(returning: answer) }
            }
        } onCancel: {
            withdraw(id)
        }
        return granted.map { Slot(self, budget: $0, want: want) }
    }

    /// Without waiting: a permit for `want` now, or `granted` is called with one later, in turn
    /// (on the thread that gives one back or learns an origin's protocol), and the id to
    /// `withdraw` the request is returned.
    func acquire(_ want: Want, orWhenFree granted: @escaping @Sendable (Slot) -> Void) -> (Slot?, UInt64) {
        state.withLock { state -> (Slot?, UInt64) in
            let id = state.nextID
            state.nextID += 1
            // Every waiter is held back (nothing free for it): taking a permit that is free for
            // this request passes no one.
            if let budget = state.grantable(want) {
                state.take(budget, for: want)
                return (Slot(self, budget: budget, want: want), id)
            }
            state.enqueue(Waiter(id: id, want: want, answer: { [self] budget in if let budget { granted(Slot(self, budget: budget, want: want)) } }))
            return (nil, id)
        }
    }

    /// A connection permit (counted against `host` when it has a limit), now or later.
    func acquire(host: String? = nil, orWhenFree granted: @escaping @Sendable (Slot) -> Void) -> (Slot?, UInt64) {
        acquire(Want(host: host), orWhenFree: granted)
    }

    /// Requests waiting for a permit now.
    var waiting: Int { state.withLock { $0.waitingCount } }

    /// A permit for `want` if one is free now, without queueing.
    func acquireNow(_ want: Want) -> Slot? {
        state.withLock { state -> Slot? in
            guard let budget = state.grantable(want) else { return nil }
            state.take(budget, for: want)
            return Slot(self, budget: budget, want: want)
        }
    }

    /// A connection permit now, only if one is free for `host` and no one waits for a permit:
    /// what a segmented download asks for to add a connection, never ahead of an entry that
    /// waits its turn. Segments are never streams (each has its own connection).
    func acquireIfIdle(host: String? = nil) -> Slot? {
        let want = Self.idleWant(host: host)
        return state.withLock { state -> Slot? in
            guard state.waitingCount == 0, let budget = state.grantable(want), budget == .connection else { return nil }
            state.take(budget, for: want)
            return Slot(self, budget: budget, want: want)
        }
    }

    /// How many connection permits `acquireIfIdle` would grant one after another now, at most
    /// `limit`: none while an entry waits for one. Counted by granting them to a copy of the
    /// state, by the same rule.
    func idleCount(host: String? = nil, limit: Int) -> Int {
        let want = Self.idleWant(host: host)
        return state.withLock { state in
            guard state.waitingCount == 0 else { return 0 }
            var trial = state
            var count = 0
            while count < limit, trial.grantable(want) == .connection {
                trial.take(.connection, for: want)
                count += 1
            }
            return count
        }
    }

    /// What `acquireIfIdle` asks for: a connection, as a large body's.
    private static func idleWant(host: String?) -> Want {
        Want(host: host, request: .body(.max))
    }

    /// Takes a waiting request out of the queue, answering it no; false when it was no longer
    /// there (granted meanwhile).
    @discardableResult
    func withdraw(_ id: UInt64) -> Bool {
        let waiter = state.withLock { state -> (@Sendable (RequestBudget?) -> Void)? in
            state.remove(id)?.answer
        }
        waiter?(nil)
        return waiter != nil
    }

    /// `origin` answered as `heard`. Learning that it speaks HTTP/2 grants stream permits to
    /// the light requests waiting for it.
    func learn(_ origin: OriginKey, speaks heard: RequestBudget.OriginProtocol) {
        let granted = state.withLock { state -> [(@Sendable (RequestBudget?) -> Void, RequestBudget)] in
            guard state.protocols[origin] != heard else { return [] }
            state.protocols[origin] = heard
            return heard == .http2 ? state.grantWaiters() : []
        }
        for (answer, budget) in granted { answer(budget) }
    }

    /// Whether a request to `origin` that may share a connection waits for one being set up
    /// rather than opening its own (`RequestBudget.waitsForConnection`); one that does not is
    /// counted as opening one.
    func waitsForConnection(to origin: OriginKey) -> Bool {
        state.withLock { state in
            let heard = state.protocols[origin] ?? .unknown
            let opened = state.openedWhileUnknown[origin, default: 0]
            let waits = RequestBudget.waitsForConnection(origin: heard, openedWhileUnknown: opened, spread: state.streamConnections)
            if !waits { state.openedWhileUnknown[origin] = opened + 1 }
            return waits
        }
    }

    /// What `origin` was last heard to speak.
    func originProtocol(_ origin: OriginKey) -> RequestBudget.OriginProtocol {
        state.withLock { $0.protocols[origin] ?? .unknown }
    }

    /// Permits out now: connection permits, and stream permits of every origin together.
    var inUse: (connections: Int, streams: Int) {
        state.withLock { state in (state.total - state.free, state.streams.values.reduce(0, +)) }
    }

    /// Returns a permit and grants what it frees to the first waiters that may have it: a
    /// permit of a limited host may let one of its waiters in while the run has others free.
    private func giveBack(_ slot: Slot) {
        let granted = state.withLock { state -> [(@Sendable (RequestBudget?) -> Void, RequestBudget)] in
            state.putBack(slot.budget, for: slot.want)
            return state.grantWaiters()
        }
        for (answer, budget) in granted { answer(budget) }
    }
}
