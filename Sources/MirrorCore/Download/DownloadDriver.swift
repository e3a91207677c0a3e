import Glibc

/// Carries out what an entry's `DownloadMachine` decides, on the transfer engine's thread:
/// opens the partial file with its hasher, sends the GET with its writer (watched as the lead
/// of a segmented download where it may be one, guarded on an HTTP/2 stream), sends the
/// conditional GET whose body the entry may take, and sets a `SegmentedTransfer` going for
/// segments. Decides nothing: what it finds and how each request ended go back to the
/// machine, through the entry's (`EntryDriver.deliver`), which holds it.
///
/// Touched only on the engine's thread (hence `@unchecked Sendable`).
final class DownloadDriver: @unchecked Sendable {
    private unowned let host: EntryDriver
    /// What inspection found of a segment map: one that describes the `.part` (resumable in
    /// segments), or only that a row is there to remove before the `.part` is written.
    private var segmentMap: SegmentMap?
    private var segmentMapSeen = false
    /// The segmented download in progress, if the attempt's transfer is one.
    private(set) var segmented: SegmentedTransfer?
    /// The transfer ordered, from `.transfer` to its end.
    private var order: EntryMachine.TransferOrder?
    /// The GET of the whole file in progress, which segments may grow from.
    private var lead: Lead?
    /// What the machine said of the conditional GET's body while its head was judged.
    private var bodyOrder: EntryMachine.TransferOrder?
    /// The machine takes that body (`takeBody`): as a lead of segments, or not.
    private var bodyTakenAsLead: Bool?
    /// The conditional GET's body, once the machine takes it, and the segments' lead it became,
    /// if it did: kept here rather than in variables its two closures would share, which each
    /// conditional GET would box in two allocations of their own. One GET at a time; each
    /// `conditionalGet` starts them afresh.
    private var conditionalWriter: PartialFileWriter?
    private var conditionalLead: SegmentLead?

    private struct Lead {
        let stream: SegmentLead
        let request: TransferRequest
        let ticket: ProgressTicket?
        let source: EntryDriver.Source
        /// When its GET was handed to the engine (the monotonic clock, ms).
        let requestedAt: Int64
    }

    init(host: EntryDriver) {
        self.host = host
    }

    private var entry: Entry { host.entry }
    private var paths: DestinationPaths { host.paths }
    private var env: SyncEnvironment { host.env }
    private var store: StateStore? { host.env.store }

    // MARK: Segment maps

    /// What inspection found: the store's map of the `.part` (`map`, nil: none), and whether it
    /// describes the `.part`; returns the partial file's facts as the map says them.
    func inspected(_ partial: LocalFacts.FileState, record: RemoteValidators?, map: SegmentMap?) -> LocalFacts.FileState {
        segmentMap = nil
        segmentMapSeen = false
        guard let map else { return partial }
        // The map, not the size, says what a segmented `.part` holds.
        segmentMapSeen = true
        let resumable = SegmentMap.resumable(map, partial: partial, record: record)
        segmentMap = resumable
        if case .file = partial { return .file(size: resumable?.prefix ?? 0) }
        return partial
    }

    func removeSegmentMap() {
        segmentMap = nil
        segmentMapSeen = false
        guard let store else { return }
        do {
            try store.removeSegmentMap(for: entry.dest)
        } catch {
            env.storeWriteFailed("writing \(store.path): \(error)")
        }
    }

    // MARK: Effects

    /// The machine ordered the download: what is around it, for the machine.
    func start(_ order: EntryMachine.TransferOrder) -> EntryMachine.Event {
        self.order = order
        return .download(.begin(surroundings(of: order)))
    }

    private func surroundings(of order: EntryMachine.TransferOrder) -> DownloadMachine.Surroundings {
        let source = host.sources[order.source]
        return DownloadMachine.Surroundings(
            url: source.display, partialPath: host.partialPath, map: segmentMap, mapSeen: segmentMapSeen,
            segmentMin: env.segmentMin ?? entry.settings.segmentMin, hasStore: store != nil,
            speaksHTTP: source.protocols == "http,https", hostFolded: host.isFolded(source))
    }

