import Glibc

/// Carries out what an entry's `EntryMachine` decides, on the transfer engine's thread: the
/// cheap steps (looking at the disk, reading the store's record, starting a request, deciding
/// about a reply) run there at once; hashing, fsync and rename go to the run's blocking pool
/// and come back as events; waits for a host, a back-off or the network run as tasks that post
/// their answer back. Decides nothing itself.
///
/// Data rules kept by what it does: bytes land only in the partial file; `DEST` appears only by
/// renaming a complete, verified, fsync'd partial file over it; an existing `DEST` is never
/// deleted or written in place; cleanup removes only partial files.
///
/// Touched only on the engine's thread (hence `@unchecked Sendable`): every answer from
/// elsewhere is posted there.
final class EntryDriver: @unchecked Sendable {
    let entry: Entry
    let run: SyncRun
    /// What the run's entries work with.
    let env: SyncEnvironment
    private var store: StateStore? { env.store }
    private var conditions: HostConditions { env.conditions }
    private var machine: EntryMachine
    let paths: DestinationPaths
    /// `paths.partial`, made once, when a download or a message first needs it.
    private(set) lazy var partialPath = paths.partial
    let sources: [Source]
    private var slot: TransferSlots.Slot?
    private var slotRequest: UInt64?
    /// A connection permit asked for by a GET that may not go on a stream, while the attempt's
    /// stream permit is held; the GET starts when it is granted.
    private var upgradeRequest: UInt64?
    /// What starts when that permit is granted.
    private var afterUpgrade: (() -> Void)?
    var partial: OpenPartial?
    /// The request in flight, to stop it when the run is interrupted.
    var transferID: UInt64?
    /// A wait in progress (host, back-off, network), to end it when the run is interrupted.
    private var waiting: Task<Void, Never>?
    /// The cache's lock of the entry's pinned blob, held until the entry ends.
    private var blobLock: Int32?
    /// The blob the last placement read: what a quarantine may move, and nothing else.
    private var placedBlob: (name: String, identity: BlobCache.FileIdentity)?
    private var finished = false
    /// `RunEvent.started` was sent, at the first attempt.
    private var announcedStart = false
    /// The entry's place in its run, which its result goes to (`SyncRun.entryFinished`).
    private let index: Int
    /// Carries out the download's effects; made when first needed (a plan, and an entry found
    /// up to date, need none).
    private var download: DownloadDriver {
        if let madeDownload { return madeDownload }
        let made = DownloadDriver(host: self)
        madeDownload = made
        return made
    }
    private var madeDownload: DownloadDriver?

    /// What was found for the entry ahead of its turn (`EntryLookAhead`), for its first
    /// inspection; nil once that was made.
    private var lookedAhead: LookedAhead?

    /// - Parameters:
    ///   - index: the entry's place in `run`, which is told its result.
    ///   - lookedAhead: what was made and found for the entry ahead of its start.
    init(entry: Entry, index: Int, run: SyncRun, lookedAhead: LookedAhead? = nil) {
        self.entry = entry
        self.index = index
        self.lookedAhead = lookedAhead
        self.run = run
        env = run.environment
        let prepared = lookedAhead?.prepared ?? Prepared(entry, manifest: env.manifest, context: run.sourceContext)
        paths = prepared.paths
        sources = prepared.sources
        entryBucket = entry.settings.rateLimit.map { RateBucket(limit: $0) }
        machine = EntryMachine(mode: run.mode, sourceCount: prepared.sources.count, retries: entry.settings.retries, pins: entry.pins,
                               sizePin: entry.size, conditionalSources: prepared.conditional,
                               fillsCache: env.cache != nil && run.mode == .sync, offline: env.offline)
    }

    /// What an entry's driver is made with that depends on the entry and the run's settings
    /// alone: made by the look-ahead's thread for most entries (`EntryLookAhead`), else here.
    struct Prepared: Sendable {
        let paths: DestinationPaths
        let sources: [Source]
        /// The sources that answer conditions: http and https URLs (ftp and file URLs keep the
        /// probe).
        let conditional: SourceIndexSet

        init(paths: DestinationPaths, sources: [Source], conditional: SourceIndexSet) {
            self.paths = paths
            self.sources = sources
            self.conditional = conditional
        }

        init(_ entry: Entry, manifest: Manifest, context: SourceContext) {
            paths = manifest.paths(for: entry)
            var sources: [Source] = []
            sources.reserveCapacity(1 + entry.mirrors.count)
            sources.append(Source(entry.url, index: 0, entry: entry, context: context))
            for (index, mirror) in entry.mirrors.enumerated() {
                sources.append(Source(mirror, index: index + 1, entry: entry, context: context))
            }
            self.sources = sources
            var conditional = SourceIndexSet()
            let http = RedirectRule.protocols(forScheme: "http")
            for index in sources.indices where sources[index].protocols == http { conditional.insert(index) }
            self.conditional = conditional
        }
    }

    /// What a run's sources are made with, for any thread.
    struct SourceContext: Sendable {
        let conditions: HostConditions
        let hosts: HostRules
        let hostBuckets: [String: RateBucket]
        let proxies: ProxyEnvironment
        /// The run has a `rate_limit`.
        let runLimited: Bool

