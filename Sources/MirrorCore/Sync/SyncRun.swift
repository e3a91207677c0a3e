/// One `sync` (or `plan`) of a manifest on the transfer engine's thread: fetches the checksum
/// files the entries are pinned by (`ChecksumPins`, each once), then starts an `EntryDriver`
/// for each entry, at most `width` at once (besides those whose files wait for their group
/// commit, `commitRoom`) and in manifest order, and collects their results.
/// An entry its checksum file cannot pin fails without a request of its own.
///
/// An entry whose host has its own `concurrency` (`hosts:`) starts only while fewer than its
/// share of `width` (that `concurrency` times `width / concurrency`) of its host's entries run;
/// otherwise it waits, and the entries after it go ahead: a slow host with a low limit does not
/// hold up the others. In a run with an https URL, both widths have room for
/// `RequestBudget.streamBudget` entries more, the requests that may ride on HTTP/2 connections
/// as streams.
///
/// Touched only on the engine's thread (hence `@unchecked Sendable`), apart from `cancel`,
/// which posts there.
final class SyncRun: @unchecked Sendable {
    /// What the run's entries work with.
    let environment: SyncEnvironment
    let mode: EntryMachine.Mode
    let groupCommit: GroupCommit
    /// Hosts that asked for one connection per file (see `SegmentPoliteness`).
    let segmentPoliteness = SegmentPoliteness()
    private let entries: [Entry]
    /// Entries pinned from their checksum files, by index: they run in place of `entries`' own.
    private var pinned: [Int: Entry] = [:]
    /// Entries that cannot run: their checksum file did not pin them.
    private var unpinned: [Int: TransferFailure] = [:]
    private let checksumPins: ChecksumPins
    private let width: Int
    /// Entries started in one turn of the engine's loop, at most (see `startMore`).
    private let burst: Int
    private var results: [EntryResult?]
    private var running: [Int: EntryDriver] = [:]
    /// Entries of `running` whose files wait for their group commit (`commitStarted`): they
    /// hold no connection, so they leave their place in `width` to the next entries, up to
    /// `commitRoom` of them. (An entry whose host has a `concurrency` of its own still counts
    /// in its host's share until it ends.)
    private var committing = 0
    /// How many entries whose files wait for their group commit may run beyond `width`.
    private let commitRoom: Int
    private var next = 0
    /// Entries passed over while their host was at its share, in order, by host.
    private var deferred: [String: IndexQueue] = [:]
    private var deferredCount = 0
    /// Drivers at once for each host with a `concurrency`.
    private let hostWidths: [String: Int]
    private var runningPerHost: [String: Int] = [:]
    private var hostOfRunning: [Int: String] = [:]
    private var remaining: Int
    /// Looks at the entries about to start on a thread of its own (`EntryLookAhead`).
    let lookAhead: EntryLookAhead
    /// What the entries' sources are made with.
    let sourceContext: EntryDriver.SourceContext
    private var cancelled = false
    private var completion: (@Sendable ([EntryResult?]) -> Void)?

    init(environment: SyncEnvironment, mode: EntryMachine.Mode, width: Int) {
        self.environment = environment
        self.mode = mode
        groupCommit = GroupCommit(
            rootDirectory: environment.rootDirectory, durable: environment.durable, store: environment.store, pool: environment.blocking,
            engine: environment.fetcher.engine, onStoreProblem: environment.storeWriteFailed,
            beforeGroup: environment.beforeGroupCommit)
        entries = environment.manifest.entries
        checksumPins = ChecksumPins(
            fetcher: environment.fetcher, retryPolicy: environment.retryPolicy, width: environment.concurrency,
            rewrites: environment.manifest.rewrites)
        // Room for a full set of streams besides, where a request may ride on an HTTP/2
        // connection (an https URL, of an entry or of a mirror of one): entries waiting for a
        // connection permit leave room for those. A manifest of http URLs alone keeps none:
        // hundreds of entries started ahead of their permits cost a plan of 100,000 a sixth
        // of its time (4.2 -> 4.9 s when the room came).
        let mayRideOnStreams = Self.mayRideOnStreams(entries)
        let streamRoom = { (connections: Int) in mayRideOnStreams ? RequestBudget.streamBudget(connections: connections) : 0 }
        let runWidth = max(1, width) + streamRoom(environment.concurrency)
        self.width = runWidth
        commitRoom = Self.commitRoom(width: runWidth)
        burst = max(1, environment.concurrency)
        let perTransfer = max(1, max(1, width) / max(1, environment.concurrency))
        hostWidths = environment.manifest.hosts.concurrencyLimits.mapValues {
            $0 * perTransfer + streamRoom(min($0, environment.concurrency))
        }
        results = Array(repeating: nil, count: entries.count)
        remaining = entries.count
        let (root, store, siblings, readRecord) = (environment.rootDirectory, environment.store, environment.siblings, environment.readRecord)
        let manifest = environment.manifest
        let sourceContext = EntryDriver.SourceContext(environment)
        self.sourceContext = sourceContext
        lookAhead = EntryLookAhead(entries: entries, window: EntryLookAhead.window(width: runWidth)) { entry in
            let prepared = EntryDriver.Prepared(entry, manifest: manifest, context: sourceContext)
            let at = MonotonicClock.milliseconds()
            let look = EntryLook.make(prepared.paths, in: root) { readRecord(entry, store, siblings, $0) }
            return LookedAhead(prepared: prepared, look: look, at: at)
        }
    }

