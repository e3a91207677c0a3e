/// How many entries, and how many bytes by their pinned sizes, one shard holds.
public struct ShardTotals: Sendable, Equatable {
    public var shard: Int
    public var entries = 0
    /// The sum of the pinned sizes (`size:`) of its entries.
    public var pinnedBytes: Int64 = 0
    /// Entries without a pinned size, whose bytes are not in `pinnedBytes`.
    public var unsized = 0

    public init(shard: Int) {
        self.shard = shard
    }

    /// The totals of every shard, in shard order.
    public static func of(_ entries: [Entry], _ assignment: ShardAssignment) -> [ShardTotals] {
        var totals = (0..<assignment.count).map(ShardTotals.init(shard:))
        for (index, entry) in entries.enumerated() {
            totals[assignment.shard(ofEntryAt: index)].add(entry.size)
        }
        return totals
    }

    /// Counts an entry of pinned size `size` (nil: none).
    mutating func add(_ size: Int64?) {
        entries += 1
        if let size {
            pinnedBytes = pinnedBytes.saturatingAdding(size)
        } else {
            unsized += 1
        }
    }

    /// Takes back what `add(size)` counted, for an entry found later to repeat another.
    mutating func remove(_ size: Int64?) {
        entries -= 1
        if let size {
            pinnedBytes = pinnedBytes.saturatingSubtracting(size)
        } else {
            unsized -= 1
        }
    }
}
