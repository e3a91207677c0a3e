import Dispatch
import Glibc
import Synchronization

/// The entries `mirror verify`'s workers take, a batch at a time, in manifest order: from the
/// manifest's list, or from a `ManifestEntryStream` decoded on a thread of its own as the
/// workers go, never more than `queued` batches ahead of them nor `window` batches ahead of
/// the results delivered. A batch is taken with one atomic step or one semaphore, not one an
/// entry.
final class VerifyFeed: @unchecked Sendable {
    struct Batch {
        /// Batches count from 0 in manifest order.
        var number: Int
        /// The index of its first entry in the manifest (after repeats).
        var first: Int
        var entries: ArraySlice<Entry>
    }

    enum Taken {
        case batch(Batch)
        /// Every batch was taken.
        case finished
    }

    private enum Source {
        case list([Entry], batchSize: Int)
        case stream(Queue)
    }

    private let source: Source
    /// With a list: the number of the next batch.
    private let next = Atomic<Int>(0)
    /// How many entries the feed hands out in all.
    let count: Int

    /// The manifest's own entries, in batches of `batchSize`.
    init(entries: [Entry], batchSize: Int) {
        source = .list(entries, batchSize: max(batchSize, 1))
        count = entries.count
    }

    /// The entries of `stream`, decoded on a thread started here, in batches of `batchSize`;
    /// batch N waits until the results of batch N - `window` have gone out (`order`).
    init(stream: ManifestEntryStream, batchSize: Int, queued: Int, window: Int, order: VerifyResultOrder) {
        let queue = Queue(queued: queued)
        source = .stream(queue)
        count = stream.count
        DetachedThread.start {
            var batch: [Entry] = []
            batch.reserveCapacity(batchSize)
            var number = 0
            var first = 0
            func send() {
                // Held back while the results lag: a slow entry (a large file to hash) must
                // not let the batches after it pile up.
                order.waitUntilDelivered(number - window + 1)
                queue.put(Batch(number: number, first: first, entries: batch[...]))
                number += 1
                first += batch.count
                batch = []
                batch.reserveCapacity(batchSize)
            }
            let failure: ManifestError?
            do throws(ManifestError) {
                try stream.forEach { entry in
                    batch.append(entry)
                    if batch.count == batchSize { send() }
                }
                if !batch.isEmpty { send() }
                failure = nil
            } catch {
                failure = error
            }
            queue.finish(failure)
        }
    }

    /// The next batch, waiting for one while the stream is being read.
    func take() -> Taken {
        switch source {
        case .list(let entries, let batchSize):
            let number = next.wrappingAdd(1, ordering: .relaxed).oldValue
            let first = number * batchSize
            guard first < entries.count else { return .finished }
            return .batch(Batch(number: number, first: first, entries: entries[first..<min(first + batchSize, entries.count)]))
        case .stream(let queue):
            return queue.take()
        }
    }

    /// Why the stream stopped before its end, once every batch was taken.
    var failure: ManifestError? {
        guard case .stream(let queue) = source else { return nil }
        return queue.failure
    }

    /// Batches from the decoding thread to the workers: `slots` bounds those waiting, `ready`
    /// counts them (and, at the end, lets every waiting worker see the end).
    private final class Queue: @unchecked Sendable {
        private struct State {
            var batches: [Batch] = []
            var head = 0
            var finished = false
            var failure: ManifestError?
        }

        private let state = Mutex(State())
        private let slots: DispatchSemaphore
        private let ready = DispatchSemaphore(value: 0)

        init(queued: Int) {
            slots = DispatchSemaphore(value: max(queued, 1))
        }

        func put(_ batch: Batch) {
            slots.wait()
            state.withLock { $0.batches.append(batch) }
            ready.signal()
        }

        func finish(_ failure: ManifestError?) {
            state.withLock {
                $0.finished = true
                $0.failure = failure
            }
            ready.signal()
        }

        var failure: ManifestError? { state.withLock { $0.failure } }

        func take() -> Taken {
            ready.wait()
            let taken: Batch? = state.withLock { state in
                guard state.head < state.batches.count else { return nil }
                let batch = state.batches[state.head]
                state.head += 1
                if state.head >= 64, state.head * 2 >= state.batches.count {
                    state.batches.removeFirst(state.head)
                    state.head = 0
                }
                return batch
            }
            guard let taken else {
                // The end: seen by this worker; passed on to the next.
                ready.signal()
                return .finished
            }
            slots.signal()
            return .batch(taken)
        }
    }
}

/// Results of batches finished in any order, handed on in manifest order: a batch's are held
/// until every batch before it is out. `deliver` runs under the lock, one batch at a time.
final class VerifyResultOrder: @unchecked Sendable {
    private struct State {
        var next = 0
        var held: [Int: [VerifiedEntry]] = [:]
    }

    private let state = Mutex(State())
    private let deliveredCount = Atomic<Int>(0)
    private let deliver: @Sendable ([VerifiedEntry]) -> Void
    /// Whether `waitUntilDelivered` waits for `advanced`.
    private let waiting = Atomic<Bool>(false)
    private let advanced = DispatchSemaphore(value: 0)

    init(deliver: @escaping @Sendable ([VerifiedEntry]) -> Void) {
        self.deliver = deliver
    }

    /// Batches whose results have been handed on.
    var delivered: Int { deliveredCount.load(ordering: .sequentiallyConsistent) }

    /// Returns once the results of `count` batches have been handed on. One thread waits at a
    /// time (the stream's); a signal left from an earlier wait only makes it look again.
    func waitUntilDelivered(_ count: Int) {
        while delivered < count {
            waiting.store(true, ordering: .sequentiallyConsistent)
            // Looked at again after saying so: a delivery in between either is seen here or
            // sees the flag and signals.
            if delivered >= count { break }
            advanced.wait()
        }
        waiting.store(false, ordering: .sequentiallyConsistent)
    }

    func finished(batch number: Int, _ results: [VerifiedEntry]) {
        state.withLock { state in
            state.held[number] = results
            while let results = state.held.removeValue(forKey: state.next) {
                deliver(results)
                state.next += 1
            }
            deliveredCount.store(state.next, ordering: .sequentiallyConsistent)
        }
        if waiting.exchange(false, ordering: .sequentiallyConsistent) { advanced.signal() }
    }
}
