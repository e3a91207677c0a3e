/// How entries are spread over shards (`--shard-by`).
public enum ShardBalance: String, Sendable, CaseIterable {
    /// By the hash of each entry's dest (`ShardHash`): shards hold about as many entries each,
    /// and adding or removing entries never moves another one.
    case hash
    /// By pinned sizes (`size:`, written by `mirror lock`), so that shards hold about as many
    /// bytes each (`ShardAssignment.balancedByBytes`). Adding or removing entries may move
    /// others: every shard must read the same manifest.
    case bytes
}