    /// Carries out one effect; returns the answer when it is known at once.
    func perform(_ effect: DownloadMachine.Effect) -> EntryMachine.Event? {
        switch effect {
        case .removeSegmentMap:
            removeSegmentMap()
        case .openPartial:
            // (An attempt begins by closing its predecessor's file: nothing is held here.)
            host.closePartial()
            do {
                let (fd, _) = try openPartial(truncate: false)
                return .download(.opened(size: try FileSystem.size(of: fd, path: host.partialPath)))
            } catch {
                return .download(.notOpened(error))
            }
        case .get(let get):
            return self.get(get)
        case .startSegments(let version, let resumed):
            if resumed { return resumeSegments(version) }
            startSegmentsFromLead(version)
        case .segments(let inner):
            segmented?.perform(inner)
        case .takeBody(let lead):
            bodyTakenAsLead = lead
        case .sendAgainOnAConnection:
            guard let order else { break }
            host.sendAgainOnAConnection { [self] in
                host.closePartial()
                host.deliver(start(order))
            }
        case .ended:
            // The entry's machine takes the end itself.
            break
        }
        return nil
    }

    /// Opens the partial file for writing (emptied when `truncate`) with a hasher that follows
    /// what is written; the attempt keeps both until it ends or commits.
    private func openPartial(truncate: Bool) throws(TransferFailure) -> (Int32, TrailingHasher) {
        let fd = try env.rootDirectory.openPartial(paths, truncate: truncate, durable: env.durable)
        let hasher = TrailingHasher(fd: fd, path: host.partialPath, algorithm: entry.digestAlgorithm, startWriteback: env.durable)
        host.partial = OpenPartial(fd: fd, hasher: hasher)
        return (fd, hasher)
    }

    /// Prepares the open partial file as `get` says and sends the GET, or (`opensPartial`)
    /// sends the GET and opens the partial file while it travels; its end is told as
    /// `streamEnded`. The file stays open for the hash and the commit that follow.
    private func get(_ get: DownloadMachine.Get) -> EntryMachine.Event? {
        guard let order else { return .download(.notOpened(.localConflict("internal error: no download ordered"))) }
        let writer: PartialFileWriter
        if get.opensPartial {
            writer = makeNewFileWriter(order)
        } else {
            guard let partial = host.partial, let hasher = partial.hasher else {
                return .download(.notOpened(.localConflict("internal error: no partial file to write")))
            }
            let fd = partial.fd
            var overlap: [UInt8] = []
            do throws(TransferFailure) {
                if get.truncate, ftruncate(fd, off_t(get.offset)) != 0 {
                    let code = errno
                    throw .localIO(path: host.partialPath, operation: "truncate", errno: code)
                }
                if get.offset > 0 { hasher.advance(to: get.offset) }
                if get.overlap > 0 {
                    overlap = try FileSystem.read(fd: fd, path: host.partialPath, at: get.firstByte, count: Int(get.overlap))
                }
            } catch {
                return .download(.notOpened(error))
            }
            writer = makeWriter(order, fd: fd, hasher: hasher, firstByte: get.firstByte, startedFrom: get.startedFrom, overlap: overlap)
        }
        let source = host.sources[order.source]
        var request = TransferRequest(get: source.url, parsed: source.parsed, settings: entry.settings, headers: source.headers, protocols: source.protocols)
        request.rangeFirst = get.asksRange ? get.firstByte : nil
        request.ifRange = get.ifRange
        request.throttle = host.throttle(for: order.source)
        let watched = get.lead ? segmentLead(writer: writer, source: source) : nil
        let requestedAt = MonotonicClock.milliseconds()
        lead = watched.map { Lead(stream: $0, request: request, ticket: writer.progress, source: source, requestedAt: requestedAt) }
        // The stream guard judges the head first: a large body on an HTTP/2 stream needs a
        // connection permit before the lead may split it or the writer take it.
        let guarded = host.streamGuard(watched ?? writer)
        env.fetcher.fetch(request, sink: guarded ?? watched ?? writer, onStart: { [self] in host.transferID = $0 }) { [self] fetched in
            host.transferID = nil
            writer.forgoOpening()
            streamEnded(fetched, writer: writer, watched: watched, needsConnection: guarded?.needsConnection == true, source: source.url)
        }
        if get.opensPartial, !writer.mayHold {
            // Once the turn has sent the request; the reply's head would open it otherwise. A
            // request over by then (stopped by the run's interruption in the same turn) opens
            // nothing: its end forgoes the opening, and an entry ends only after its request
            // has, so no file is made once the entry's end has cleaned up. One refused at once
            // is told so a turn later: its file is made meanwhile, empty, and goes with the
            // failed start.
            let engine = env.fetcher.engine
            engine.afterSends { [weak self] in
                guard writer.waitsToOpen, !writer.openIfWaiting(), let transferID = self?.host.transferID else { return }
                engine.cancel(transferID)
            }
        }
        return nil
    }