        init(_ environment: SyncEnvironment) {
            conditions = environment.conditions
            hosts = environment.manifest.hosts
            hostBuckets = environment.hostBuckets
            proxies = environment.proxies
            runLimited = environment.runBucket != nil
        }
    }

    /// The entry's download in progress, as its machine stands.
    var downloadMachine: DownloadMachine? { machine.download }

    /// A source URL and what is derived from it, parsed once. A class: a step that uses the
    /// entry's source takes it with one retain, where a copy retained each of its fields.
    final class Source: Sendable {
        let url: RemoteURL
        /// `url.display`, made once: messages, events and the record name the source by it.
        let display: String
        /// The host whose Retry-After pauses apply; nil for a URL with no host (file:).
        let host: HostKey?
        /// What the connectivity gate checks for it; nil for a URL with no host.
        let target: ConnectivityTarget?
        let protocols: String
        /// The request headers: `defaults`', the host's (`hosts:`), the entry's.
        let headers: [HTTPHeader]
        /// The `hosts:` key whose `concurrency` its requests count against; nil: none.
        let limitedHost: String?
        /// Its host's `rate_limit`.
        let hostBucket: RateBucket?
        /// The origin (and proxy) whose HTTP/2 connection its requests may share; nil: no host.
        let origin: OriginKey?
        /// Its requests may share a connection (`RequestBudget.multiplexes`).
        let multiplexable: Bool
        /// The URL parsed for libcurl, when it is http or https (`ParsedURL`).
        let parsed: ParsedURL?

        /// - Parameter index: the source's place: 0 for the entry's `url`, then its `mirrors`.
        init(_ url: RemoteURL, index: Int, entry: Entry, context: SourceContext) {
            self.url = url
            let display = url.display
            self.display = display
            let host = HostKey(url, display: display)
            self.host = host
            target = context.conditions.target(for: url, host: host)
            protocols = RedirectRule.protocols(forScheme: RemoteProbe.scheme(of: url.string))
            let hosts = context.hosts
            let rule = hosts.isEmpty ? nil : host.flatMap(hosts.rule(for:))
            headers = Self.headers(of: entry, source: index, hostRule: rule)
            limitedHost = rule?.concurrency == nil ? nil : rule?.key
            hostBucket = rule.flatMap { context.hostBuckets[$0.key] }
            origin = OriginKey(url: url.string, proxy: context.proxies.proxy(for: url.string)?.url)
            let rateLimited = context.runLimited || hostBucket != nil || entry.settings.rateLimit != nil
            multiplexable = RequestBudget.multiplexes(url: url.string, rateLimited: rateLimited)
            parsed = protocols == Self.httpProtocols ? ParsedURL(url.string) : nil
        }

        private static let httpProtocols = RedirectRule.protocols(forScheme: "http")

        /// The request headers of `entry`'s source `index`, whose host's rule is `hostRule`:
        /// `defaults`', the host's, the entry's. For a URL a `rewrite:` rule made, `defaults`'
        /// and the entry's only when it keeps its source's origin (they were written for that
        /// host), and the rule's over all (`RewriteRules.candidates`).
        static func headers(of entry: Entry, source index: Int, hostRule: HostRule?) -> [HTTPHeader] {
            let own = hostRule.map { entry.settings.headers(toHostWith: $0.headers) } ?? entry.settings.headers
            return entry.rewrittenHeaders(ofSource: index)?.headers(entry: own, host: hostRule?.headers ?? []) ?? own
        }

        /// What a permit for `request` to this source is asked for.
        func want(_ request: RequestBudget.Request) -> TransferSlots.Want {
            TransferSlots.Want(host: limitedHost, origin: origin, request: request, multiplexable: multiplexable)
        }
    }

    /// `entry.url.display`: its first source's.
    private var urlDisplay: String { sources[0].display }

    /// The entry's own `rate_limit`, shared by its attempts.
    private let entryBucket: RateBucket?

    func start() {
        deliver(.start(cancelled: run.isCancelled))
    }

    /// Stops what the entry waits for; the machine hears of it as a cancelled step.
    func cancel() {
        deliver(.runCancelled)
        madeDownload?.cancel()
        if let transferID { env.fetcher.engine.cancel(transferID) }
        if let slotRequest {
            // A request still in the queue is answered here; one granted meanwhile is answered
            // by its posted grant, which finds the run cancelled.
            self.slotRequest = nil
            if env.slots.withdraw(slotRequest) { deliver(.slotDenied) }
        }
        if let upgradeRequest {
            self.upgradeRequest = nil
            if env.slots.withdraw(upgradeRequest) {
                afterUpgrade = nil
                deliver(.transferEnded(.failed(.cancelled, bytes: 0)))
            }
        }
        waiting?.cancel()
    }

    /// Hands `event` to the machine and carries out what it says, until the machine waits for
    /// an answer that is not at hand. An effect's answer, when it is at hand, goes to the
    /// machine at once, and what that says is carried out before the effects after the one
    /// answered: depth first, without a list of pending effects to join and take from.
    func deliver(_ event: EntryMachine.Event) {
        for effect in machine.handle(event) {
            if let answer = perform(effect) { deliver(answer) }
        }
    }

