import Glibc
import Synchronization

/// Carries out `plan` and `sync` for a manifest: probes, decides and transfers each entry,
/// with at most `concurrency` connections and large transfers at once (and light requests
/// beyond that as streams of HTTP/2 connections), over one shared transfer engine.
///
/// Never prints: everything a user sees comes from the returned reports and `RunEvent`s.
public final class ManifestRunner: Sendable {
    public let manifest: Manifest
    let options: RunOptions
    let fetcher: Fetcher
    let probe: RemoteProbe
    /// Every destination is reached through it, without following a symbolic link.
    let rootDirectory: RootDirectory
    /// Where the run lock and the state stores are: `ROOT/.mirror`, or `state_dir`.
    let stateDirectory: StateDirectory
    /// Where finished files are hashed to the end, fsync'd and renamed.
    let blocking: BlockingPool
    /// `concurrency` connection permits for the requests of `sync` and `plan`, and stream
    /// permits on HTTP/2 connections (`RequestBudget`).
    let slots: TransferSlots
    /// Entries `sync` works on at once, besides the `RequestBudget.streamBudget` more that
    /// `SyncRun` adds for HTTP/2 streams. `concurrency` of them hold a connection permit; the
    /// others wait for one, or are being hashed to the end, fsync'd and renamed, so that the
    /// disk commits many files together and the network does not wait for the disk.
    let entryWidth: Int
    static let entriesPerTransfer = 4
    /// The run's `rate_limit` (or `--rate-limit`): every transfer of the run takes from it.
    let runBucket: RateBucket?
    /// Each host's `rate_limit`, by its `hosts:` key.
    let hostBuckets: [String: RateBucket]
    /// Whether a failed write to the store was said at the default verbosity already.
    private let reportedStoreWriteFailure = Atomic<Bool>(false)
    /// What the last run made (its entries' machines and results, its closed store), freed
    /// with the runner rather than as the run returns: a caller that exits once it has the
    /// reports (the command line) does not spend the end of its run freeing them, about 5 ms
    /// for 2,000 entries. Nothing in it refers back to the runner.
    private let lastRun = Mutex<[AnyObject]>([])
    /// The lock and stores taken before the runner was made (`open(manifest:options:)`), until
    /// `syncAndPrune` takes them.
    private let opened: Mutex<Opened?>

    /// `opened`: the lock and the stores `open(manifest:options:)` took for this manifest and
    /// these options, which `syncAndPrune` then runs under instead of taking its own.
    public init(manifest: Manifest, options: RunOptions, opened: Opened? = nil) {
        self.manifest = manifest
        self.options = options
        self.opened = Mutex(opened)
        let slots = TransferSlots(options.concurrency, hostLimits: manifest.hosts.concurrencyLimits)
        self.slots = slots
        let fetcher = Fetcher(
            engine: TransferEngine(maxHostConnections: options.concurrency, early: options.earlyConnections), proxies: options.proxies,
            onOriginProtocol: { origin, heard in slots.learn(origin, speaks: heard) },
            waitsForConnection: { origin in slots.waitsForConnection(to: origin) }, rewrites: manifest.rewrites)
        self.fetcher = fetcher
        probe = RemoteProbe(fetcher: fetcher)
        entryWidth = options.concurrency * Self.entriesPerTransfer
        blocking = BlockingPool(limit: entryWidth)
        runBucket = (options.rateLimit ?? manifest.rateLimit).map { RateBucket(limit: $0) }
        hostBuckets = Dictionary(uniqueKeysWithValues: manifest.hosts.rules.compactMap { rule in
            rule.rateLimit.map { (rule.key, RateBucket(limit: $0)) }
        })
        let (rootDirectory, stateDirectory) = opened.map { ($0.rootDirectory, $0.stateDirectory) } ?? Self.directories(of: manifest)
        self.rootDirectory = rootDirectory
        self.stateDirectory = stateDirectory
    }