    /// A GET into the partial file is over: the machine hears how (the segments, when they
    /// took over the lead, hear it from the machine).
    private func streamEnded(_ fetched: Fetcher.Result, writer: PartialFileWriter, watched: SegmentLead?, needsConnection: Bool,
                             source: RemoteURL) {
        // The GET is over, so its reply can no longer be split: the lead goes. Kept, it would
        // keep this driver alive past the entry's end (its split callback holds the driver),
        // and with it the writer, the hasher and the entry's own driver, about 8 KB for every
        // file a run downloads.
        if let watched, lead?.stream === watched { lead = nil }
        if let segmented = watched?.transfer, segmented.isSegmenting {
            // A late word from a segmented download that is over already: nothing to tell.
            if segmented.isOver { return }
        } else {
            watched?.finished = true
            watched?.transfer?.abandon()
            if let watched, segmented === watched.transfer { segmented = nil }
            writer.progress?.finish()
        }
        // A body held in memory is the attempt's partial file from here: committed as it is, or
        // written to the file when the attempt ends otherwise.
        if writer.holding { host.partial = OpenPartial(holding: writer) }
        var facts = Self.facts(of: fetched, writer: writer, source: source)
        facts.reachedEnd = watched?.reachedEnd ?? false
        facts.needsConnection = needsConnection
        host.deliver(.download(.streamEnded(facts)))
        segmented?.offerSlots()
    }

    /// The entry's GET of the whole file, watched for a reply worth splitting.
    private func segmentLead(writer: PartialFileWriter, source: EntryDriver.Source) -> SegmentLead {
        let url = source.display
        let minimum = env.segmentMin ?? entry.settings.segmentMin
        let pinned = entry.pins.digest != nil
        return SegmentLead(writer: writer, splittable: { head in
            SegmentReply.version(ofLead: head, url: url, segmentMin: minimum, pinned: pinned)
        }, onSplittable: { [weak self] lead, version in
            // Not inside libcurl's callback: the segments start requests. Held weakly: the
            // lead is this driver's own (`lead`), and a strong hold would make a cycle.
            guard let engine = self?.env.fetcher.engine else { return }
            engine.post { [weak self] in
                guard let self, !lead.finished, lead.transfer == nil, host.transferID != nil, !host.run.isCancelled,
                      self.lead?.stream === lead
                else { return }
                host.deliver(.download(.leadSplittable(version, position: lead.position)))
            }
        })
    }

