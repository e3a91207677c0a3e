import Synchronization

/// The `concurrency` limit of `sync`: permits for the network part of an attempt (probe and
/// transfer). Entries hold one from before they ask the connectivity gate and the Retry-After
/// pauses until their request is done, and give it back before their file is hashed to the
/// end, fsync'd and renamed: more entries than `concurrency` can then be on the disk at once,
/// and the disk commits them together, while the network never has more requests in flight.
final class TransferSlots: Sendable {
    /// One permit; giving it back twice gives it back once.
    final class Slot: Sendable {
        private let slots: TransferSlots
        private let held = Mutex(true)

        fileprivate init(_ slots: TransferSlots) { self.slots = slots }

        func release() {
            let wasHeld = held.withLock { held in
                defer { held = false }
                return held
            }
            if wasHeld { slots.giveBack() }
        }

        deinit { release() }
    }

    private struct State {
        var free: Int
        /// Each waiter is told `true` with a permit, or `false` when it is withdrawn.
        var waiting: [(id: UInt64, answer: @Sendable (Bool) -> Void)] = []
        var nextID: UInt64 = 0
    }

    private let state: Mutex<State>

    init(_ count: Int) {
        state = Mutex(State(free: max(1, count)))
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
                    if state.free > 0 {
                        state.free -= 1
                        return true
                    }
                    state.waiting.append((id, { continuation.resume(returning: $0) }))
                    return nil
                }
                if let answer { continuation.resume(returning: answer) }
            }
        } onCancel: {
            withdraw(id)
        }
        return granted ? Slot(self) : nil
    }

    /// Without waiting: a permit now, or `granted` is called with one later, in turn (on the
    /// thread that gives one back), and the id to `withdraw` the request is returned.
    func acquire(orWhenFree granted: @escaping @Sendable (Slot) -> Void) -> (Slot?, UInt64) {
        state.withLock { state -> (Slot?, UInt64) in
            let id = state.nextID
            state.nextID += 1
            if state.free > 0 {
                state.free -= 1
                return (Slot(self), id)
            }
            state.waiting.append((id, { [self] held in if held { granted(Slot(self)) } }))
            return (nil, id)
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

    private func giveBack() {
        let next = state.withLock { state -> (@Sendable (Bool) -> Void)? in
            if state.waiting.isEmpty {
                state.free += 1
                return nil
            }
            return state.waiting.removeFirst().answer
        }
        next?(true)
    }
}