    private static func directories(of manifest: Manifest) -> (RootDirectory, StateDirectory) {
        let rootDirectory = RootDirectory(path: manifest.root)
        return (rootDirectory, StateDirectory(root: rootDirectory, separate: manifest.stateDirectory))
    }

    /// What a `sync` holds from before its first entry to its end: the run lock, its state store
    /// and the other shards' stores.
    public final class Opened: Sendable {
        let rootDirectory: RootDirectory
        let stateDirectory: StateDirectory
        let lock: RunLock
        let store: StateStore?
        let siblings: SiblingStores

        fileprivate init(rootDirectory: RootDirectory, stateDirectory: StateDirectory, lock: RunLock, store: StateStore?, siblings: SiblingStores) {
            self.rootDirectory = rootDirectory
            self.stateDirectory = stateDirectory
            self.lock = lock
            self.store = store
            self.siblings = siblings
        }
    }

    /// Takes the run lock of `manifest`'s root at once and opens its state stores, for a `sync`
    /// with `options` made later (`init(manifest:options:opened:)`). The command line does this
    /// while libcurl is still loading, so that SQLite's set-up and the store's opening are not on
    /// the way to the first request.
    ///
    /// Nil, and nothing made, when the state directory does not exist yet: a first run makes its
    /// root only once libcurl is known to load (a command that cannot make requests writes
    /// nothing in a new root; in one a run made before, the lock file takes this process's id and
    /// the store may be set up before the load is known to fail). Nil too when the lock cannot be had at once: `syncAndPrune` then takes it
    /// itself, waiting for a run that holds it as `lockWait` says, where a signal can stop the
    /// wait, and says why it failed.
    public static func open(manifest: Manifest, options: RunOptions) async -> Opened? {
        let (rootDirectory, stateDirectory) = directories(of: manifest)
        guard stateDirectory.exists else { return nil }
        guard let lock = try? await RunLock.acquire(in: stateDirectory, shard: manifest.shard, balance: manifest.shardBalance, wait: nil) else { return nil }
        return opened(manifest: manifest, events: options.events, rootDirectory: rootDirectory, stateDirectory: stateDirectory, lock: lock)
    }

    /// Opens the stores of a sync that holds `lock`; an unsharded run first finishes what an
    /// interrupted prune left, which every shard's lock would have excluded.
    private static func opened(
        manifest: Manifest, events: (@Sendable (RunEvent) -> Void)?, rootDirectory: RootDirectory, stateDirectory: StateDirectory, lock: RunLock
    ) -> Opened {
        let emit = { (event: RunEvent) -> Void in events?(event) }
        let opening = StateStore.open(in: stateDirectory, mode: .readWrite, shard: manifest.shard)
        if let problem = opening.problem { emit(.stateStoreProblem(problem)) }
        let store = opening.store
        store?.expect(entries: manifest.entries.count)
        let siblings = openSiblings(of: manifest, in: stateDirectory, emit: emit)
        return Opened(rootDirectory: rootDirectory, stateDirectory: stateDirectory, lock: lock, store: store, siblings: siblings)
    }

    /// Decides every entry without changing anything on disk: no files, no directories, not
    /// even the state store (read if present, never written).
    public func plan() async -> PlannedEntries {
        let opening = StateStore.open(in: stateDirectory, mode: .readOnly, shard: manifest.shard)
        if let problem = opening.problem { emit(.stateStoreProblem(problem)) }
        let store = opening.store
        store?.expect(entries: manifest.entries.count)
        let siblings = openSiblings()
        reportPendingLeftovers(in: [store].compactMap { $0 } + siblings.stores)
        // A plan waits for no host: its conditions are never consulted.
        let conditions = HostConditions(gate: ConnectivityGate(wait: .zero), pauses: HostPauses(), probe: nil, proxies: options.proxies)
        let results = await run(.plan, store: store, siblings: siblings, conditions: conditions, width: options.concurrency)
        siblings.close()
        // Closed here: the run, which holds it, is kept until the runner goes (`lastRun`).
        store?.close()
        return PlannedEntries(entries: manifest.entries, results: results)
    }