    /// The lead became splittable: the segmented download takes it over (it paces the lead
    /// first, and splits it only when the rest would take long).
    private func startSegmentsFromLead(_ version: SegmentVersion) {
        guard let lead else { return }
        let writer = lead.stream.writer
        // The lead's reply has just begun: how long it waited is what a new stream will.
        let firstByteDelay = Double(MonotonicClock.milliseconds() - lead.requestedAt) / 1000
        let transfer = segmentedTransfer(version, source: lead.source, request: lead.request, fd: writer.fd, hasher: writer.hasher,
                                         ticket: lead.ticket, leadFirstByteDelay: firstByteDelay, leadBytes: { writer.bytesWritten })
        lead.stream.transfer = transfer
        segmented = transfer
        transfer.warmStreamConnections()
    }

    /// Continues a segmented `.part` from its map: the missing ranges, in segments.
    private func resumeSegments(_ version: SegmentVersion) -> EntryMachine.Event? {
        guard let order, let partial = host.partial, let durable = host.downloadMachine?.segments?.durable else {
            return .download(.segmentsReady(false))
        }
        let source = host.sources[order.source]
        let missing = ByteRanges.gaps(in: durable, total: version.total).reduce(0) { $0 + $1.count }
        let ticket = env.progress?.startTransfer(dest: entry.dest, total: missing)
        var request = TransferRequest(get: source.url, parsed: source.parsed, settings: entry.settings, headers: source.headers, protocols: source.protocols)
        request.throttle = host.throttle(for: order.source)
        let transfer = segmentedTransfer(version, source: source, request: request, fd: partial.fd, hasher: partial.hasher,
                                         ticket: ticket, leadBytes: { 0 })
        segmented = transfer
        guard transfer.resume() else {
            segmented = nil
            ticket?.finish()
            return .download(.segmentsReady(false))
        }
        host.deliver(.download(.segmentsReady(true)))
        transfer.offerSlots()
        return nil
    }

    private func segmentedTransfer(
        _ version: SegmentVersion, source: EntryDriver.Source, request: TransferRequest, fd: Int32,
        hasher: TrailingHasher?, ticket: ProgressTicket?, leadFirstByteDelay: Double = 0, leadBytes: @escaping () -> Int64
    ) -> SegmentedTransfer {
        let environment = SegmentedTransfer.Environment(
            dest: entry.dest, paths: paths, fd: fd, hasher: hasher, request: request, fetcher: env.fetcher, slots: env.slots,
            limitedHost: source.limitedHost, blocking: env.blocking, store: store, rootDirectory: env.rootDirectory,
            durable: env.durable, progress: ticket, politeness: host.run.segmentPoliteness,
            host: source.host?.description ?? "", onStoreProblem: env.storeWriteFailed,
            stopLead: { [weak self] in
                guard let self, let transferID = host.transferID else { return }
                env.fetcher.engine.cancel(transferID)
            },
            machine: { [unowned host] in host.downloadMachine?.segments },
            deliver: { [unowned host] in host.deliver(.download(.segments($0))) },
            ready: { [unowned host] in host.deliver(.download(.segmentsReady($0))) })
        // The transfer is this driver's own (`segmented`): its callbacks hold the driver weakly,
        // so that no way of ending it can leave the two holding each other.
        return SegmentedTransfer(version: version, environment: environment, leadFirstByteDelay: leadFirstByteDelay) { [weak self] transfer, end in
            ticket?.finish()
            guard let self else { return }
            if segmented === transfer { segmented = nil }
            host.deliver(.download(.segmentsEnded(end, leadBytes: leadBytes())))
        }
    }

    /// The run is interrupted: the segments stop (the entry stops its own request).
    func cancel() {
        segmented?.cancel()
    }

    /// How a GET ended, as its writer and the transport saw it.
    private static func facts(of fetched: Fetcher.Result, writer: PartialFileWriter, source: RemoteURL) -> DownloadMachine.StreamFacts {
        let head = writer.head.map { EntryMachine.ResponseHeadSummary(etag: $0.etag, lastModified: $0.lastModified, isChunked: $0.isChunked) }
        let transport = fetched.outcome.transportFailure
        return DownloadMachine.StreamFacts(
            refused: fetched.redirectFailure ?? writer.failure, transport: transport, reportedTransport: transport?.redactingHost(of: source),
            head: head, placement: writer.placement, position: writer.position, bytes: writer.bytesWritten)
    }