    /// Posts an answer from another thread to the engine's.
    private func answer(_ event: EntryMachine.Event) {
        env.fetcher.engine.post { [self] in deliver(event) }
    }

    /// Carries out one effect; returns the answer when it is known at once.
    private func perform(_ effect: EntryMachine.Effect) -> EntryMachine.Event? {
        if effect.endsAttemptFile { closePartial() }
        switch effect {
        case .finish(let outcome):
            finish(outcome)
        case .announce(let notice):
            announce(notice)
        case .awaitHost(let index):
            return awaitHost(sources[index])
        case .acquireSlot:
            if run.isCancelled { return .slotDenied }
            let (granted, id) = env.slots.acquire(sources[machine.source].want(.light)) { [self] slot in
                env.fetcher.engine.post { [self] in
                    slotRequest = nil
                    if run.isCancelled {
                        slot.release()
                        deliver(.slotDenied)
                        return
                    }
                    self.slot = slot
                    deliver(.slotGranted(hostTroubled: isTroubled(sources[machine.source])))
                }
            }
            if let granted {
                slot = granted
                return .slotGranted(hostTroubled: isTroubled(sources[machine.source]))
            }
            slotRequest = id
        case .releaseSlot:
            slot?.release()
            slot = nil
        case .inspect:
            // The first attempt begins: the entry has its turn (a transfer slot). One that an
            // interruption reaches before then never starts (`interruptedBeforeStart`).
            if run.mode == .sync && !announcedStart {
                announcedStart = true
                env.emit(.started(dest: entry.dest, url: urlDisplay))
            }
            return inspect()
        case .probe where run.isCancelled:
            return .probed(.unavailable(.cancelled))
        case .measureBody where run.isCancelled:
            return .bodyMeasured(.unavailable(.cancelled))
        case .transfer where run.isCancelled, .conditionalGet where run.isCancelled:
            return .transferEnded(.notStarted(.cancelled, mustRestart: false))
        case .probe(let index):
            let source = sources[index]
            probe(source) { [self] facts in
                env.emit(.probed(dest: entry.dest, url: source.display, facts))
                return .probed(facts)
            }
        case .measureBody(let index):
            probe(sources[index]) { .bodyMeasured($0) }
        case .hashDestination:
            let paths = self.paths
            let rootDirectory = env.rootDirectory
            let algorithm = entry.digestAlgorithm
            env.blocking.submit { [self] in
                answer(.destinationHashed(Result { () throws(TransferFailure) in try rootDirectory.digestOfDestination(paths, algorithm) }))
            }
        case .prepare(let length, let clearingRecord):
            env.blocking.submit { [self] in
                answer(.prepared(prepare(copyLength: length, clearingRecord: clearingRecord)))
            }
        case .transfer(let order):
            closePartial()
            return transferOnItsBudget(order)
        case .download(let effect):
            return download.perform(effect)
        case .conditionalGet(let index, let recorded):
            closePartial()
            download.conditionalGet(index, ifNoneOf: recorded)
        case .receiveBody(let order):
            download.wantBody(order)
        case .abandonBody:
            download.wantBody(nil)
        case .finishHash(let size):
            if partial == nil {
                do {
                    partial = OpenPartial(fd: try env.rootDirectory.openPartial(paths, truncate: false, durable: env.durable), hasher: nil)
                } catch {
                    return .hashed(.failure(error))
                }
            }
            if size <= Self.inlineHashLimit {
                // After the turn's sends: the request this entry's end made way for goes first
                // (the digest's last piece and the writeback it starts cost more than a send).
                let open = partial!
                env.fetcher.engine.afterSends { [self] in
                    deliver(.hashed(Self.hash(open, size: size, path: partialPath, algorithm: entry.digestAlgorithm)))
                }
                return nil
            }
            finishHash(partial!, size: size)
        case .keepDestination(let version, let validators, _):
            keepDestination(version, validators: validators)
        case .commit(let validators, let sha256):
            if partial == nil, case .committing = machine.phase {
                // A placement from the cache wrote and closed the partial file on the pool; read
                // only, since it may be a read-only link to the blob (fsync needs no more).
                do {
                    partial = OpenPartial(fd: try env.rootDirectory.openPartialForReading(paths), hasher: nil)
                } catch {
                    return .committed(.failure(error))
                }
            }
            guard let open = partial else {
                return .committed(.failure(.localConflict("internal error: no partial file to commit")))
            }
            commit(open, validators: validators, sha256: sha256)
        case .place(let size):
            closePartial()
            let paths = self.paths
            let rootDirectory = env.rootDirectory
            let durable = env.durable
            guard let cache = env.cache, let digest = entry.pins.digest else { return .placed(.failure(.cancelled)) }
            env.blocking.submit { [self] in
                let (result, blob) = Self.place(digest, size: size, from: cache, paths: paths, in: rootDirectory, durable: durable)
                if case .failure(let failure) = result, !failure.isMissingFile {
                    // A blob that is there but cannot be read (a failing disk, its permissions)
                    // is said: silently, every run would download the file again.
                    let blobPath = blob.flatMap { cache.blobPath(sha256: $0.name) } ?? cache.path
                    env.emit(.cacheProblem("\(blobPath) could not be placed as \(paths.destination): \(failure); downloaded instead"))
                }
                env.fetcher.engine.post { [self] in
                    placedBlob = blob
                    deliver(.placed(result))
                }
            }
        case .lockBlob:
            guard let cache = env.cache, let pin = entry.pins.digest else { return .blobLocked }
            // Off the engine's thread (the lock file is made and opened on the cache's file
            // system, which may be a network's); held elsewhere, tried again every 20 ms, no
            // thread held meanwhile; an interrupted run stops waiting.
            waiting = Task { [self] in
                // By the blob's name where the index knows it (read here, off the engine's
                // thread): one lock whichever digest pins the file.
                let digest = cache.blobName(forPin: pin) ?? pin
                while true {
                    if let fd = cache.tryLock(sha256: digest) {
                        env.fetcher.engine.post { [self] in
                            guard !finished else {
                                if fd >= 0 { close(fd) }
                                return
                            }
                            blobLock = fd
                            deliver(.blobLocked)
                        }
                        return
                    }
                    if (try? await Task.sleep(for: .milliseconds(20))) == nil { break }
                }
                answer(.blobLocked)
            }
        case .quarantineCached:
            guard let cache = env.cache, let blob = placedBlob, let path = cache.blobPath(sha256: blob.name) else { return .quarantined }
            env.blocking.submit { [self] in
                if let aside = cache.quarantine(sha256: blob.name, ifStill: blob.identity) {
                    env.emit(.cacheProblem("\(path) did not hash to its name; moved to \(aside), and \(entry.dest) is downloaded instead"))
                }
                answer(.quarantined)
            }
        case .fillCache(let digest, let size, let identity):
            let paths = self.paths
            let rootDirectory = env.rootDirectory
            guard let cache = env.cache, let identity else { return .cacheFilled }
            env.blocking.submit { [self] in
                do {
                    let fd = try rootDirectory.openDestination(paths)
                    defer { close(fd) }
                    // Only the bytes this run hashed: DEST changed since its commit goes nowhere.
                    guard try LocalIdentity.of(fd: fd, path: paths.destination) == identity else { return answer(.cacheFilled) }
                    let name = try rootDirectory.withDirectory(paths.relativeDirectory) { directory throws(TransferFailure) in
                        try cache.insert(from: fd, length: size, digest: digest, linking: (directory, paths.name))
                    }
                    if let name = name ?? nil { cache.touch(sha256: name) }
                } catch {
                    env.emit(.cacheProblem("\(paths.destination) was not put into the cache \(cache.path): \(error)"))
                }
                answer(.cacheFilled)
            }
        case .record(let change):
            record(change)
        case .removePartial:
            dropHeld()
            download.removeSegmentMap()
            env.rootDirectory.removePartial(paths)
        case .removePartialIfEmpty:
            // An empty partial file holds nothing worth resuming: leave no trace of a failed start.
            // By its name, open or not: a GET stopped at its head to wait for a connection
            // permit closed its file, and the one sent again makes its own only once it is on
            // its way; interrupted in between, the entry may have left the first one, empty.
            if partial?.heldBody?.isEmpty == true { dropHeld() }
            env.rootDirectory.removePartialIfEmpty(paths)
        case .pauseHost(let index, let header):
            if let host = sources[index].host,
               let pause = RetryAfter.delay(header, now: Int(time(nil)), cap: env.retryAfterCap) {
                env.emit(.pausedByServer(host: host.description, pause: pause))
                conditions.pauses.pause(host, for: pause)
            }
        case .checkConnectivity(let index):
            return checkConnectivity(sources[index])
        case .backOff(let attempt, let failure, let header):
            if run.isCancelled { return .backOffEnded(cancelled: true) }
            let serverPause = header.flatMap { RetryAfter.delay($0, now: Int(time(nil)), cap: env.retryAfterCap) }
            let delay = serverPause ?? env.retryPolicy.delay(afterAttempt: attempt, unitRandom: Double.random(in: 0...1))
            env.emit(.retrying(dest: entry.dest, url: sources[machine.source].display, failure: failure, attempt: attempt, delay: delay))
            waiting = Task { [self] in
                let cancelled = (try? await Task.sleep(for: delay)) == nil
                answer(.backOffEnded(cancelled: cancelled))
            }
        }
        return nil
    }

