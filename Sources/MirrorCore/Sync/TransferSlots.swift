import Synchronization

/// The `concurrency` limit of `sync`: permits for the network part of an attempt (probe and
/// transfer). Entries hold one from before they ask the connectivity gate and the Retry-After
/// pauses until their request is done, and give it back before their file is hashed to the
/// end, fsync'd and renamed: more entries than `concurrency` can then be on the disk at once,
/// and the disk commits them together, while the network never has more requests in flight.
///
/// A host with its own `concurrency` (`hosts:`) is held to it as well: a permit for it is
/// granted only while fewer than that many of its permits are out. Waiters are served in turn,
/// but one whose host is at its limit does not hold up those behind it.
final class TransferSlots: Sendable {
    /// One permit; giving it back twice gives it back once.
    final class Slot: Sendable {
        private let slots: TransferSlots
        /// The limited host it counts against; nil: none.
        let host: String?
        private let held = Mutex(true)

        fileprivate init(_ slots: TransferSlots, host: String?) {
            self.slots = slots
            self.host = host
        }

        func release() {
            let wasHeld = held.withLock { held in
                defer { held = false }
                return held
            }
            if wasHeld { slots.giveBack(host: host) }
        }

        deinit { release() }
    }

    private struct State {
        var free: Int
        /// Permits out per limited host.
        var inUse: [String: Int] = [:]
        /// Each waiter is told `true` with a permit, or `false` when it is withdrawn.
        var waiting: [(id: UInt64, host: String?, answer: @Sendable (Bool) -> Void)] = []
        var nextID: UInt64 = 0
        let hostLimits: [String: Int]

        func mayGrant(host: String?) -> Bool {
            guard free > 0 else { return false }
            guard let host, let limit = hostLimits[host] else { return true }
            return inUse[host, default: 0] < limit
        }

        mutating func take(host: String?) {
            free -= 1
            if let host, hostLimits[host] != nil { inUse[host, default: 0] += 1 }
        }
    }

    private let state: Mutex<State>

    /// `count` permits in all; `hostLimits` caps the permits out at once for each named host.
    init(_ count: Int, hostLimits: [String: Int] = [:]) {
        state = Mutex(State(free: max(1, count), hostLimits: hostLimits))
    }

    /// Waits, in turn, for a permit. Nil when the task is cancelled first.
    func acquire() async -> Slot? {
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        let granted = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let answer = state.withLock { state -> Bool? in
                    // Checked under the lock the cancellation handler takes too: a task
                    // cancelled before it queued is answered here, one cancelled after is
                    // found in the queue by the handler.
                    if Task.isCancelled { return false }
                    if state.mayGrant(host: nil) {
                        state.take(host: nil)
                        return true
                    }
                    state.waiting.append((id, nil, { continuation.resume(returning: $0) }))
                    return nil
                }
                if let answer { continuation.resume(returning: answer) }
            }
        } onCancel: {
            withdraw(id)
        }
        return granted ? Slot(self, host: nil) : nil
    }

    /// Without waiting: a permit (counted against `host` when it has a limit) now, or
    /// `granted` is called with one later, in turn (on the thread that gives one back), and the
    /// id to `withdraw` the request is returned.
    func acquire(host: String? = nil, orWhenFree granted: @escaping @Sendable (Slot) -> Void) -> (Slot?, UInt64) {
        state.withLock { state -> (Slot?, UInt64) in
            let id = state.nextID
            state.nextID += 1
            // Every waiter is held back (no permit, or its host at its limit): taking a permit
            // that is free for this host passes no one.
            if state.mayGrant(host: host) {
                state.take(host: host)
                return (Slot(self, host: host), id)
            }
            state.waiting.append((id, host, { [self] held in if held { granted(Slot(self, host: host)) } }))
            return (nil, id)
        }
    }

    /// A permit now, only if one is free for `host` and no one waits for it: what a segmented
    /// download asks for to add a connection, never ahead of an entry that waits its turn.
    func acquireIfIdle(host: String? = nil) -> Slot? {
        state.withLock { state -> Slot? in
            guard state.waiting.isEmpty, state.mayGrant(host: host) else { return nil }
            state.take(host: host)
            return Slot(self, host: host)
        }
    }

    /// Takes a waiting request out of the queue, answering it no; false when it was no longer
    /// there (granted meanwhile).
    @discardableResult
    func withdraw(_ id: UInt64) -> Bool {
        let waiter = state.withLock { state -> (@Sendable (Bool) -> Void)? in
            guard let index = state.waiting.firstIndex(where: { $0.id == id }) else { return nil }
            return state.waiting.remove(at: index).answer
        }
        waiter?(false)
        return waiter != nil
    }

    /// Returns a permit and grants what it frees to the first waiters that may have it: a
    /// permit of a limited host may let one of its waiters in while the run has others free.
    private func giveBack(host: String?) {
        let granted = state.withLock { state -> [@Sendable (Bool) -> Void] in
            state.free += 1
            if let host, state.hostLimits[host] != nil { state.inUse[host, default: 0] -= 1 }
            var granted: [@Sendable (Bool) -> Void] = []
            while let index = state.waiting.firstIndex(where: { state.mayGrant(host: $0.host) }) {
                let waiter = state.waiting.remove(at: index)
                state.take(host: waiter.host)
                granted.append(waiter.answer)
            }
            return granted
        }
        for answer in granted { answer(true) }
    }
}
