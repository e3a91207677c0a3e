/// What the entries of one `sync` (or `plan`) work with, built once per run
/// (`ManifestRunner.environment(…)`): the engine and its permits, the disk and the store, the
/// hosts' rules and rate limits, and the options an entry reads. `SyncRun`, `EntryDriver` and
/// `DownloadDriver` take what they need from it, not from the runner; a test can build one.
/// A class: every entry's driver holds it, and a reference is one retain where a copy of a
/// struct retained each of its 21 fields.
final class SyncEnvironment {
    /// The entries, their `root` (`Manifest.paths(for:)`) and their `hosts:` rules.
    let manifest: Manifest
    let fetcher: Fetcher
    let probe: RemoteProbe
    let rootDirectory: RootDirectory
    /// Where hashing to the end, fsync and rename run.
    let blocking: BlockingPool
    /// The run's connection and stream permits (`RequestBudget`).
    let slots: TransferSlots
    /// The run's `rate_limit`, and each host's by its `hosts:` key.
    let runBucket: RateBucket?
    let hostBuckets: [String: RateBucket]
    /// The run's state store (none: records are not kept), and the other layouts' stores it
    /// reads records from.
    let store: StateStore?
    let siblings: SiblingStores
    /// Outages and Retry-After pauses, by host.
    let conditions: HostConditions
    /// The options an entry reads.
    let concurrency: Int
    let durable: Bool
    let progress: SyncProgress?
    let proxies: ProxyEnvironment
    let retryPolicy: RetryPolicy
    let retryAfterCap: Duration
    /// `--segment-min`, over every entry's own `segment_min`.
    let segmentMin: Int64?
    /// The blob cache, if one is used.
    let cache: BlobCache?
    /// `--offline`: no request at all.
    let offline: Bool
    /// Tells the run's listeners.
    let emit: @Sendable (RunEvent) -> Void
    /// A write to the store failed (`ManifestRunner.storeWriteFailed`).
    let storeWriteFailed: @Sendable (String) -> Void
    /// The record of an entry: the run's store's, else a sibling's (`ManifestRunner.readRecord`),
    /// with what the caller is to tell of a store that could not be read. Called from the
    /// look-ahead's thread too, which tells nothing itself: the entry that takes its facts does.
    let readRecord: @Sendable (Entry, StateStore?, SiblingStores, LocalIdentity?) -> RecordLookup
    /// `RunOptions.beforeGroupCommit`.
    let beforeGroupCommit: (@Sendable () -> Void)?

    init(
        manifest: Manifest, fetcher: Fetcher, probe: RemoteProbe, rootDirectory: RootDirectory, blocking: BlockingPool,
        slots: TransferSlots, runBucket: RateBucket?, hostBuckets: [String: RateBucket], store: StateStore?,
        siblings: SiblingStores, conditions: HostConditions, concurrency: Int, durable: Bool, progress: SyncProgress?,
        proxies: ProxyEnvironment, retryPolicy: RetryPolicy, retryAfterCap: Duration, segmentMin: Int64?,
        emit: @escaping @Sendable (RunEvent) -> Void, storeWriteFailed: @escaping @Sendable (String) -> Void,
        readRecord: @escaping @Sendable (Entry, StateStore?, SiblingStores, LocalIdentity?) -> RecordLookup,
        beforeGroupCommit: (@Sendable () -> Void)? = nil, cache: BlobCache? = nil, offline: Bool = false
    ) {
        self.manifest = manifest
        self.fetcher = fetcher
        self.probe = probe
        self.rootDirectory = rootDirectory
        self.blocking = blocking
        self.slots = slots
        self.runBucket = runBucket
        self.hostBuckets = hostBuckets
        self.store = store
        self.siblings = siblings
        self.conditions = conditions
        self.concurrency = concurrency
        self.durable = durable
        self.progress = progress
        self.proxies = proxies
        self.retryPolicy = retryPolicy
        self.retryAfterCap = retryAfterCap
        self.segmentMin = segmentMin
        self.emit = emit
        self.storeWriteFailed = storeWriteFailed
        self.readRecord = readRecord
        self.beforeGroupCommit = beforeGroupCommit
        self.cache = cache
        self.offline = offline
    }
}

/// An entry's record as the stores hold it, and the problem to tell when the run's own store
/// could not be read (`unreadable`: then a record of any kind may still be in it).
struct RecordLookup: Sendable {
    let record: StateRecord?
    let unreadable: Bool
    let problem: RunEvent?
}

extension ManifestRunner {
    /// The environment of a run with `store`, `siblings` and `conditions`.
    func environment(store: StateStore?, siblings: SiblingStores, conditions: HostConditions) -> SyncEnvironment {
        SyncEnvironment(
            manifest: manifest, fetcher: fetcher, probe: probe, rootDirectory: rootDirectory, blocking: blocking, slots: slots,
            runBucket: runBucket, hostBuckets: hostBuckets, store: store, siblings: siblings, conditions: conditions,
            concurrency: options.concurrency, durable: options.durable, progress: options.progress, proxies: options.proxies,
            retryPolicy: options.retryPolicy, retryAfterCap: options.retryAfterCap, segmentMin: options.segmentMin,
            // Weakly: the runner keeps its last run (`lastRun`), which holds these.
            emit: { [weak self] in self?.emit($0) }, storeWriteFailed: { [weak self] in self?.storeWriteFailed($0) },
            readRecord: { [weak self] in self?.readRecord(of: $0, in: $1, siblings: $2, onDisk: $3) ?? RecordLookup(record: nil, unreadable: true, problem: nil) },
            beforeGroupCommit: options.beforeGroupCommit, cache: options.cache, offline: options.offline)
    }
}