    /// What `sync` would delete with `--prune`, reading the state store and the disk and
    /// changing nothing. Nil when the options ask for no prune.
    public func prunePlan() -> PruneOutcome? {
        guard let prune = options.prune else { return nil }
        if let refusal = shardPruneRefusal { return PruneOutcome(plan: PrunePlan(), refusal: refusal) }
        let opening = StateStore.open(in: stateDirectory, mode: .readOnly, shard: manifest.shard)
        if let problem = opening.problem {
            return PruneOutcome(plan: PrunePlan(), refusal: "the state store cannot be read (\(problem)), so nothing is known to be mirror's; nothing would be deleted")
        }
        let shardStores = SiblingStores.open(in: stateDirectory, besides: nil)
        defer {
            opening.store?.close()
            shardStores.close()
        }
        if let problem = shardStores.problems.first {
            return PruneOutcome(plan: PrunePlan(), refusal: "a shard's state store cannot be read (\(problem)), so not everything mirror wrote is known; nothing would be deleted")
        }
        // No store at all: mirror has written nothing here that it knows of. Only shards'
        // stores: the sync would make its own, empty, and read theirs.
        var stores = shardStores.stores
        guard let store = opening.store ?? (stores.isEmpty ? nil : stores.removeFirst()) else { return PruneOutcome(plan: PrunePlan()) }
        do {
            let pruner = Pruner(rootDirectory: rootDirectory, store: store, shardStores: stores)
            let plan = try pruner.plan(manifestDests: manifest.entries.map(\.dest), maxDelete: prune.maxDelete)
            return PruneOutcome(plan: plan, refusal: plan.refusal)
        } catch {
            return PruneOutcome(plan: PrunePlan(), refusal: "reading \(store.path): \(error); nothing would be deleted")
        }
    }

    /// Plans and carries out every entry; a failed entry does not stop the others.
    /// Reports come back in manifest order. Holds the run lock on the root throughout; throws
    /// only when that lock cannot be had.
    public func sync() async throws(RunLockError) -> [EntryReport] {
        try await syncAndPrune().reports
    }

    /// `sync`, then, when the options ask for it and every entry succeeded, the prune: files
    /// first, deletions last, all under the same run lock.
    public func syncAndPrune() async throws(RunLockError) -> SyncResult {
        let opened: Opened
        if let early = self.opened.withLock({ $0.take() }) {
            opened = early
        } else {
            let lock = try await RunLock.acquire(in: stateDirectory, shard: manifest.shard, balance: manifest.shardBalance, wait: options.lockWait)
            opened = Self.opened(
                manifest: manifest, events: options.events, rootDirectory: rootDirectory, stateDirectory: stateDirectory, lock: lock)
        }
        let store = opened.store
        let siblings = opened.siblings
        if manifest.shard == nil, let store {
            // Every shard is excluded by this run's lock: what an interrupted prune left is
            // finished before any entry may want its name.
            for leftover in PruneTrash.finishLeftovers(in: rootDirectory, store: store) { emit(.pruneLeftover(leftover)) }
        } else {
            reportPendingLeftovers(in: siblings.stores)
        }
        let conditions = HostConditions(
            gate: ConnectivityGate(
                wait: manifest.connectivity.wait,
                interval: options.connectivityCheckInterval,
                onOutage: { [weak self] target, wait in self?.emit(.waitingForNetwork(host: target.description, wait: wait)) }
            ),
            pauses: HostPauses(),
            probe: manifest.connectivity.probe,
            proxies: options.proxies
        )
        options.progress?.expect(manifest.entries.map { ($0.dest, $0.size) })
        var results = await run(.sync, store: store, siblings: siblings, conditions: conditions, width: entryWidth)
        let reports = Self.unwrap(&results) { result in
            guard case .synced(let report) = result else { preconditionFailure("a sync ended in a plan") }
            return report
        }
        siblings.close()
        let prune = options.prune.map { settings in self.prune(settings, after: reports, store: store) }
        store?.close()
        if let store { lastRun.withLock { $0.append(store) } }
        withExtendedLifetime(opened.lock) {}
        return SyncResult(reports: reports, prune: prune)
    }