    /// Probes `source`, cancellable while it runs, and hands the machine what `answer` makes of
    /// the facts.
    private func probe(_ source: Source, answer: @escaping (RemoteFacts) -> EntryMachine.Event) {
        env.probe.probe(source.url, parsed: source.parsed, settings: entry.settings, headers: source.headers, onStart: { [self] in transferID = $0 }) { [self] facts in
            transferID = nil
            deliver(answer(facts))
        }
    }

    /// Closes the attempt's partial file, unless it was committed.
    /// A body held in memory (`PartialFileWriter`) that the attempt did not commit goes to the
    /// partial file first, so that the file and its record say what the machine was told: a
    /// later attempt, or run, resumes from there (and from what was written of it, should the
    /// writing fail). Its writer opens the file as this attempt's, closed here with any other.
    func closePartial() {
        if let open = partial, let holder = open.holder, !open.committed {
            open.committed = true
            partial = nil
            _ = holder.spill()
        }
        partial?.close()
        partial = nil
    }

    /// The partial file is removed by name: a body held in memory for it is dropped with it.
    private func dropHeld() {
        guard let open = partial, open.holder != nil else { return }
        open.releaseHeld()
        partial = nil
    }

    private func finish(_ outcome: EntryMachine.Outcome) {
        guard !finished else { return }
        finished = true
        closePartial()
        slot?.release()
        slot = nil
        if let blobLock, blobLock >= 0 { close(blobLock) }
        blobLock = nil
        if case .planned(let action, let localSize, let remoteSize) = outcome {
            run.entryFinished(index, .planned(PlanOutcome(action: action, localSize: localSize, remoteSize: remoteSize)))
        } else {
            run.entryFinished(index, .synced(report(outcome)))
        }
    }