    /// Whether `order`'s body may be held in memory (`PartialFileWriter`): only where the store
    /// has no partial record for `DEST`, which a partial file left by a crash during the commit
    /// would then be read with, and no partial file is left to start over (`restart`: the GET
    /// empties it once it is sent, as before).
    static func mayHold(_ order: EntryMachine.TransferOrder) -> Bool {
        guard !order.hadPartialRecord, order.offset == 0 else { return false }
        switch order.action {
        case .download, .replace: return true
        default: return false
        }
    }

    /// The writer of a new file's body (or a new version's), from its first byte into a partial
    /// file still to be made (emptied) by the writer, or by the group commit for a short body
    /// it holds (`mayHold`). It holds its driver weakly: the driver may keep the writer.
    private func makeNewFileWriter(_ order: EntryMachine.TransferOrder) -> PartialFileWriter {
        makeWriter(order, fd: -1, hasher: nil, firstByte: 0, startedFrom: nil, overlap: [], holds: Self.mayHold(order)) { [weak self] () throws(TransferFailure) in
            guard let self else { throw .cancelled }
            return try openPartial(truncate: true)
        }
    }

    /// The writer of `order`'s body into the open partial file, from `firstByte`, with its
    /// progress ticket and the store's record of the version it starts. With `holds`, a new
    /// file's short body may be held in memory (`mayHold`).
    private func makeWriter(
        _ order: EntryMachine.TransferOrder, fd: Int32, hasher: TrailingHasher?, firstByte: Int64, startedFrom: RemoteValidators?, overlap: [UInt8],
        holds: Bool = false, opener: (() throws(TransferFailure) -> (fd: Int32, hasher: TrailingHasher))? = nil
    ) -> PartialFileWriter {
        let ticket = env.progress?.startTransfer(dest: entry.dest, total: order.remote?.size.map { $0 - order.offset })
        return PartialFileWriter(
            fd: fd, path: host.partialPath, requestedOffset: firstByte, expectedTotal: order.remote?.size,
            pinnedSize: entry.size, maxSize: entry.settings.maxSize, hasher: hasher, progress: ticket,
            startedFrom: startedFrom, overlap: overlap,
            onStart: TransferStartRecord(
                store: store, dest: entry.dest, url: host.sources[order.source].display, paths: paths, rootDirectory: env.rootDirectory,
                continuingRecord: order.startedFrom != nil, hadPartialRecord: order.hadPartialRecord
            ).write,
            opener: opener,
            holdLimit: holds ? PartialFileWriter.defaultHoldLimit : 0
        )
    }

    // MARK: The conditional GET

    /// The machine wants the conditional GET's body (`receiveBody`), or not (nil).
    func wantBody(_ order: EntryMachine.TransferOrder?) {
        bodyOrder = order
    }