    /// Download first, delete last: only a run in which every entry succeeded prunes.
    private func prune(_ settings: PruneSettings, after reports: [EntryReport], store: StateStore?) -> PruneOutcome {
        if let refusal = shardPruneRefusal { return PruneOutcome(plan: PrunePlan(), refusal: refusal) }
        let failed = reports.count(where: \.failed)
        if failed > 0 || Task.isCancelled {
            let why = failed > 0 ? "\(failed) of \(reports.count) entries failed" : "the run was interrupted"
            return PruneOutcome(plan: PrunePlan(), refusal: "\(why); nothing was deleted (mirror prunes only after every entry succeeded)")
        }
        guard let store else {
            return PruneOutcome(plan: PrunePlan(), refusal: "the state store could not be opened, so nothing is known to be mirror's; nothing was deleted")
        }
        // Every shard is excluded by this run's lock: their stores are written by this run only.
        let shardStores = SiblingStores.names(in: stateDirectory, besides: nil).map { StateStore.open(in: stateDirectory, mode: .readWrite, name: $0) }
        defer { for opening in shardStores { opening.store?.close() } }
        if let problem = shardStores.compactMap(\.problem).first {
            return PruneOutcome(plan: PrunePlan(), refusal: "a shard's state store cannot be used (\(problem)), so not everything mirror wrote is known; nothing was deleted")
        }
        let pruner = Pruner(rootDirectory: rootDirectory, store: store, shardStores: shardStores.compactMap(\.store))
        do {
            return pruner.carryOut(try pruner.plan(manifestDests: manifest.entries.map(\.dest), maxDelete: settings.maxDelete))
        } catch {
            return PruneOutcome(plan: PrunePlan(), refusal: "reading \(store.path): \(error); nothing was deleted")
        }
    }

    /// A shard does not prune: files the manifest no longer lists belong to no shard, and
    /// another shard's files are not its to judge. An unsharded `sync --prune` does it.
    private var shardPruneRefusal: String? {
        manifest.shard.map { "a shard (--shard \($0)) does not prune; run an unsharded sync --prune once every shard has finished; nothing was deleted" }
    }

    /// The stores of the root's other run layouts, read-only (see `SiblingStores`).
    private func openSiblings() -> SiblingStores {
        Self.openSiblings(of: manifest, in: stateDirectory, emit: emit)
    }

    private static func openSiblings(of manifest: Manifest, in stateDirectory: StateDirectory, emit: (RunEvent) -> Void) -> SiblingStores {
        let siblings = SiblingStores.open(in: stateDirectory, besides: manifest.shard)
        for problem in siblings.problems { emit(.stateStoreProblem(problem)) }
        siblings.expect(entries: manifest.entries.count)
        return siblings
    }

    /// Says what an interrupted prune left in a trash, for the next unsharded sync to finish.
    func reportPendingLeftovers(in stores: [StateStore]) {
        for leftover in PruneTrash.pending(in: rootDirectory, stores: stores) { emit(.pruneLeftover(leftover)) }
    }


    func emit(_ event: RunEvent) {
        options.events?(event)
    }

    /// A write to the state store failed. The first of a run is said at the default verbosity
    /// (a store that cannot be written, read-only or full, loses every record of the run, and
    /// the next run fetches or hashes again what this one did); the others are `-v` lines.
    func storeWriteFailed(_ text: String) {
        let first = !reportedStoreWriteFailure.exchange(true, ordering: .relaxed)
        emit(.stateStoreProblem(first
            ? StateStoreProblem(.notWritten, "\(text); what this run learns may not be recorded (each further failure with -v)")
            : StateStoreProblem(.record, text)))
    }

