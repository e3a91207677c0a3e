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

    /// Whether a list read with `purpose` is decoded on another thread: where reading is most of
    /// the run and few of the entries are kept, a shard's list (every shard decodes every
    /// entry) and the readings that keep none (a streamed verify's first, the second for
    /// meeting fingerprints). Not a list kept whole: there the requests that follow bound the
    /// run, and the two threads' heaps held 3.5 MB more for 100,000 entries (a plan 48.6 → 52.1
    /// MB at an unchanged 3.36 s, on glibc's allocator). Not a stream's entries either: they go
    /// to a body that runs on the reading thread.
    static func applies(to purpose: EntryListDecoder.Purpose) -> Bool {
        switch purpose {
        case .entries(let shard): return shard != nil
        case .nothing, .claims: return true
        case .stream: return false
        }
    }

    init(list: EntryListDecoder) {
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
