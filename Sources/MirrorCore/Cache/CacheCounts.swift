/// What the blob cache did for a `sync`, from its entries' reports: for metrics and the summary.
public struct CacheCounts: Sendable, Equatable {
    /// Entries placed from the cache, with no request.
    public var hits = 0
    /// Their bytes: what the network did not carry.
    public var bytesPlaced: Int64 = 0
    /// Files downloaded and hashed by SHA-256, which went into the cache.
    public var misses = 0
    /// Blobs evicted after the run (`cache_max_size`, `cache_max_age`); set by the caller.
    public var evicted = 0

    public init(_ reports: [EntryReport]) {
        for report in reports where report.outcome == .transferred {
            if report.action == .cached {
                hits += 1
                bytesPlaced = bytesPlaced.saturatingAdding(report.size ?? 0)
            } else if let digest = report.sha256, DigestAlgorithm(hexDigest: digest) == .sha256 {
                misses += 1
            }
        }
    }
}