    /// The record, and whether the store failed to say: then a record of any kind may still
    /// be in it.
    /// The run's own store is asked first, then its siblings (see `StateRecord.chosen`).
    func readRecord(of entry: Entry, in store: StateStore?, siblings: SiblingStores, onDisk identity: LocalIdentity?) -> RecordLookup {
        var own: StateRecord?
        if let store {
            do {
                own = try store.record(for: entry.dest)
            } catch {
                let problem = StateStoreProblem(.record, "reading \(store.path): \(error); deciding \(entry.dest) by size")
                return RecordLookup(record: nil, unreadable: true, problem: .stateStoreProblem(problem))
            }
        }
        var found: [StateRecord] = []
        for sibling in siblings.stores {
            // A sibling that cannot be read is only a lost hint: the entry is decided without it.
            if let record = try? sibling.record(for: entry.dest) { found.append(record) }
        }
        return RecordLookup(record: StateRecord.chosen(own: own, siblings: found, onDisk: identity), unreadable: false, problem: nil)
    }

    /// `results`' payloads, in order, taken out of `results` (left empty) one at a time where
    /// each lies (`Optional.take`), each result let go once its payload is out: at no point are
    /// all of them held twice (a run of a million entries would hold a quarter of a GB more),
    /// and none is moved but once (reversed first to be popped from the end, 20,000 took 1 ms
    /// more).
    private static func unwrap<Payload>(_ results: inout [EntryResult?], _ payload: (EntryResult) -> Payload) -> [Payload] {
        var payloads: [Payload] = []
        payloads.reserveCapacity(results.count)
        results.withUnsafeMutableBufferPointer { results in
            for index in results.indices { payloads.append(payload(results[index].take()!)) }
        }
        results = []
        return payloads
    }

    /// Runs every entry on the engine's thread, `width` at once (besides those whose files wait
    /// for their group commit, `SyncRun.commitRoom`); the results in manifest order.
    /// Cancelling the calling task interrupts the run.
    private func run(_ mode: EntryMachine.Mode, store: StateStore?, siblings: SiblingStores, conditions: HostConditions, width: Int) async -> [EntryResult?] {
        let run = SyncRun(environment: environment(store: store, siblings: siblings, conditions: conditions), mode: mode, width: width)
        lastRun.withLock { $0 = [run] }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                run.start { continuation.resume(returning: $0) }
            }
        } onCancel: {
            run.cancel()
        }
    }
}

/// A plan's entries in manifest order, made as they are read from the manifest's entries (dest
/// and URL) and the run's outcomes (`PlanOutcome`, 24 bytes an entry for the common ones):
/// nothing of an entry is held twice while a plan is shown.
public struct PlannedEntries: RandomAccessCollection, Sendable {
    private let entries: [Entry]
    private let results: [EntryResult?]

    init(entries: [Entry], results: [EntryResult?]) {
        precondition(entries.count == results.count, "a plan has one outcome for each entry")
        self.entries = entries
        self.results = results
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { results.count }

    public subscript(index: Int) -> PlannedEntry {
        let entry = entries[index]
        let outcome = self.outcome(index)
        return PlannedEntry(
            dest: entry.dest, url: entry.url.display, action: outcome.action,
            localSize: outcome.localSize, remoteSize: outcome.remoteSize,
            manifestURL: entry.isRewritten ? entry.manifestURL.display : nil)
    }

    /// Entry `index`'s action, without its printable URL (which a whole entry makes, by
    /// looking for userinfo to redact: a command that only counts or finds actions in a plan
    /// of 100,000 made 100,000 of them for nothing).
    public func action(at index: Int) -> Action {
        outcome(index).action
    }

    /// The dest of every entry whose action `find` finds something in, with what it found.
    public func entries<Found>(_ find: (Action) -> Found?) -> [(dest: String, found: Found)] {
        indices.compactMap { index in find(action(at: index)).map { (entries[index].dest, $0) } }
    }

    private func outcome(_ index: Int) -> PlanOutcome {
        guard case .planned(let outcome) = results[index] else { preconditionFailure("a plan ended in a sync report") }
        return outcome
    }
}