    // MARK: Effects

    private func announce(_ notice: EntryMachine.Notice) {
        switch notice {
        case .decided(let action):
            env.emit(.decided(dest: entry.dest, action))
        case .answered(let facts):
            env.emit(.probed(dest: entry.dest, url: sources[machine.source].display, facts))
        case .fallingBack(let index, let failure):
            env.emit(.fallingBack(dest: entry.dest, to: sources[index].display, after: failure))
        }
    }

    /// Outages and Retry-After pauses are waited out without a transfer slot, so a host that
    /// asked for ten minutes' rest does not hold up the others. Nearly always nothing holds the
    /// host back, and the answer is at hand.
    private func awaitHost(_ source: Source) -> EntryMachine.Event? {
        if run.isCancelled { return .hostUnavailable(.cancelled) }
        guard let host = source.host, let target = source.target else { return .hostReady }
        if !isTroubled(source) { return .hostReady }
        let conditions = self.conditions
        waiting = Task { [self] in
            do {
                try await conditions.gate.beforeAttempt(talkingTo: target)
                try await conditions.pauses.waitOut(host)
                answer(.hostReady)
            } catch let unreachable as ConnectivityGate.Unreachable {
                answer(.hostUnavailable(Task.isCancelled ? .cancelled : .unreachable(host: unreachable.target.description, waited: unreachable.waited)))
            } catch {
                answer(.hostUnavailable(.cancelled))
            }
        }
        return nil
    }

    private func isTroubled(_ source: Source) -> Bool {
        guard let host = source.host, let target = source.target else { return false }
        return conditions.pauses.isPaused(host) || conditions.gate.hasTrouble(target)
    }

    private func checkConnectivity(_ source: Source) -> EntryMachine.Event? {
        if run.isCancelled { return .connectivityChecked(.gaveUp(.cancelled)) }
        guard let target = source.target else { return .connectivityChecked(.reachable) }
        let gate = conditions.gate
        waiting = Task { [self] in
            do throws(ConnectivityGate.Unreachable) {
                let passage = try await gate.afterFailure(talkingTo: target)
                answer(.connectivityChecked(passage == .cameBack ? .cameBack : .reachable))
            } catch {
                answer(.connectivityChecked(.gaveUp(Task.isCancelled ? .cancelled : .unreachable(host: error.target.description, waited: error.waited))))
            }
        }
        return nil
    }

    private func inspect() -> EntryMachine.Event {
        let look: Result<EntryLook, TransferFailure>
        if let looked = lookedAhead.take(), looked.isFresh(at: MonotonicClock.milliseconds()) {
            look = looked.look
        } else {
            look = EntryLook.make(paths, in: env.rootDirectory) { env.readRecord(entry, store, env.siblings, $0) }
        }
        let found: EntryLook
        switch look {
        case .success(let success): found = success
        case .failure(let error): return .inspectionFailed(error)
        }
        if let problem = found.record.problem { env.emit(problem) }
        let record = found.record.record
        var local = found.local
        if let cache = env.cache, local.destination == .missing || env.offline, let digest = entry.pins.digest {
            local.cached = cache.lookup(pin: digest, size: entry.size)
        }
        // The download driver is made for a segment map, or when an earlier attempt made it.
        let map = try? store?.segmentMap(for: entry.dest)
        if madeDownload != nil || map != nil {
            local.partial = download.inspected(local.partial, record: record?.partial, map: map)
        }
        return .inspected(local, record: record, recordUnreadable: found.record.unreadable)
    }

    private func prepare(copyLength: Int64?, clearingRecord: Bool) -> TransferFailure? {
        if clearingRecord, let store {
            do {
                try store.update(dest: entry.dest, url: urlDisplay) { $0.partial = nil }
            } catch {
                return .localConflict("cannot clear in \(store.path) the record of another version of \(paths.partial) (\(error)); not writing to it")
            }
        }
        if let copyLength {
            do {
                try env.rootDirectory.copyPrefix(paths, length: copyLength, durable: env.durable)
            } catch {
                return error
            }
        }
        return nil
    }

