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
}
