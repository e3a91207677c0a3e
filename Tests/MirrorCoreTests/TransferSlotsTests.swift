import Synchronization
import Testing
@testable import MirrorCore

struct TransferSlotsTests {
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
}
