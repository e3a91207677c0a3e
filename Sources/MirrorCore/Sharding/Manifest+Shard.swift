extension Manifest {
    /// The same manifest with only the entries of `selection`, in manifest order, and the
    /// totals of every shard (taken before the others are dropped).
    public func selecting(_ selection: ShardSelection, by balance: ShardBalance) -> (manifest: Manifest, totals: [ShardTotals]) {
        let assignment = ShardAssignment(entries: entries, count: selection.count, balance: balance)
        let totals = ShardTotals.of(entries, assignment)
        var sharded = self
        sharded.entries = assignment.indices(in: selection.index).map { entries[$0] }
        sharded.shard = selection
        sharded.shardBalance = balance
        sharded.shardTotals = totals
        return (sharded, totals)
    }
}