    private func record(_ change: EntryMachine.RecordChange) {
        guard let store else { return }
        do {
            try store.update(dest: entry.dest, url: urlDisplay) { record in
                switch change {
                case .clearPartial:
                    record.partial = nil
                case .complete(let version):
                    record.partial = nil
                    record.complete = version
                }
            }
        } catch {
            env.storeWriteFailed("writing \(store.path): \(error)")
        }
    }

    /// On a stream, a reply that shows a large body must hold a connection permit: the guard
    /// takes a free one, or stops the request before its sink sees the head.
    func streamGuard(_ sink: any ResponseBodySink) -> StreamBodyGuard? {
        guard slot?.budget == .stream else { return nil }
        return StreamBodyGuard(sink) { [self] in
            guard let permit = env.slots.acquireNow(sources[machine.source].want(.body(.max))) else { return false }
            exchange(for: permit)
            return true
        }
    }

    /// A request its stream guard stopped is sent again once the attempt holds a connection
    /// permit; interrupted meanwhile, the transfer ends cancelled.
    func sendAgainOnAConnection(_ send: @escaping () -> Void) {
        if run.isCancelled { return deliver(.transferEnded(.failed(.cancelled, bytes: 0))) }
        withConnectionPermit(send)
    }

    /// The run's, the host's and the entry's rate limits for a GET from source `index`; nil: none.
    func throttle(for index: Int) -> Throttle? {
        let buckets = [env.runBucket, sources[index].hostBucket, entryBucket].compactMap { $0 }
        guard !buckets.isEmpty else { return nil }
        let throttle = Throttle(buckets)
        return throttle.isEmpty ? nil : throttle
    }

    /// Starts the GET of `order` on the budget it needs: the attempt holds a stream permit (its
    /// origin speaks HTTP/2), and a GET expected to bring a large body (`RequestBudget.choose`:
    /// the probe's size less the offset, or the `size` pin) exchanges it for a connection permit
    /// first. One whose size nothing says goes on its stream, and its reply's head decides
    /// (`StreamBodyGuard`).
    private func transferOnItsBudget(_ order: EntryMachine.TransferOrder) -> EntryMachine.Event? {
        guard slot?.budget == .stream else { return download.start(order) }
        let source = sources[order.source]
        let expected = order.remote?.size ?? entry.size
        let request = expected.map { RequestBudget.Request.body(max(0, $0 - order.offset)) } ?? .light
        let heard = source.origin.map(env.slots.originProtocol) ?? .unknown
        if RequestBudget.choose(request, origin: heard, multiplexable: source.multiplexable) == .stream { return download.start(order) }
        withConnectionPermit { [self] in deliver(download.start(order)) }
        return nil
    }

    /// Exchanges the attempt's stream permit for a connection permit, now or when one is free
    /// (in turn with every other request for one), then runs `then`. The run interrupted
    /// meanwhile, the transfer ends cancelled without a request.
    private func withConnectionPermit(_ then: @escaping () -> Void) {
        let (granted, id) = env.slots.acquire(sources[machine.source].want(.body(.max))) { [self] permit in
            env.fetcher.engine.post { [self] in
                upgradeRequest = nil
                let then = afterUpgrade
                afterUpgrade = nil
                if run.isCancelled {
                    permit.release()
                    return deliver(.transferEnded(.failed(.cancelled, bytes: 0)))
                }
                exchange(for: permit)
                then?()
            }
        }
        if let granted {
            exchange(for: granted)
            return then()
        }
        afterUpgrade = then
        upgradeRequest = id
    }

    /// Holds `permit` in place of the permit held so far, which goes back.
    private func exchange(for permit: TransferSlots.Slot) {
        let previous = slot
        slot = permit
        previous?.release()
    }

    // MARK: Segments

    func isFolded(_ source: Source) -> Bool {
        source.host.map { run.segmentPoliteness.isFolded($0.description) } ?? true
    }

    /// The partial file's digest in the entry's algorithm (finished on the run's blocking pool,
    /// where waiting for the hashing thread or reading the file stalls no transfer) and its
    /// size on disk.
    private func finishHash(_ open: OpenPartial, size: Int64) {
        let path = partialPath
        let algorithm = entry.digestAlgorithm
        env.blocking.submit { [self] in
            answer(.hashed(Self.hash(open, size: size, path: path, algorithm: algorithm)))
        }
    }

    /// Up to this size a file's hash is finished on the engine's thread, once the turn's
    /// requests are sent: less work than the two thread hops to the pool and back (a 16 KiB
    /// file: about 10 µs of SHA-256 from the page cache).
    static let inlineHashLimit: Int64 = 256 << 10

