/// The plan for one entry, as `mirror plan` shows it.
public struct PlannedEntry: Sendable {
    public var dest: String
    /// Printable URL (no secrets).
    public var url: String
    public var action: Action
    /// Size of `DEST`, or of `DEST.part` when only that exists.
    public var localSize: Int64?
    public var remoteSize: Int64?
    /// The manifest's printable URL when a `rewrite:` rule replaced it (`url` is then the
    /// first one the entry is fetched from); nil otherwise.
    public var manifestURL: String? = nil
}

/// How a whole sync ended: a report per entry, in manifest order, and the prune when one was
/// asked for.
public struct SyncResult: Sendable {
    public var reports: [EntryReport]
    public var prune: PruneOutcome?
}

/// How one entry of a sync ended.
public struct EntryReport: Sendable {
    public enum Outcome: Sendable, Equatable {
        /// `DEST` was written (downloaded, resumed, replaced or finished).
        case transferred
        /// `DEST` was already right.
        case skipped
        case failed(TransferFailure)
    }

    public var dest: String
    /// Printable URL (no secrets) of the source that was used last.
    public var url: String
    /// The last action taken.
    public var action: Action
    public var outcome: Outcome
    /// Body bytes received in this run.
    public var bytesTransferred: Int64
    /// Size of `DEST` when the entry ended well.
    public var size: Int64?
    /// Attempts made, over all sources.
    public var attempts: Int
    /// Digest of `DEST` in the entry's algorithm (SHA-256, or SHA-512 for an entry pinned by
    /// one): computed while downloading, or known from the state store.
    public var sha256: String?
    /// Size of the `DEST.part` a failed or interrupted entry leaves for the next run to
    /// resume; nil when it leaves none.
    public var partialSize: Int64? = nil

    public var failed: Bool {
        if case .failed = outcome { return true }
        return false
    }

    /// The run was interrupted before this entry's turn came: no request was made for it and
    /// nothing of it on disk was touched (its first attempt never began).
    public var interruptedBeforeStart: Bool {
        outcome == .failed(.cancelled) && attempts == 0
    }
}

/// What happens during a run, for output. Delivered from many tasks at once.
public enum RunEvent: Sendable {
    /// `sync` began working on an entry (its first source's URL): its first attempt has its
    /// turn. Not sent for an entry that an interruption reached first
    /// (`EntryReport.interruptedBeforeStart`).
    case started(dest: String, url: String)
    case probed(dest: String, url: String, RemoteFacts)
    case decided(dest: String, Action)
    /// Attempt `attempt` on the source `url` failed with `failure`; the next starts after `delay`.
    case retrying(dest: String, url: String, failure: TransferFailure, attempt: Int, delay: Duration)
    case fallingBack(dest: String, to: String, after: TransferFailure)
    /// The state store, or one of its records, could not be used; decisions fall back to sizes.
    case stateStoreProblem(StateStoreProblem)
    /// The blob cache could not be used for an entry (a blob that did not hash to its name,
    /// moved aside; a file that could not be put in): the entry went on without it.
    case cacheProblem(String)
    /// A file an interrupted prune left in a trash: finished by an unsharded sync, reported by
    /// the other runs.
    case pruneLeftover(PruneLeftover)
    /// A host (or the connectivity probe) stopped answering; transfers to it wait up to `wait`.
    case waitingForNetwork(host: String, wait: Duration)
    /// A server asked with Retry-After for a pause; every transfer to the host waits it out.
    case pausedByServer(host: String, pause: Duration)
    case finished(EntryReport)
}

/// Settings of one `plan` or `sync` run that do not come from the manifest.
public struct RunOptions: Sendable {
    /// Transfers in flight at once; the manifest's `concurrency` unless `-j` overrides it.
    public var concurrency: Int
    public var retryPolicy: RetryPolicy
    public var events: (@Sendable (RunEvent) -> Void)?
    public var progress: SyncProgress?
    /// How long `sync` waits for another run's lock on the root; nil: not at all.
    public var lockWait: Duration?
    /// fsync each file (and its directory) before and after the rename into place. Off trades
    /// crash safety for speed: after a power loss a renamed file may be empty or short.
    public var durable = true
    /// Tests only: runs on the blocking pool's thread before each group commit writes its group.
    var beforeGroupCommit: (@Sendable () -> Void)?
    /// Longest pause a `Retry-After` may impose.
    public var retryAfterCap: Duration = .seconds(600)
    /// Time between connectivity checks while a host is unreachable.
    public var connectivityCheckInterval: Duration = .seconds(1)
    /// The `*_proxy` variables: every request, and the connectivity check, goes through the
    /// proxy they choose. Read from the process's environment unless set.
    public var proxies = ProxyEnvironment.ofThisProcess
    /// After a sync in which every entry succeeded, delete what mirror wrote and the manifest
    /// no longer lists (`--prune`, `prune: true`); nil: delete nothing.
    public var prune: PruneSettings?
    /// `--rate-limit`: replaces the manifest's top-level `rate_limit` (an `off` one lifts it);
    /// nil: the manifest's holds.
    public var rateLimit: RateLimit?
    /// `--segment-min`: replaces every `segment_min` of the manifest (`Int64.max`: `off`);
    /// nil: the manifest's hold.
    public var segmentMin: Int64?
    /// The blob cache (`cache:`, `--cache`, `MIRROR_CACHE`): `sync` places a pinned entry's
    /// missing `DEST` from it and puts what it downloads into it; `plan` shows `cached`. Nil: none.
    public var cache: BlobCache?
    /// `--offline`: no request at all. An entry is done only from what the root holds verified
    /// or the cache holds under its pin; any other fails, saying what is missing.
    public var offline = false
    /// Connections opened to the run's first origin while the run was being made ready
    /// (`EarlyConnections.open`); its first requests there take them.
    public var earlyConnections: EarlyConnections?

    public init(
        concurrency: Int, retryPolicy: RetryPolicy = .standard,
        events: (@Sendable (RunEvent) -> Void)? = nil, progress: SyncProgress? = nil,
        lockWait: Duration? = nil
    ) {
        self.lockWait = lockWait
        self.concurrency = concurrency
        self.retryPolicy = retryPolicy
        self.events = events
        self.progress = progress
    }
}
