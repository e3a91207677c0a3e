/// Which shard each entry of a manifest belongs to: the one owner of that decision for
/// `plan`, `sync`, `verify` and `lock`.
public struct ShardAssignment: Sendable {
    public let count: Int
    public let balance: ShardBalance
    /// The shard of each entry, in manifest order.
    private let shards: [UInt32]

    public init(entries: [Entry], count: Int, balance: ShardBalance) {
        self.count = count
        self.balance = balance
        switch balance {
        case .hash:
            shards = entries.map { UInt32(ShardHash.shard(ofDest: $0.dest, count: count)) }
        case .bytes:
            shards = Self.balancedByBytes(entries.map { ($0.dest, $0.size) }, count: count).map { UInt32($0) }
        }
    }

    /// The shard of the entry at `index` in the manifest.
    public func shard(ofEntryAt index: Int) -> Int {
        Int(shards[index])
    }

    /// The indices of the entries in `shard`, in manifest order.
    public func indices(in shard: Int) -> [Int] {
        shards.indices.filter { shards[$0] == shard }
    }

    /// `--shard-by bytes`: entries with a pinned size, largest first (equal sizes by their
    /// dest's UTF-8 bytes), each go to the shard holding the fewest bytes so far, the lowest
    /// index among equals. Entries without a size are placed by `ShardHash`, as with
    /// `--shard-by hash`, and add nothing to their shard's bytes. The result depends on every
    /// entry: all shards must read the same manifest.
    ///
    /// - Returns: the shard of each entry, in the order given.
    public static func balancedByBytes(_ entries: [(dest: String, size: Int64?)], count: Int) -> [Int] {
        precondition(count >= 1, "a shard count is at least 1")
        var result = [Int](repeating: 0, count: entries.count)
        var sized: [(index: Int, size: Int64)] = []
        for (index, entry) in entries.enumerated() {
            if let size = entry.size {
                sized.append((index, size))
            } else {
                result[index] = ShardHash.shard(ofDest: entry.dest, count: count)
            }
        }
        sized.sort { left, right in
            if left.size != right.size { return left.size > right.size }
            return entries[left.index].dest.utf8.lexicographicallyPrecedes(entries[right.index].dest.utf8)
        }
        var loads = ShardLoads(count: count)
        for item in sized {
            result[item.index] = loads.addToLightest(item.size)
        }
        return result
    }
}

/// The bytes given to each shard so far, as a min-heap of (bytes, shard): the lightest
/// shard, the lowest index among equals, in O(log N).
struct ShardLoads {
    private var heap: [(bytes: Int64, shard: Int)]

    init(count: Int) {
        // Every load is 0: in index order this is already a heap.
        heap = (0..<count).map { (0, $0) }
    }

    /// Adds `size` to the lightest shard and returns that shard.
    mutating func addToLightest(_ size: Int64) -> Int {
        let shard = heap[0].shard
        heap[0].bytes = heap[0].bytes.saturatingAdding(size)
        siftDown(0)
        return shard
    }

    private func lighter(_ a: Int, _ b: Int) -> Bool {
        heap[a].bytes != heap[b].bytes ? heap[a].bytes < heap[b].bytes : heap[a].shard < heap[b].shard
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var lightest = parent
            if left < heap.count, lighter(left, lightest) { lightest = left }
            if right < heap.count, lighter(right, lightest) { lightest = right }
            if lightest == parent { return }
            heap.swapAt(parent, lightest)
            parent = lightest
        }
    }
}