    private static func hash(_ open: OpenPartial, size: Int64, path: String, algorithm: DigestAlgorithm) -> Result<EntryMachine.HashedFile, TransferFailure> {
        Result { () throws(TransferFailure) -> EntryMachine.HashedFile in
            let digest: String
            if let body = open.heldBody {
                // Not read back: the bytes the commit writes are these.
                let hasher = DigestHasher(algorithm)
                body.withUnsafeBytes { hasher.update($0) }
                return EntryMachine.HashedFile(sha256: hasher.finalize(), sizeOnDisk: Int64(body.count))
            } else if let hasher = open.hasher {
                digest = try hasher.finish(size: size)
            } else {
                let hasher = DigestHasher(algorithm)
                try hasher.update(fileDescriptor: open.fd, length: size, path: path)
                digest = hasher.finalize()
            }
            return EntryMachine.HashedFile(sha256: digest, sizeOnDisk: try FileSystem.size(of: open.fd, path: path))
        }
    }

    /// Copies the cache's blob of the pin `digest` into a new partial file of `paths`, and
    /// hashes what landed there (read back from the partial file, not taken from the blob's
    /// name) unless the index vouches for the blob: its row's stat is the blob's, unchanged
    /// since its bytes were last hashed (and, for a SHA-512 pin, its row holds that digest).
    /// A blob hashed here and found to be the pin gets its row anew. Returns the blob's name
    /// and which file it was, for a quarantine.
    private static func place(
        _ digest: String, size: Int64, from cache: BlobCache, paths: DestinationPaths, in rootDirectory: RootDirectory, durable: Bool
    ) -> (Result<EntryMachine.HashedFile, TransferFailure>, (name: String, identity: BlobCache.FileIdentity)?) {
        var found: (name: String, identity: BlobCache.FileIdentity)?
        let result = Result { () throws(TransferFailure) -> EntryMachine.HashedFile in
            guard let name = cache.blobName(forPin: digest), let blob = cache.open(sha256: name) else {
                throw .localIO(path: cache.blobPath(sha256: digest) ?? cache.path, operation: "open", errno: ENOENT)
            }
            defer { close(blob) }
            var info = stat()
            guard fstat(blob, &info) == 0 else { throw .localIO(path: cache.blobPath(sha256: name) ?? cache.path, operation: "inspect", errno: errno) }
            found = (name, BlobCache.FileIdentity(info))
            var linked = false
            if cache.mode == .hardlink, let target = cache.blobPath(sha256: name) {
                linked = try rootDirectory.linkPartial(paths, to: target, durable: durable)
            }
            let partial = linked
                ? try rootDirectory.openPartialForReading(paths) : try rootDirectory.openPartial(paths, truncate: true, durable: durable)
            defer { close(partial) }
            if linked {
                // Linked by name: the file the link reached is the one that is vouched for.
                guard fstat(partial, &info) == 0 else { throw .localIO(path: paths.partial, operation: "inspect", errno: errno) }
                found = (name, BlobCache.FileIdentity(info))
            } else {
                try BlobCache.copy(from: blob, to: partial, length: size, path: paths.partial)
            }
            defer { cache.recordHit(sha256: name) }
            let sizeOnDisk = try FileSystem.size(of: partial, path: paths.partial)
            let algorithm = DigestAlgorithm(hexDigest: digest) ?? .sha256
            let row = cache.indexRow(sha256: name)
            // Trusted only as a copy of a blob unchanged from before the copy to after it. A
            // link is always hashed: the blob is then a root's DEST too, written through by
            // tools that keep its size and mtime, and every link moves its ctime on.
            var after = stat()
            if !linked, let row, row.describes(info), fstat(blob, &after) == 0, row.describes(after),
               algorithm == .sha256 || row.sha512 == digest {
                return EntryMachine.HashedFile(sha256: digest, sizeOnDisk: sizeOnDisk)
            }
            let hasher = DigestHasher(algorithm)
            try hasher.update(fileDescriptor: partial, length: size, path: paths.partial)
            let hashed = hasher.finalize()
            // The row vouches for the blob as it was before the copy: only if it is so still. A
            // linked blob gets none (its ctime moves on with every link: no row would hold).
            if hashed == digest, !linked, fstat(blob, &after) == 0, BlobCache.IndexRow.FileState(info) == BlobCache.IndexRow.FileState(after) {
                cache.writeIndex(BlobCache.IndexRow(sha256: name, sha512: algorithm == .sha512 ? digest : row?.sha512, stat: info), syncing: blob)
            }
            return EntryMachine.HashedFile(sha256: hashed, sizeOnDisk: sizeOnDisk)
        }
        return (result, found)
    }