    /// One GET of the file on the condition that it is not the version `recorded` names. Its
    /// reply's head goes to the machine (`replied`) before any body byte, on the engine's
    /// thread; the partial file is opened only when the machine wants the body (`receiveBody`),
    /// so a 304, or a 200 of the version already on disk, writes nothing. Its end is told as
    /// `streamEnded` when the body was taken, else as `transferEnded`.
    func conditionalGet(_ index: Int, ifNoneOf recorded: RemoteValidators) {
        let source = host.sources[index]
        let throttle = host.throttle(for: index)
        var request = TransferRequest(get: source.url, parsed: source.parsed, settings: entry.settings, headers: source.headers, protocols: source.protocols)
        request.ifNoneMatch = recorded.etag
        // Most such requests are answered 304; a new version is most often about as long.
        request.expectedBody = recorded.size
        request.throttle = throttle
        conditionalWriter = nil
        conditionalLead = nil
        // Sent just below, once its sink is made.
        let requestedAt = MonotonicClock.milliseconds()
        let sink = ConditionalBodySink { [self] head throws(TransferFailure) -> (any ResponseBodySink)? in
            bodyOrder = nil
            switch ConditionalReply.judge(head, recorded: recorded) {
            case .facts(let facts): host.deliver(.replied(facts))
            case .inconclusive: host.deliver(.repliedInconclusively)
            }
            guard let order = bodyOrder else { return nil }
            bodyOrder = nil
            // The body is wanted: its download begins, and says whether it may lead segments.
            bodyTakenAsLead = nil
            self.order = order
            host.deliver(.download(.begin(surroundings(of: order))))
            guard let asLead = bodyTakenAsLead else { return nil }
            bodyTakenAsLead = nil
            // Opened (emptied) at the head the writer is given next, unless the body is held.
            let body = makeNewFileWriter(order)
            conditionalWriter = body
            guard asLead else { return body }
            let leading = segmentLead(writer: body, source: source)
            conditionalLead = leading
            // The range requests of the other segments ask for this version only (`If-Match`),
            // not on the condition this GET carried.
            var template = TransferRequest(get: source.url, parsed: source.parsed, settings: entry.settings, headers: source.headers, protocols: source.protocols)
            template.throttle = throttle
            lead = Lead(stream: leading, request: template, ticket: body.progress, source: source, requestedAt: requestedAt)
            return leading
        }
        // Guarded before the machine hears the head: a large body is not judged until the
        // attempt holds a connection permit, and a 304 or an error page passes at once.
        let guarded = host.streamGuard(sink)
        env.fetcher.fetch(request, sink: guarded ?? sink, onStart: { [self] in host.transferID = $0 }) { [self] fetched in
            host.transferID = nil
            if guarded?.needsConnection == true {
                return host.sendAgainOnAConnection { [self] in conditionalGet(index, ifNoneOf: recorded) }
            }
            if let writer = conditionalWriter {
                // Let go: the writer holds what opens its file (this driver), and may hold the body.
                conditionalWriter = nil
                let watched = conditionalLead
                conditionalLead = nil
                return streamEnded(fetched, writer: writer, watched: watched, needsConnection: false, source: source.url)
            }
            if let failure = fetched.redirectFailure ?? sink.failure ?? fetched.outcome.transportFailure?.redactingHost(of: source.url) {
                return host.deliver(.transferEnded(.failed(failure, bytes: 0)))
            }
            host.deliver(.transferEnded(sink.head == nil ? .noResponse(bytes: 0) : .abandoned))
        }
    }
}

/// The partial file of the attempt in progress, open from the transfer (or the finishing
/// hash) until it is committed or the attempt ends.
final class OpenPartial: @unchecked Sendable {
    let fd: Int32
    let hasher: TrailingHasher?
    /// The writer that holds the whole body in memory, the file not made (`fd` -1): the commit
    /// writes it, or `EntryDriver.closePartial` puts it in the file.
    let holder: PartialFileWriter?
    var committed = false

    init(fd: Int32, hasher: TrailingHasher?) {
        self.fd = fd
        self.hasher = hasher
        holder = nil
    }

    init(holding writer: PartialFileWriter) {
        fd = -1
        hasher = nil
        holder = writer
    }

    /// The body held in memory, when it is.
    var heldBody: [UInt8]? { holder?.heldBody }

    /// A body held in memory is done with (committed, or its file removed): let go, and never
    /// written to the partial file.
    func releaseHeld() {
        guard let holder else { return }
        committed = true
        holder.release()
    }

    func close() {
        if !committed {
            hasher?.abandon()
            if fd >= 0 { _ = Glibc.close(fd) }
        }
        committed = true
    }
}