    var isCancelled: Bool { cancelled }

    /// Whether a request for any of `entries` (to its URL or a mirror's) could take an HTTP/2
    /// stream (`RequestBudget.multiplexes`, whatever the rate limits: an https URL). Looked at
    /// in place: a list with no https URL is read whole before the run starts (each entry
    /// copied out and its URL's scheme made as text, it cost 580 instructions an entry).
    static func mayRideOnStreams(_ entries: [Entry]) -> Bool {
        for index in entries.indices {
            if RequestBudget.isHTTPS(entries[index].url.string) { return true }
            if !entries[index].mirrors.isEmpty, entries[index].mirrors.contains(where: { RequestBudget.isHTTPS($0.string) }) { return true }
        }
        return false
    }

    /// Runs every entry; `completion` gets the results in manifest order, on the engine's thread,
    /// every one of them set.
    func start(completion: @escaping @Sendable ([EntryResult?]) -> Void) {
        environment.fetcher.engine.post { [self] in
            self.completion = completion
            if remaining == 0 { return finishRun() }
            // Offline, no checksum file is fetched: its entries stand on what the root holds.
            checksumPins.resolve(environment.offline ? [] : entries) { [self] resolution in
                for (index, result) in resolution {
                    switch result {
                    case .success(let entry): pinned[index] = entry
                    case .failure(let failure): unpinned[index] = failure
                    }
                }
                startMore()
            }
        }
    }

    /// Interrupts the run: no entry starts anything new, and what runs is stopped.
    func cancel() {
        environment.fetcher.engine.post { [self] in
            cancelled = true
            lookAhead.stop()
            checksumPins.cancel()
            for driver in Array(running.values) { driver.cancel() }
        }
    }

    /// Starts entries up to `width`, at most `burst` in one turn of the engine's loop: the
    /// loop sends what the first ones asked for before the next ones look at their disk and
    /// their records (at the start of a run, a window of hundreds of entries would otherwise
    /// hold back the first request by all of their inspections).
    private func startMore() {
        // The next entries are looked at ahead, as many as the look-ahead's window holds (the
        // ones started wait for a permit before they look themselves).
        lookAhead.want(from: next, upTo: min(entries.count, next + lookAhead.window))
        var started = 0
        while hasRoom, let (index, host) = nextIndex() {
            start(index, countedAgainst: host)
            started += 1
            if started == burst {
                if hasRoom, hasMoreToStart {
                    environment.fetcher.engine.post { [self] in startMore() }
                }
                return
            }
        }
    }

    /// Whether another entry may start: fewer than `width` running besides those whose files
    /// wait for their group commit, and fewer than `commitRoom` of those.
    private var hasRoom: Bool { running.count - committing < width && running.count < width + commitRoom }

    /// Entries whose files may wait for their group commit beyond `width`: a group's most
    /// (`GroupCommit.maxGroup`), as long as the run keeps at most `mostRunning` entries in
    /// all. Counted in `width`, files waiting for a group held the downloads back while the
    /// disk synced the group before ((b) durable 426 → 399 ms). Each holds its `.part` open:
    /// a run holds at most `max(width, mostRunning)` of them, within the common limit of 1,024
    /// descriptors with the connections, the store and libcurl's own beside them.
    static func commitRoom(width: Int) -> Int {
        min(GroupCommit.maxGroup, max(0, mostRunning - width))
    }

    /// The entries a run keeps going at most when files wait for their group commit.
    static let mostRunning = 512

    /// An entry handed its file to the group commit: the next entry may take its place among
    /// those running.
    func commitStarted() {
        committing += 1
        startMoreAfterSends()
    }

    /// The group commit answered an entry (its file renamed, or why not).
    func commitEnded() {
        committing -= 1
    }

    /// Entries not started yet: further in the manifest, or passed over for their host.
    private var hasMoreToStart: Bool { next < entries.count || deferredCount > 0 }