    /// When `DEST` is still the file `version` describes (not touched since the attempt
    /// began), it stays as it is (its inode), takes the new date, and the partial file goes:
    /// the download had the same bytes. Answers `keepRefused` when `DEST` changed.
    private func keepDestination(_ version: CompleteVersion, validators: RemoteValidators) {
        let paths = self.paths
        let rootDirectory = env.rootDirectory
        env.blocking.submit { [self] in
            guard let destination = try? rootDirectory.openDestination(paths) else { return answer(.keepRefused) }
            defer { close(destination) }
            // Refused too for another name of a file (a blob of the cache, shared by other
            // roots): its date is theirs as well, so the new version is committed as a file of
            // its own instead.
            var info = stat()
            guard fstat(destination, &info) == 0, LocalIdentity(info) == version.local, info.st_nlink <= 1 else { return answer(.keepRefused) }
            rootDirectory.removePartial(paths)
            // The same bytes, perhaps under a new date: DEST takes it, as a download would, so
            // that its date still names its version if the record is ever lost.
            var local = version.local
            let modified = validators.lastModified.flatMap(HTTPDate.parse)
            if modified != nil,
               (try? FileSystem.setModified(fd: destination, path: paths.destination, modified: modified)) != nil,
               let identity = try? LocalIdentity.of(fd: destination, path: paths.destination) {
                local = identity
            }
            let kept = local
            env.fetcher.engine.post { [self] in
                // Its partial file is gone, and so is a body held for it.
                dropHeld()
                deliver(.kept(kept))
            }
        }
    }

    /// Queues the partial file for the next group commit; answers `committed` with its
    /// identity after the rename, when it can be read.
    private func commit(_ open: OpenPartial, validators: RemoteValidators, sha256: String) {
        run.commitStarted()
        run.groupCommit.commit(GroupCommit.Request(
            fd: open.fd, held: open.heldBody, paths: paths, dest: entry.dest, url: urlDisplay, validators: validators, sha256: sha256
        ) { [self] result in
            run.commitEnded()
            if case .success = result { open.committed = true }
            // A held body is the group's once it is handed over, whatever became of it: on
            // disk, renamed or not (a failed directory fsync comes after the rename), or not
            // written at all. The next attempt looks at the disk again.
            open.releaseHeld()
            deliver(.committed(result))
        })
    }

    private func report(_ outcome: EntryMachine.Outcome) -> EntryReport {
        let source = sources[machine.source].display
        switch outcome {
        case .succeeded(let result, let action, let size, let sha256):
            return EntryReport(
                dest: entry.dest, url: source, action: action, outcome: result,
                bytesTransferred: machine.bytes, size: size, attempts: machine.attempts, sha256: sha256)
        case .planned(let action, _, _):
            return EntryReport(dest: entry.dest, url: source, action: action, outcome: .skipped,
                               bytesTransferred: 0, size: nil, attempts: 0, sha256: nil)
        case .failed(let failure, let action, let inspectPartial):
            // What is on disk now, not what an attempt meant to keep: "a partial file is kept"
            // must be true when it is said.
            let partial = inspectPartial ? (try? LocalFacts.inspect(paths, in: env.rootDirectory))?.partial.size : nil
            return EntryReport(
                dest: entry.dest, url: source, action: action, outcome: .failed(failure),
                bytesTransferred: machine.bytes, size: nil, attempts: machine.attempts, sha256: nil, partialSize: partial)
        }
    }
}

/// How one entry of a run ended: its report (`sync`) or its plan (`plan`). A run keeps one for
/// each entry, in manifest order, until its end: a report is held behind a reference
/// (`indirect`), so that handing them on moves a pointer each rather than copying about 250
/// bytes; a plan's outcome is 24 bytes in place (`PlanOutcome`).
enum EntryResult: Sendable {
    indirect case synced(EntryReport)
    case planned(PlanOutcome)
}

/// What a plan decided for one entry, without its dest and URL (the manifest's entry has
/// them; `PlannedEntries` puts them together). A plan holds one for every entry until it is
/// shown, so the common outcomes take 24 bytes and no allocation: `download` and `skip` with
/// sizes that are unknown or not negative. Any other is kept whole behind a reference.
struct PlanOutcome: Sendable {
    private enum Kind: Sendable {
        case download
        case skip
        case other(Whole)
    }

    private final class Whole: Sendable {
        let action: Action
        let localSize: Int64?
        let remoteSize: Int64?

        init(action: Action, localSize: Int64?, remoteSize: Int64?) {
            self.action = action
            self.localSize = localSize
            self.remoteSize = remoteSize
        }
    }

    private let kind: Kind
    /// The sizes of `download` and `skip`, -1 for unknown.
    private let local: Int64
    private let remote: Int64

    init(action: Action, localSize: Int64?, remoteSize: Int64?) {
        let storable = (localSize ?? 0) >= 0 && (remoteSize ?? 0) >= 0
        switch action {
        case .download where storable: kind = .download
        case .skip where storable: kind = .skip
        default:
            kind = .other(Whole(action: action, localSize: localSize, remoteSize: remoteSize))
        }
        local = localSize ?? -1
        remote = remoteSize ?? -1
    }

    var action: Action {
        switch kind {
        case .download: return .download
        case .skip: return .skip
        case .other(let whole): return whole.action
        }
    }

    var localSize: Int64? {
        if case .other(let whole) = kind { return whole.localSize }
        return local < 0 ? nil : local
    }

    var remoteSize: Int64? {
        if case .other(let whole) = kind { return whole.remoteSize }
        return remote < 0 ? nil : remote
    }
}

extension EntryMachine.Effect {
    /// After this effect the attempt's partial file is no longer needed open.
    var endsAttemptFile: Bool {
        switch self {
        case .checkConnectivity, .backOff, .awaitHost, .finish: return true
        default: return false
        }
    }
}
