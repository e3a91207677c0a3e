import Dispatch
import Synchronization

/// Decodes a `files` list's entries (`EntryListDecoder.add`) on a thread of its own, in the
/// order they were read, while the thread that reads the manifest goes on with the next
/// entries' events. Reading an entry's events into its node and decoding that node take about
/// as long as each other (12,500 and 13,500 instructions an entry), and before the first
/// request nothing else runs: on two cores the list is decoded in a little over half the time.
///
/// The reading thread hands nodes over in batches (`add`), at most `maxQueued` batches queued
/// besides the one being decoded;
/// `finish` waits until every node handed over is decoded and gives the list back. Nothing
/// else touches the list meanwhile.
final class EntryDecodePipeline: @unchecked Sendable {
    private enum Item {
        case nodes([YAMLNode])
        case reserve(Int)
        case end
    }

    /// Nodes per batch handed over.
    static let batch = 256
    /// Batches handed over and not yet decoded, at most: what the reader may run ahead.
    static let maxQueued = 8

    private var list: EntryListDecoder
    private let queue = Mutex<[Item]>([])
    private let itemsReady = DispatchSemaphore(value: 0)
    private let roomFree = DispatchSemaphore(value: EntryDecodePipeline.maxQueued)
    private var pending: [YAMLNode] = []
    private var worker: JoinableThread?

    /// Whether a list read with `purpose` is decoded on another thread: every list whose
    /// entries are decoded here, kept or not (a shard's, the readings that keep none: a streamed
    /// verify's first, the second for meeting fingerprints), but not a stream's entries: they go
    /// to a body that runs on the reading thread. The whole list is checked before the first
    /// request, so its decoding is all of a run's start: with the list kept whole on two
    /// threads too, a sync of 20,000 entries sent its first request after 49 ms instead of 70
    /// and a plan of 100,000 after 167 ms instead of 266, at the same peak memory (46.8 MB;
    /// under glibc's allocator it had held 3.5 MB more).
    static func applies(to purpose: EntryListDecoder.Purpose) -> Bool {
        switch purpose {
        case .entries, .nothing, .claims: return true
        case .stream: return false
        }
    }

    /// Counts the pipelines started in a task that binds it (for tests).
    final class Starts: Sendable {
        let count = Atomic<Int>(0)
    }

    @TaskLocal static var starts: Starts?

    init(list: EntryListDecoder) {
        Self.starts?.count.add(1, ordering: .relaxed)
        self.list = list
        pending.reserveCapacity(Self.batch)
        worker = JoinableThread { [self] in decode() }
    }

    /// Hands over the next entry's node.
    func add(_ node: YAMLNode) {
        pending.append(node)
        if pending.count == Self.batch { flush() }
    }

    /// Makes room in the list for `count` entries before the next ones are decoded.
    func reserveCapacity(_ count: Int) {
        flush()
        send(.reserve(count))
    }

    /// Waits until every node handed over is decoded, ends the thread and gives the list back.
    /// Once; no `add` after it.
    func finish() -> EntryListDecoder {
        flush()
        send(.end)
        worker?.join()
        worker = nil
        return list
    }

    private func flush() {
        guard !pending.isEmpty else { return }
        let nodes = pending
        pending = []
        pending.reserveCapacity(Self.batch)
        send(.nodes(nodes))
    }

    private func send(_ item: Item) {
        roomFree.wait()
        queue.withLock { $0.append(item) }
        itemsReady.signal()
    }

    private func decode() {
        while true {
            itemsReady.wait()
            let item = queue.withLock { $0.removeFirst() }
            roomFree.signal()
            switch item {
            case .nodes(let nodes):
                for node in nodes { list.add(node) }
            case .reserve(let count):
                list.reserveCapacity(count)
            case .end:
                return
            }
        }
    }
}
