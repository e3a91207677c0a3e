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
    private var runner: ManifestRunner { run.runner }
    private var store: StateStore? { run.store }
    private var conditions: HostConditions { run.conditions }
    private var machine: EntryMachine
    private let paths: DestinationPaths
    private let sources: [Source]
    private var slot: TransferSlots.Slot?
    private var slotRequest: UInt64?
    /// A connection permit asked for by a GET that may not go on a stream, while the attempt's
    /// stream permit is held; the GET starts when it is granted.
    private var upgradeRequest: UInt64?
    /// What starts when that permit is granted.
    private var afterUpgrade: (() -> Void)?
    private var partial: OpenPartial?
    /// The request in flight, to stop it when the run is interrupted.
    private var transferID: UInt64?
    /// A wait in progress (host, back-off, network), to end it when the run is interrupted.
    private var waiting: Task<Void, Never>?
    private var finished = false
    /// What the machine said of the conditional GET's body while its head was judged.
    private var bodyOrder: EntryMachine.TransferOrder?
    /// `RunEvent.started` was sent, at the first attempt.
    private var announcedStart = false
    private let onFinish: (EntryResult) -> Void
    /// The segmented download in progress, if the attempt's transfer is one.
    private var segmented: SegmentedTransfer?
    /// What inspection found of a segment map: one that describes the `.part` (resumable in
    /// segments), or only that a row is there to remove before the `.part` is written.
    private var segmentMap: SegmentMap?
    private var segmentMapSeen = false
    /// Downloads of this entry started over because the server's version changed mid-way.
    private var segmentRestarts = 0

    /// Bytes re-requested before the resume point when no validator vouches for the partial file.
    static let overlapLength: Int64 = 64 * 1024

    init(entry: Entry, run: SyncRun, onFinish: @escaping (EntryResult) -> Void) {
        self.entry = entry
        self.run = run
        self.onFinish = onFinish
        paths = run.runner.manifest.paths(for: entry)
        let sources = ([entry.url] + entry.mirrors).map { Source($0, entry: entry, run: run) }
        self.sources = sources
        entryBucket = entry.settings.rateLimit.map { RateBucket(limit: $0) }
        // http and https URLs answer conditions; ftp and file URLs keep the probe.
        let conditional = Set(sources.indices.filter { sources[$0].protocols == RedirectRule.protocols(forScheme: "http") })
        machine = EntryMachine(mode: run.mode, sourceCount: sources.count, retries: entry.settings.retries, pins: entry.pins,
                               sizePin: entry.size, conditionalSources: conditional)
    }

    /// A source URL and what is derived from it, parsed once.
    private struct Source {
        let url: RemoteURL
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

        init(_ url: RemoteURL, entry: Entry, run: SyncRun) {
            self.url = url
            let host = HostKey(url)
            self.host = host
            target = run.conditions.target(for: url)
            protocols = RedirectRule.protocols(forScheme: RemoteProbe.scheme(of: url.string))
            let hosts = run.runner.manifest.hosts
            let rule = hosts.isEmpty ? nil : host.flatMap(hosts.rule(for:))
            headers = rule.map { entry.settings.headers(toHostWith: $0.headers) } ?? entry.settings.headers
            limitedHost = rule?.concurrency == nil ? nil : rule?.key
            hostBucket = rule.flatMap { run.runner.hostBuckets[$0.key] }
            origin = OriginKey(url: url.string, proxy: run.runner.options.proxies.proxy(for: url.string)?.url)
            let rateLimited = run.runner.runBucket != nil || hostBucket != nil || entry.settings.rateLimit != nil
            multiplexable = RequestBudget.multiplexes(url: url.string, rateLimited: rateLimited)
        }

        /// What a permit for `request` to this source is asked for.
        func want(_ request: RequestBudget.Request) -> TransferSlots.Want {
            TransferSlots.Want(host: limitedHost, origin: origin, request: request, multiplexable: multiplexable)
        }
    }

    /// The entry's own `rate_limit`, shared by its attempts.
    private let entryBucket: RateBucket?

    /// The partial file of the attempt in progress, open from the transfer (or the finishing
    /// hash) until it is committed or the attempt ends.
    private final class OpenPartial: @unchecked Sendable {
        let fd: Int32
        let hasher: TrailingHasher?
        var committed = false

        init(fd: Int32, hasher: TrailingHasher?) {
            self.fd = fd
            self.hasher = hasher
        }

        func close() {
            if !committed {
                hasher?.abandon()
                _ = Glibc.close(fd)
            }
            committed = true
        }
    }

    func start() {
        deliver(.start(cancelled: run.isCancelled))
    }

    /// Stops what the entry waits for; the machine hears of it as a cancelled step.
    func cancel() {
        deliver(.runCancelled)
        segmented?.cancel()
        if let transferID { runner.fetcher.engine.cancel(transferID) }
        if let slotRequest {
            // A request still in the queue is answered here; one granted meanwhile is answered
            // by its posted grant, which finds the run cancelled.
            self.slotRequest = nil
            if runner.slots.withdraw(slotRequest) { deliver(.slotDenied) }
        }
        if let upgradeRequest {
            self.upgradeRequest = nil
            if runner.slots.withdraw(upgradeRequest) {
                afterUpgrade = nil
                deliver(.transferEnded(.failed(.cancelled, bytes: 0)))
            }
        }
        waiting?.cancel()
    }

    /// Hands `event` to the machine and carries out what it says, until the machine waits for
    /// an answer that is not at hand.
    private func deliver(_ event: EntryMachine.Event) {
        var pending = machine.handle(event)
        while !pending.isEmpty {
            let effect = pending.removeFirst()
            if let answer = perform(effect) {
                pending = machine.handle(answer) + pending
            }
        }
    }

    /// Posts an answer from another thread to the engine's.
    private func answer(_ event: EntryMachine.Event) {
        runner.fetcher.engine.post { [self] in deliver(event) }
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
            let (granted, id) = runner.slots.acquire(sources[machine.source].want(.light)) { [self] slot in
                runner.fetcher.engine.post { [self] in
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
                runner.emit(.started(dest: entry.dest, url: entry.url.display))
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
                runner.emit(.probed(dest: entry.dest, url: source.url.display, facts))
                return .probed(facts)
            }
        case .measureBody(let index):
            probe(sources[index]) { .bodyMeasured($0) }
        case .hashDestination:
            let paths = self.paths
            let rootDirectory = runner.rootDirectory
            let algorithm = entry.digestAlgorithm
            runner.blocking.submit { [self] in
                answer(.destinationHashed(Result { () throws(TransferFailure) in try rootDirectory.digestOfDestination(paths, algorithm) }))
            }
        case .prepare(let length, let clearingRecord):
            runner.blocking.submit { [self] in
                answer(.prepared(prepare(copyLength: length, clearingRecord: clearingRecord)))
            }
        case .transfer(let order):
            closePartial()
            transferOnItsBudget(order)
        case .conditionalGet(let index, let recorded):
            closePartial()
            conditionalGet(index, ifNoneOf: recorded)
        case .receiveBody(let order):
            bodyOrder = order
        case .abandonBody:
            bodyOrder = nil
        case .finishHash(let size):
            if partial == nil {
                do {
                    partial = OpenPartial(fd: try runner.rootDirectory.openPartial(paths, truncate: false, durable: runner.options.durable), hasher: nil)
                } catch {
                    return .hashed(.failure(error))
                }
            }
            if size <= Self.inlineHashLimit { return .hashed(Self.hash(partial!, size: size, path: paths.partial, algorithm: entry.digestAlgorithm)) }
            finishHash(partial!, size: size)
        case .keepDestination(let version, let validators, _):
            keepDestination(version, validators: validators)
        case .commit(let validators, let sha256):
            guard let open = partial else {
                return .committed(.failure(.localConflict("internal error: no partial file to commit")))
            }
            commit(open, validators: validators, sha256: sha256)
        case .record(let change):
            record(change)
        case .removePartial:
            removeSegmentMap()
            runner.rootDirectory.removePartial(paths)
        case .removePartialIfEmpty:
            // An empty partial file holds nothing worth resuming: leave no trace of a failed start.
            if let partial, (try? FileSystem.size(of: partial.fd, path: paths.partial)) == 0 {
                runner.rootDirectory.removePartial(paths)
            }
        case .pauseHost(let index, let header):
            if let host = sources[index].host,
               let pause = RetryAfter.delay(header, now: Int(time(nil)), cap: runner.options.retryAfterCap) {
                runner.emit(.pausedByServer(host: host.description, pause: pause))
                conditions.pauses.pause(host, for: pause)
            }
        case .checkConnectivity(let index):
            return checkConnectivity(sources[index])
        case .backOff(let attempt, let failure, let header):
            if run.isCancelled { return .backOffEnded(cancelled: true) }
            let serverPause = header.flatMap { RetryAfter.delay($0, now: Int(time(nil)), cap: runner.options.retryAfterCap) }
            let delay = serverPause ?? runner.options.retryPolicy.delay(afterAttempt: attempt, unitRandom: Double.random(in: 0...1))
            runner.emit(.retrying(dest: entry.dest, url: sources[machine.source].url.display, failure: failure, attempt: attempt, delay: delay))
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
        runner.probe.probe(source.url, settings: entry.settings, headers: source.headers, onStart: { [self] in transferID = $0 }) { [self] facts in
            transferID = nil
            deliver(answer(facts))
        }
    }

    /// Closes the attempt's partial file, unless it was committed.
    private func closePartial() {
        partial?.close()
        partial = nil
    }

    private func finish(_ outcome: EntryMachine.Outcome) {
        guard !finished else { return }
        finished = true
        closePartial()
        slot?.release()
        slot = nil
        if case .planned(let action, let localSize, let remoteSize) = outcome {
            onFinish(.planned(PlannedEntry(dest: entry.dest, url: entry.url.display, action: action, localSize: localSize, remoteSize: remoteSize)))
        } else {
            onFinish(.synced(report(outcome)))
        }
    }

    // MARK: Effects

    private func announce(_ notice: EntryMachine.Notice) {
        switch notice {
        case .decided(let action):
            runner.emit(.decided(dest: entry.dest, action))
        case .answered(let facts):
            runner.emit(.probed(dest: entry.dest, url: sources[machine.source].url.display, facts))
        case .fallingBack(let index, let failure):
            runner.emit(.fallingBack(dest: entry.dest, to: sources[index].url.display, after: failure))
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
        var local: LocalFacts
        do {
            local = try LocalFacts.inspect(paths, in: runner.rootDirectory)
        } catch {
            return .inspectionFailed(error)
        }
        let (record, unreadable) = runner.readRecord(of: entry, in: store, siblings: run.siblings, onDisk: local.destinationIdentity)
        segmentMap = nil
        segmentMapSeen = false
        if let map = try? store?.segmentMap(for: entry.dest) {
            // The map, not the size, says what a segmented `.part` holds.
            segmentMapSeen = true
            let resumable = SegmentMap.resumable(map, partial: local.partial, record: record?.partial)
            segmentMap = resumable
            if case .file = local.partial { local.partial = .file(size: resumable?.prefix ?? 0) }
        }
        return .inspected(local, record: record, recordUnreadable: unreadable)
    }

    private func prepare(copyLength: Int64?, clearingRecord: Bool) -> TransferFailure? {
        if clearingRecord, let store {
            do {
                try store.update(dest: entry.dest, url: entry.url.display) { $0.partial = nil }
            } catch {
                return .localConflict("cannot clear in \(store.path) the record of another version of \(paths.partial) (\(error)); not writing to it")
            }
        }
        if let copyLength {
            do {
                try runner.rootDirectory.copyPrefix(paths, length: copyLength, durable: runner.options.durable)
            } catch {
                return error
            }
        }
        return nil
    }

    private func record(_ change: EntryMachine.RecordChange) {
        guard let store else { return }
        do {
            try store.update(dest: entry.dest, url: entry.url.display) { record in
                switch change {
                case .clearPartial:
                    record.partial = nil
                case .complete(let version):
                    record.partial = nil
                    record.complete = version
                }
            }
        } catch {
            runner.storeWriteFailed("writing \(store.path): \(error)")
        }
    }

    /// GETs the file from `order.offset` into the partial file; answers `transferEnded`. The
    /// file stays open for the hash and the commit that follow.
    private func transfer(_ order: EntryMachine.TransferOrder) {
        if let map = segmentMap, order.offset > 0, order.offset == map.prefix, case .resume(_, .partial) = order.action,
           map.version.url == sources[order.source].url.display, map.version.matches(order.startedFrom),
           !isFolded(sources[order.source]) {
            return resumeSegments(order, map: map)
        }
        // Any other start writes the `.part` as one stream from `offset`: no map describes it.
        if segmentMapSeen { removeSegmentMap() }
        let source = sources[order.source].url
        let protocols = sources[order.source].protocols
        let headers = sources[order.source].headers
        let offset = order.offset
        let fd: Int32
        let hasher: TrailingHasher
        do {
            (fd, hasher) = try openPartial(truncate: offset == 0)
        } catch {
            return deliver(.transferEnded(.notStarted(error, mustRestart: false)))
        }

        let resumeGuard = offset > 0 ? ResumeGuard.choose(recorded: order.startedFrom, current: order.remote) : nil
        let validator = resumeGuard?.ifRange
        var overlap: [UInt8] = []
        do throws(TransferFailure) {
            let size = try FileSystem.size(of: fd, path: paths.partial)
            if size < offset {
                return deliver(.transferEnded(.notStarted(
                    .rangeMismatch("partial file shrank to \(size) bytes while resuming from \(offset)"), mustRestart: true)))
            }
            if size > offset, ftruncate(fd, off_t(offset)) != 0 {
                throw .localIO(path: paths.partial, operation: "truncate", errno: errno)
            }
            if offset > 0 { hasher.advance(to: offset) }
            if resumeGuard?.checksOverlap == true {
                overlap = try FileSystem.read(fd: fd, path: paths.partial, at: offset - min(Self.overlapLength, offset), count: Int(min(Self.overlapLength, offset)))
            }
        } catch {
            return deliver(.transferEnded(.notStarted(error, mustRestart: false)))
        }
        let firstByte = offset - Int64(overlap.count)

        let writer = makeWriter(order, fd: fd, hasher: hasher, firstByte: firstByte, validator: validator, overlap: overlap)
        var request = TransferRequest(get: source, settings: entry.settings, headers: headers, protocols: protocols)
        request.rangeFirst = firstByte > 0 || offset > 0 ? firstByte : nil
        request.ifRange = validator
        request.throttle = throttle(for: order.source)
        let ticket = writer.progress
        let lead = offset == 0 ? segmentLead(order, writer: writer, request: request, hasher: hasher, ticket: ticket) : nil
        // The stream guard judges the head first: a large body on an HTTP/2 stream needs a
        // connection permit before the lead may split it or the writer take it.
        let guarded = streamGuard(lead ?? writer)
        runner.fetcher.fetch(request, sink: guarded ?? lead ?? writer, onStart: { [self] in transferID = $0 }) { [self] fetched in
            transferID = nil
            if let segmented = lead?.transfer, segmented.isSegmenting {
                // The segmented download reports the end, once every stream is done.
                if !segmented.isOver, let lead { segmented.leadEnded(Self.leadEnd(of: fetched, lead: lead), position: writer.position) }
                return
            }
            lead?.finished = true
            lead?.transfer?.abandon()
            if let lead, segmented === lead.transfer { segmented = nil }
            ticket?.finish()
            if guarded?.needsConnection == true {
                // Stopped before its first body byte: nothing was written or recorded.
                return sendAgainOnAConnection { [self] in
                    closePartial()
                    transfer(order)
                }
            }
            deliver(.transferEnded(Self.end(of: fetched, writer: writer, source: source, firstByte: firstByte)))
        }
    }

    /// On a stream, a reply that shows a large body must hold a connection permit: the guard
    /// takes a free one, or stops the request before its sink sees the head.
    private func streamGuard(_ sink: any ResponseBodySink) -> StreamBodyGuard? {
        guard slot?.budget == .stream else { return nil }
        return StreamBodyGuard(sink) { [self] in
            guard let permit = runner.slots.acquireNow(sources[machine.source].want(.body(.max))) else { return false }
            exchange(for: permit)
            return true
        }
    }

    /// A request its stream guard stopped is sent again once the attempt holds a connection
    /// permit; interrupted meanwhile, the transfer ends cancelled.
    private func sendAgainOnAConnection(_ send: @escaping () -> Void) {
        if run.isCancelled { return deliver(.transferEnded(.failed(.cancelled, bytes: 0))) }
        withConnectionPermit(send)
    }

    /// Opens the partial file for writing (emptied when `truncate`) with a hasher that follows
    /// what is written; the attempt keeps both until it ends or commits.
    private func openPartial(truncate: Bool) throws(TransferFailure) -> (Int32, TrailingHasher) {
        let fd = try runner.rootDirectory.openPartial(paths, truncate: truncate, durable: runner.options.durable)
        let hasher = TrailingHasher(fd: fd, path: paths.partial, algorithm: entry.digestAlgorithm, startWriteback: runner.options.durable)
        partial = OpenPartial(fd: fd, hasher: hasher)
        return (fd, hasher)
    }

    /// The writer of `order`'s body into the open partial file, from `firstByte`, with its
    /// progress ticket and the store's record of the version it starts.
    private func makeWriter(
        _ order: EntryMachine.TransferOrder, fd: Int32, hasher: TrailingHasher, firstByte: Int64, validator: String?, overlap: [UInt8]
    ) -> PartialFileWriter {
        let ticket = runner.options.progress?.startTransfer(dest: entry.dest, total: order.remote?.size.map { $0 - order.offset })
        return PartialFileWriter(
            fd: fd, path: paths.partial, requestedOffset: firstByte, expectedTotal: order.remote?.size,
            pinnedSize: entry.size, maxSize: entry.settings.maxSize, hasher: hasher, progress: ticket,
            startedFrom: validator == nil ? nil : order.startedFrom, overlap: overlap,
            onStart: TransferStartRecord(
                store: store, dest: entry.dest, url: sources[order.source].url.display, paths: paths, rootDirectory: runner.rootDirectory,
                continuingRecord: order.startedFrom != nil, hadPartialRecord: order.hadPartialRecord
            ).write
        )
    }

    /// The run's, the host's and the entry's rate limits for a GET from source `index`; nil: none.
    private func throttle(for index: Int) -> Throttle? {
        let buckets = [runner.runBucket, sources[index].hostBucket, entryBucket].compactMap { $0 }
        guard !buckets.isEmpty else { return nil }
        let throttle = Throttle(buckets)
        return throttle.isEmpty ? nil : throttle
    }

    /// One GET of the file on the condition that it is not the version `recorded` names. Its
    /// reply's head goes to the machine (`replied`) before any body byte, on the engine's
    /// thread; the partial file is opened only when the machine wants the body (`receiveBody`),
    /// so a 304, or a 200 of the version already on disk, writes nothing. Answers
    /// `transferEnded`.
    private func conditionalGet(_ index: Int, ifNoneOf recorded: RemoteValidators) {
        let source = sources[index]
        var request = TransferRequest(get: source.url, settings: entry.settings, headers: source.headers, protocols: source.protocols)
        request.ifNoneMatch = recorded.etag
        request.throttle = throttle(for: index)
        let sink = ConditionalBodySink { [self] head throws(TransferFailure) in
            bodyOrder = nil
            switch ConditionalReply.judge(head, recorded: recorded) {
            case .facts(let facts): deliver(.replied(facts))
            case .inconclusive: deliver(.repliedInconclusively)
            }
            guard let order = bodyOrder else { return nil }
            bodyOrder = nil
            let (fd, hasher) = try openPartial(truncate: true)
            return makeWriter(order, fd: fd, hasher: hasher, firstByte: 0, validator: nil, overlap: [])
        }
        // Guarded before the machine hears the head: a large body is not judged until the
        // attempt holds a connection permit, and a 304 or an error page passes at once.
        let guarded = streamGuard(sink)
        runner.fetcher.fetch(request, sink: guarded ?? sink, onStart: { [self] in transferID = $0 }) { [self] fetched in
            transferID = nil
            if guarded?.needsConnection == true {
                return sendAgainOnAConnection { [self] in conditionalGet(index, ifNoneOf: recorded) }
            }
            if let writer = sink.writer {
                writer.progress?.finish()
                return deliver(.transferEnded(Self.end(of: fetched, writer: writer, source: source.url, firstByte: 0)))
            }
            if let failure = fetched.redirectFailure ?? sink.failure ?? fetched.outcome.transportFailure?.redactingHost(of: source.url) {
                return deliver(.transferEnded(.failed(failure, bytes: 0)))
            }
            deliver(.transferEnded(sink.head == nil ? .noResponse(bytes: 0) : .abandoned))
        }
    }

    /// Starts the GET of `order` on the budget it needs: the attempt holds a stream permit (its
    /// origin speaks HTTP/2), and a GET expected to bring a large body (`RequestBudget.choose`:
    /// the probe's size less the offset, or the `size` pin) exchanges it for a connection permit
    /// first. One whose size nothing says goes on its stream, and its reply's head decides
    /// (`StreamBodyGuard`).
    private func transferOnItsBudget(_ order: EntryMachine.TransferOrder) {
        guard slot?.budget == .stream else { return transfer(order) }
        let source = sources[order.source]
        let expected = order.remote?.size ?? entry.size
        let request = expected.map { RequestBudget.Request.body(max(0, $0 - order.offset)) } ?? .light
        let heard = source.origin.map(runner.slots.originProtocol) ?? .unknown
        if RequestBudget.choose(request, origin: heard, multiplexable: source.multiplexable) == .stream { return transfer(order) }
        withConnectionPermit { [self] in transfer(order) }
    }

    /// Exchanges the attempt's stream permit for a connection permit, now or when one is free
    /// (in turn with every other request for one), then runs `then`. The run interrupted
    /// meanwhile, the transfer ends cancelled without a request.
    private func withConnectionPermit(_ then: @escaping () -> Void) {
        let (granted, id) = runner.slots.acquire(sources[machine.source].want(.body(.max))) { [self] permit in
            runner.fetcher.engine.post { [self] in
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

    private func segmentMinimum() -> Int64 { runner.options.segmentMin ?? entry.settings.segmentMin }

    private func isFolded(_ source: Source) -> Bool {
        source.host.map { run.segmentPoliteness.isFolded($0.description) } ?? true
    }

    private func removeSegmentMap() {
        segmentMap = nil
        segmentMapSeen = false
        guard let store else { return }
        do {
            try store.removeSegmentMap(for: entry.dest)
        } catch {
            runner.storeWriteFailed("writing \(store.path): \(error)")
        }
    }

    /// The entry's GET of the whole file, watched for a reply worth splitting; nil when this
    /// download stays one stream whatever the reply (segments off, no store for a map, not
    /// HTTP, a host that asked for fewer connections).
    private func segmentLead(_ order: EntryMachine.TransferOrder, writer: PartialFileWriter, request: TransferRequest,
                             hasher: TrailingHasher, ticket: ProgressTicket?) -> SegmentLead? {
        let source = sources[order.source]
        let minimum = segmentMinimum()
        guard run.mode == .sync, minimum < .max, store != nil, source.protocols == "http,https", !isFolded(source) else { return nil }
        let url = source.url.display
        let pinned = entry.pins.digest != nil
        return SegmentLead(writer: writer, splittable: { head in
            SegmentReply.version(ofLead: head, url: url, segmentMin: minimum, pinned: pinned)
        }, onSplittable: { [self] lead, version in
            // Not inside libcurl's callback: the segments start requests.
            runner.fetcher.engine.post { [self] in
                guard !lead.finished, transferID != nil, !run.isCancelled else { return }
                let machine = SegmentedDownload.fresh(
                    total: version.total, leadPosition: lead.position, mayRestart: segmentRestarts == 0)
                // It paces the lead first, and splits it only when the rest would take long.
                let transfer = segmentedTransfer(version, machine: machine, source: source, request: request, fd: writer.fd,
                                                 hasher: hasher, ticket: ticket, leadBytes: { writer.bytesWritten })
                lead.transfer = transfer
                segmented = transfer
            }
        })
    }

    /// Continues a segmented `.part` from its map: the missing ranges, in segments.
    private func resumeSegments(_ order: EntryMachine.TransferOrder, map: SegmentMap) {
        let source = sources[order.source]
        let fd: Int32
        let hasher: TrailingHasher
        do {
            (fd, hasher) = try openPartial(truncate: false)
        } catch {
            return deliver(.transferEnded(.notStarted(error, mustRestart: false)))
        }
        let missing = ByteRanges.gaps(in: map.durable, total: map.version.total).reduce(0) { $0 + $1.count }
        let ticket = runner.options.progress?.startTransfer(dest: entry.dest, total: missing)
        var request = TransferRequest(get: source.url, settings: entry.settings, headers: source.headers, protocols: source.protocols)
        request.throttle = throttle(for: order.source)
        let machine = SegmentedDownload.resumed(total: map.version.total, durable: map.durable, mayRestart: segmentRestarts == 0)
        let transfer = segmentedTransfer(map.version, machine: machine, source: source, request: request, fd: fd,
                                         hasher: hasher, ticket: ticket, leadBytes: { 0 })
        segmented = transfer
        if !transfer.resume() {
            segmented = nil
            ticket?.finish()
            deliver(.transferEnded(.notStarted(.localConflict("cannot record the segment map of \(paths.partial); not resuming it"), mustRestart: true)))
        }
    }

    private func segmentedTransfer(
        _ version: SegmentVersion, machine: SegmentedDownload, source: Source, request: TransferRequest, fd: Int32,
        hasher: TrailingHasher, ticket: ProgressTicket?, leadBytes: @escaping () -> Int64
    ) -> SegmentedTransfer {
        let environment = SegmentedTransfer.Environment(
            dest: entry.dest, paths: paths, fd: fd, hasher: hasher, request: request, fetcher: runner.fetcher, slots: runner.slots,
            limitedHost: source.limitedHost, blocking: runner.blocking, store: store, rootDirectory: runner.rootDirectory,
            durable: runner.options.durable, progress: ticket, politeness: run.segmentPoliteness,
            host: source.host?.description ?? "", onStoreProblem: { [runner] in runner.storeWriteFailed($0) },
            stopLead: { [self] in if let transferID { runner.fetcher.engine.cancel(transferID) } })
        return SegmentedTransfer(version: version, machine: machine, environment: environment) { [self] transfer, end in
            ticket?.finish()
            if segmented === transfer { segmented = nil }
            if case .failed(.rangeMismatch, _, _) = end { segmentRestarts += 1 }
            deliver(.transferEnded(Self.adding(leadBytes(), to: end)))
        }
    }

    /// `end` with the lead's bytes counted too.
    private static func adding(_ lead: Int64, to end: EntryMachine.TransferEnd) -> EntryMachine.TransferEnd {
        switch end {
        case .failed(let failure, let bytes, let restarted): return .failed(failure, bytes: bytes + lead, restartedFromZero: restarted)
        case .written(let position, let total, let bytes, let restarted, let head):
            return .written(position: position, total: total, bytes: bytes + lead, restartedFromZero: restarted, head: head)
        default: return end
        }
    }

    /// How the lead's request ended, for the segmented download.
    private static func leadEnd(of fetched: Fetcher.Result, lead: SegmentLead) -> SegmentedDownload.StreamEnd {
        if lead.reachedEnd { return .reachedEnd }
        if let failure = fetched.redirectFailure ?? lead.writer.failure { return .failed(failure) }
        if let failure = fetched.outcome.transportFailure { return SegmentedTransfer.streamEnd(after: failure) }
        if let total = lead.transfer?.version.total, lead.writer.position >= total { return .reachedEnd }
        return .failed(.partialBody(received: lead.writer.position, expected: lead.transfer?.version.total ?? 0))
    }

    /// How a GET ended, in the machine's terms.
    private static func end(of fetched: Fetcher.Result, writer: PartialFileWriter, source: RemoteURL, firstByte: Int64) -> EntryMachine.TransferEnd {
        let bytes = writer.bytesWritten
        var restartedFromZero = false
        if case .write(from: 0, _)? = writer.placement, firstByte > 0 { restartedFromZero = true }
        if let failure = fetched.redirectFailure ?? writer.failure ?? fetched.outcome.transportFailure?.redactingHost(of: source) {
            return .failed(failure, bytes: bytes, restartedFromZero: restartedFromZero)
        }
        guard let head = writer.head, let placement = writer.placement else {
            return .noResponse(bytes: bytes, restartedFromZero: restartedFromZero)
        }
        let summary = EntryMachine.ResponseHeadSummary(etag: head.etag, lastModified: head.lastModified, isChunked: head.isChunked)
        switch placement {
        case .alreadyComplete(let total):
            return .alreadyComplete(total: total, head: summary)
        case .write(let from, let total):
            return .written(position: writer.position, total: total, bytes: bytes, restartedFromZero: from == 0 && firstByte > 0, head: summary)
        case .reject(let failure):
            return .rejected(failure, bytes: bytes, restartedFromZero: restartedFromZero)
        }
    }

    /// The partial file's digest in the entry's algorithm (finished on the run's blocking pool,
    /// where waiting for the hashing thread or reading the file stalls no transfer) and its
    /// size on disk.
    private func finishHash(_ open: OpenPartial, size: Int64) {
        let path = paths.partial
        let algorithm = entry.digestAlgorithm
        runner.blocking.submit { [self] in
            answer(.hashed(Self.hash(open, size: size, path: path, algorithm: algorithm)))
        }
    }

    /// Up to this size a file's hash is finished on the engine's thread: less work than the
    /// two thread hops to the pool and back (a 16 KiB file: about 10 µs of SHA-256 from the
    /// page cache).
    static let inlineHashLimit: Int64 = 256 << 10

    private static func hash(_ open: OpenPartial, size: Int64, path: String, algorithm: DigestAlgorithm) -> Result<EntryMachine.HashedFile, TransferFailure> {
        Result { () throws(TransferFailure) -> EntryMachine.HashedFile in
            let digest: String
            if let hasher = open.hasher {
                digest = try hasher.finish(size: size)
            } else {
                let hasher = DigestHasher(algorithm)
                try hasher.update(fileDescriptor: open.fd, length: size, path: path)
                digest = hasher.finalize()
            }
            return EntryMachine.HashedFile(sha256: digest, sizeOnDisk: try FileSystem.size(of: open.fd, path: path))
        }
    }

    /// When `DEST` is still the file `version` describes (not touched since the attempt
    /// began), it stays as it is (its inode), takes the new date, and the partial file goes:
    /// the download had the same bytes. Answers `keepRefused` when `DEST` changed.
    private func keepDestination(_ version: CompleteVersion, validators: RemoteValidators) {
        let paths = self.paths
        let rootDirectory = runner.rootDirectory
        runner.blocking.submit { [self] in
            guard let destination = try? rootDirectory.openDestination(paths) else { return answer(.keepRefused) }
            defer { close(destination) }
            guard (try? LocalIdentity.of(fd: destination, path: paths.destination)) == version.local else { return answer(.keepRefused) }
            rootDirectory.removePartial(paths)
            // The same bytes, perhaps under a new date: DEST takes it, as a download would, so
            // that its date still names its version if the record is ever lost.
            var local = version.local
            let modified = validators.lastModified.flatMap(HTTPDate.parse)
            if modified != nil,
               (try? FileSystem.prepareForCommit(fd: destination, path: paths.destination, modified: modified, durable: false)) != nil,
               let identity = try? LocalIdentity.of(fd: destination, path: paths.destination) {
                local = identity
            }
            answer(.kept(local))
        }
    }

    /// Queues the partial file for the next group commit; answers `committed` with its
    /// identity after the rename, when it can be read.
    private func commit(_ open: OpenPartial, validators: RemoteValidators, sha256: String) {
        run.groupCommit.commit(GroupCommit.Request(
            fd: open.fd, paths: paths, dest: entry.dest, url: entry.url.display, validators: validators, sha256: sha256
        ) { [self] result in
            if case .success = result { open.committed = true }
            deliver(.committed(result))
        })
    }

    private func report(_ outcome: EntryMachine.Outcome) -> EntryReport {
        let source = sources[machine.source].url.display
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
            let partial = inspectPartial ? (try? LocalFacts.inspect(paths, in: runner.rootDirectory))?.partial.size : nil
            return EntryReport(
                dest: entry.dest, url: source, action: action, outcome: .failed(failure),
                bytesTransferred: machine.bytes, size: nil, attempts: machine.attempts, sha256: nil, partialSize: partial)
        }
    }
}

/// How one entry of a run ended: its report (`sync`) or its plan (`plan`).
enum EntryResult: Sendable {
    case synced(EntryReport)
    case planned(PlannedEntry)
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