    /// The next entry that may start, with the limited host it counts against: the earliest
    /// one passed over whose host has room now, else the next in the manifest whose host has
    /// room (passing over the others).
    private func nextIndex() -> (index: Int, host: String?)? {
        if deferredCount > 0 {
            var earliest: (host: String, index: Int)?
            for (host, queue) in deferred where hasRoom(host) {
                if let first = queue.first, first < earliest?.index ?? Int.max { earliest = (host, first) }
            }
            if let earliest {
                deferred[earliest.host]!.removeFirst()
                deferredCount -= 1
                return (earliest.index, earliest.host)
            }
        }
        while next < entries.count {
            let index = next
            next += 1
            let host = limitedHost(of: entries[index])
            guard let host, !hasRoom(host) else { return (index, host) }
            deferred[host, default: IndexQueue()].append(index)
            deferredCount += 1
        }
        return nil
    }

    private func hasRoom(_ host: String) -> Bool {
        runningPerHost[host, default: 0] < hostWidths[host] ?? Int.max
    }

    /// The `hosts:` key with a `concurrency` that the entry's URL counts against.
    private func limitedHost(of entry: Entry) -> String? {
        if hostWidths.isEmpty { return nil }
        guard let key = HostKey(entry.url), let rule = environment.manifest.hosts.rule(for: key), rule.concurrency != nil else { return nil }
        return rule.key
    }

    private func start(_ index: Int, countedAgainst host: String?) {
        let looked = lookAhead.take(index)
        // Most runs have neither pinned nor unpinned entries: an empty table is not hashed into.
        let pinnedEntry = pinned.isEmpty ? nil : pinned.removeValue(forKey: index)
        let entry = pinnedEntry ?? entries[index]
        // An emptied table keeps its room: let it go once every pinned entry has started.
        if pinned.isEmpty, pinned.capacity > 0 { pinned = [:] }
        if !unpinned.isEmpty, let failure = unpinned.removeValue(forKey: index) { return entryFinished(index, unpinnedResult(entry, failure)) }
        if let host {
            runningPerHost[host, default: 0] += 1
            hostOfRunning[index] = host
        }
        // What was looked at ahead was made of the manifest's entry: a pinned one starts afresh.
        let driver = EntryDriver(entry: entry, index: index, run: self, lookedAhead: pinnedEntry == nil ? looked : nil)
        running[index] = driver
        driver.start()
    }

    /// The entry at `index` ended (told by its driver, or here when it never needed one).
    func entryFinished(_ index: Int, _ result: EntryResult) {
        running[index] = nil
        if !hostOfRunning.isEmpty, let host = hostOfRunning.removeValue(forKey: index) { runningPerHost[host, default: 1] -= 1 }
        results[index] = result
        if case .synced(let report) = result {
            environment.progress?.entryFinished(dest: report.dest)
            environment.emit(.finished(report))
        }
        remaining -= 1
        if remaining == 0 { return finishRun() }
        startMoreAfterSends()
    }

    /// Not from inside an entry driver's own step: the next one starts on a clean stack, once
    /// the loop has sent the requests that this turn's finished transfers made way for. One
    /// `startMore` a turn starts entries for all the turn's finished ones.
    private func startMoreAfterSends() {
        if hasMoreToStart, !startMoreDeferred {
            startMoreDeferred = true
            environment.fetcher.engine.afterSends { [self] in
                startMoreDeferred = false
                startMore()
            }
        }
    }

    /// A `startMore` waits for the turn's sends (`entryFinished`).
    private var startMoreDeferred = false

    /// The result of an entry that fails for want of its checksum file's pin.
    private func unpinnedResult(_ entry: Entry, _ failure: TransferFailure) -> EntryResult {
        guard mode == .sync else {
            return .planned(PlanOutcome(action: .fail(failure), localSize: nil, remoteSize: nil))
        }
        let url = entry.url.display
        if !cancelled { environment.emit(.started(dest: entry.dest, url: url)) }
        return .synced(EntryReport(
            dest: entry.dest, url: url, action: .fail(failure), outcome: .failed(failure),
            bytesTransferred: 0, size: nil, attempts: 0, sha256: nil))
    }

    /// Hands the results on and keeps none: the run itself is kept to the runner's end.
    private func finishRun() {
        lookAhead.stop()
        guard let completion else { return }
        self.completion = nil
        let finished = results
        results = []
        completion(finished)
    }
}

/// A first-in, first-out queue of entry indices that does not move its items to take one out.
private struct IndexQueue {
    private var items: [Int] = []
    private var head = 0

    var first: Int? { head < items.count ? items[head] : nil }

    mutating func append(_ index: Int) {
        items.append(index)
    }

    mutating func removeFirst() {
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        }
    }
}
