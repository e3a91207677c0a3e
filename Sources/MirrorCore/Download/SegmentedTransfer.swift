import CLinux
import Glibc

/// Carries out a `SegmentedDownload` on the transfer engine's thread: starts each stream's
/// range request (`If-Match`/`If-Unmodified-Since`, a connection of its own) into its
/// `RangeSink`, takes extra transfer slots only when no entry waits for one, `fdatasync`s the
/// `.part` on the run's blocking pool before the map that claims its bytes is recorded, and
/// tells the entry how the download ended, as `EntryMachine.TransferEnd`. Decides nothing.
///
/// The machine is not its own: it is the segmented shape of the entry's `DownloadMachine`.
/// Events go there (`Environment.deliver`), and the effects come back (`perform(_:)`) through
/// `DownloadDriver`.
///
/// Touched only on the engine's thread (hence `@unchecked Sendable`).
final class SegmentedTransfer: @unchecked Sendable {
    /// What it works with, from the entry's driver.
    struct Environment {
        let dest: String
        let paths: DestinationPaths
        let fd: Int32
        let hasher: TrailingHasher?
        /// A GET of the source with the entry's settings and headers; each range is one of it.
        let request: TransferRequest
        let fetcher: Fetcher
        let slots: TransferSlots
        let limitedHost: String?
        let blocking: BlockingPool
        let store: StateStore?
        let rootDirectory: RootDirectory
        let durable: Bool
        let progress: ProgressTicket?
        let politeness: SegmentPoliteness
        /// The host politeness is kept for.
        let host: String
        let onStoreProblem: (String) -> Void
        /// Stops the lead's request (the entry's own); its end is then not reported.
        let stopLead: () -> Void
        /// The segmented download as it stands (nil once the entry's download is over).
        let machine: () -> SegmentedDownload?
        /// Hands an event to the machine; its effects come back to `perform(_:)` at once.
        let deliver: (SegmentedDownload.Event) -> Void
        /// Tells the machine whether the map is recorded and the file allocated, from the
        /// fresh shape's `startSegments` on (its effects, if any, come back as above).
        let ready: (Bool) -> Void
    }

    let version: SegmentVersion
    private let environment: Environment
    private var transfers: [Int: UInt64] = [:]
    private var sinks: [Int: RangeSink] = [:]
    private var slots: [Int: TransferSlots.Slot] = [:]
    private var offered: TransferSlots.Slot?
    private var over = false
    /// The map is recorded and the download is in segments: its end is this object's to tell.
    private(set) var isSegmenting = false
    /// When the last checkpoint began (the download's start before the first).
    private var lastCheckpoint = MonotonicClock.milliseconds()
    /// When the lead's pace began to be measured, and where it was then.
    private let pacedFrom: (milliseconds: Int64, position: Int64)
    /// How long the lead's request waited for its reply (seconds; 0: not known): the first
    /// split gives the lead what it brings in while new streams wait as long.
    private let leadFirstByteDelay: Double
    /// The streams' connections were opened with the transfer (`warmStreamConnections`), when
    /// the lead's pace began to be measured.
    private var streamsWarmed = false
    private let onEnd: (SegmentedTransfer, EntryMachine.TransferEnd) -> Void
    /// Body bytes the range requests wrote (the lead's are counted by its writer).
    private(set) var bytes: Int64 = 0
    private let head: EntryMachine.ResponseHeadSummary

    /// Bytes between two progress reports of a stream to the machine.
    static let reportEvery: Int64 = 1 << 20

    init(version: SegmentVersion, environment: Environment, leadFirstByteDelay: Double = 0,
         onEnd: @escaping (SegmentedTransfer, EntryMachine.TransferEnd) -> Void) {
        self.version = version
        self.environment = environment
        self.leadFirstByteDelay = leadFirstByteDelay
        self.onEnd = onEnd
        head = EntryMachine.ResponseHeadSummary(etag: version.etag, lastModified: version.lastModified)
        pacedFrom = (MonotonicClock.milliseconds(), environment.machine()?.streams[0]?.position ?? 0)
    }

    /// Where the lead (stream 0 of a fresh download) stops.
    var leadEnd: Int64? { environment.machine()?.end(of: 0) }

    /// A resumed download: records the map and allocates the file; the machine, told so
    /// (`segmentsReady`), then sets the streams going. False (nothing started) when the map
    /// cannot be recorded.
    func resume() -> Bool {
        guard recordMapAndAllocate() else { return false }
        isSegmenting = true
        return true
    }

    /// Before the first byte out of order: the map that says which bytes are written, and the
    /// file at its full size. False when the map cannot be recorded: a `.part` written out of
    /// order without one could be taken by its size.
    private func recordMapAndAllocate() -> Bool {
        guard let store = environment.store else { return false }
        do {
            try store.saveSegmentMap(SegmentMap(version: version, durable: environment.machine()?.durable ?? []), for: environment.dest)
        } catch {
            environment.onStoreProblem("writing the segment map of \(environment.dest): \(error)")
            return false
        }
        allocate()
        return true
    }

    /// `fallocate`, so the segments' writes find their blocks; sparse (`ftruncate`) where the
    /// file system cannot.
    private func allocate() {
        if mirror_allocate(environment.fd, version.total) != 0 {
            _ = ftruncate(environment.fd, off_t(version.total))
        }
    }

    /// The run is interrupted: every request stops, and the download ends as cancelled.
    func cancel() {
        guard isSegmenting, !over else { return }
        finish(.failed(.cancelled, bytes: bytes))
    }

    /// Whether the download has ended (and said so).
    var isOver: Bool { over }

    /// The lead ended while it was still paced, as a plain download whose end the entry hears
    /// as any: nothing more is done here.
    func abandon() {
        guard !isSegmenting else { return }
        over = true
    }

    /// The lead's head showed a file worth splitting: the connections of the streams a split
    /// would start (one for each slot `postLeadPace` could take now) are opened while the lead
    /// is paced, where the run's early connections went to its origin, so that the split's
    /// requests go out without waiting for a handshake.
    func warmStreamConnections() {
        guard environment.request.proxy == nil, let host = HostKey(url: environment.request.url),
              let machine = environment.machine() else { return }
        let idle = environment.slots.idleCount(host: environment.limitedHost, limit: machine.limits.maxStreams - 1)
        streamsWarmed = environment.fetcher.engine.warm(host: host.host, port: host.port, count: idle) > 0
    }

    // MARK: Events

    /// The lead running alone has received `position` bytes (from inside libcurl's callback:
    /// posted): its pace so far says how long the rest would take on it alone.
    func postLeadPace(_ position: Int64) {
        let now = MonotonicClock.milliseconds()
        let elapsed = now - pacedFrom.milliseconds
        let firstByteDelay = Self.streamFirstByteDelay(lead: leadFirstByteDelay, warmedFor: streamsWarmed ? Double(elapsed) / 1000 : nil)
        let done = position - pacedFrom.position
        let secondsLeft = done > 0 ? Double(version.total - position) * Double(max(1, elapsed)) / 1000 / Double(done) : .infinity
        // Only the pace: the bytes received may still be in the writer's buffer, and a position
        // given to the machine must be on the file (a checkpoint would record it).
        environment.fetcher.engine.post { [self] in
            guard !over, !isSegmenting, let machine = environment.machine() else { return }
            // With no slot free, a split would gain nothing yet: no map, no allocation.
            guard let slot = environment.slots.acquireIfIdle(host: environment.limitedHost) else { return }
            // Every slot free now, so that the first split is planned for all of them at once.
            var idle = [slot]
            while idle.count < machine.limits.maxStreams - 1, let more = environment.slots.acquireIfIdle(host: environment.limitedHost) {
                idle.append(more)
            }
            environment.deliver(.leadPaced(secondsLeft: secondsLeft, slots: idle.count, firstByteDelay: firstByteDelay))
            for slot in idle {
                guard isSegmenting, !over else {
                    slot.release()
                    continue
                }
                offered = slot
                environment.deliver(.slotOffered)
                offered?.release()
                offered = nil
            }
            offerSlots()
        }
    }

    /// How long a stream started now waits for its first byte (seconds), from how long the
    /// lead's request waited (a handshake and a round trip on a new connection) and, when the
    /// streams' connections were opened `warmedFor` seconds ago, what of the handshake is over:
    /// at least half the lead's wait, the request's own round trip.
    static func streamFirstByteDelay(lead: Double, warmedFor: Double?) -> Double {
        guard let warmedFor, warmedFor > 0 else { return lead }
        return max(lead / 2, lead - warmedFor)
    }

    /// The lead, one stream of several, has written up to `position` (posted, as above).
    func postLeadProgress(_ position: Int64) {
        environment.fetcher.engine.post { [self] in deliver(.progressed(stream: 0, from: 0, position: position)) }
    }

    private func deliver(_ event: SegmentedDownload.Event) {
        guard !over else { return }
        environment.deliver(event)
        if case .progressed = event, isSegmenting, !over,
           MonotonicClock.milliseconds() - lastCheckpoint >= SegmentedDownload.Limits.checkpointInterval.milliseconds {
            environment.deliver(.checkpointDue)
        }
        offerSlots()
    }

    /// Takes each free slot the download can use now, one at a time.
    func offerSlots() {
        var tries = 0
        while !over, isSegmenting, let machine = environment.machine(), machine.wantsStream, tries < machine.limits.maxStreams,
              let slot = environment.slots.acquireIfIdle(host: environment.limitedHost) {
            tries += 1
            offered = slot
            environment.deliver(.slotOffered)
            offered?.release()
            offered = nil
        }
    }

    /// Carries out one effect of the machine.
    func perform(_ effect: SegmentedDownload.Effect) {
        switch effect {
        case .startSegments:
            // Without a map the lead just goes on alone, as any download.
            isSegmenting = recordMapAndAllocate()
            environment.ready(isSegmenting)
        case .request(let stream, let first, let last):
            if let slot = offered {
                slots[stream] = slot
                offered = nil
            }
            request(stream, first: first, last: last)
        case .stop(let stream):
            stop(stream)
        case .releaseSlot(let stream):
            slots.removeValue(forKey: stream)?.release()
        case .declineSlot:
            offered?.release()
            offered = nil
        case .checkpoint:
            checkpoint()
        case .recordMap(let durable):
            guard let store = environment.store else { break }
            do {
                try store.saveSegmentMap(SegmentMap(version: version, durable: durable), for: environment.dest)
            } catch {
                environment.onStoreProblem("writing the segment map of \(environment.dest): \(error)")
            }
        case .foldHost:
            environment.politeness.fold(environment.host)
        case .advanceHash(let position):
            environment.hasher?.advance(to: position)
        case .complete:
            // Every byte is on disk: the file is a plain complete `.part` now.
            removeMap()
            finish(.written(position: version.total, total: version.total, bytes: bytes, restartedFromZero: false, head: head))
        case .fail(let failure, let discard):
            for stream in Array(transfers.keys) { stop(stream) }
            if discard {
                removeMap()
                environment.rootDirectory.removePartial(environment.paths)
            }
            finish(.failed(failure, bytes: bytes))
        }
    }

    private func finish(_ end: EntryMachine.TransferEnd) {
        guard !over else { return }
        over = true
        for stream in Array(transfers.keys) { stop(stream) }
        environment.stopLead()
        for slot in slots.values { slot.release() }
        slots = [:]
        onEnd(self, end)
    }

    private func removeMap() {
        do {
            try environment.store?.removeSegmentMap(for: environment.dest)
        } catch {
            environment.onStoreProblem("removing the segment map of \(environment.dest): \(error)")
        }
    }

    private func stop(_ stream: Int) {
        sinks.removeValue(forKey: stream)?.stopped = true
        if let id = transfers.removeValue(forKey: stream) {
            environment.fetcher.engine.cancel(id)
        } else if stream == 0 {
            environment.stopLead()
        }
    }

    private func request(_ stream: Int, first: Int64, last: Int64) {
        var request = environment.request
        request.rangeFirst = first
        request.rangeLast = last
        request.ifRange = nil
        request.ownConnection = true
        if let precondition = version.precondition { request.headers.append(precondition) }
        let sink = RangeSink(stream: stream, first: first, last: last, transfer: self)
        sinks[stream] = sink
        environment.fetcher.fetch(request, sink: sink, onStart: { [self] id in
            if sinks[stream] === sink { transfers[stream] = id }
        }) { [self] fetched in
            guard sinks[stream] === sink, !sink.stopped else { return }
            sinks[stream] = nil
            transfers[stream] = nil
            deliver(.streamEnded(stream: stream, Self.end(of: fetched, sink: sink), position: sink.position))
        }
    }

    private static func end(of fetched: Fetcher.Result, sink: RangeSink) -> SegmentedDownload.StreamEnd {
        if sink.reachedEnd { return .reachedEnd }
        if let verdict = sink.verdict, case .end(let end) = verdict { return end }
        if let failure = sink.failure { return .failed(failure) }
        if let failure = fetched.redirectFailure { return .failed(failure) }
        if let failure = fetched.outcome.transportFailure { return DownloadMachine.streamEnd(after: failure) }
        if sink.position >= sink.last + 1 { return .reachedEnd }
        return .failed(.partialBody(received: sink.position - sink.first, expected: sink.last + 1 - sink.first))
    }

    private func checkpoint() {
        lastCheckpoint = MonotonicClock.milliseconds()
        guard environment.durable else { return deliver(.checkpointed) }
        let fd = environment.fd
        let path = environment.paths.partial
        let engine = environment.fetcher.engine
        environment.blocking.submit { [self] in
            let failed = fdatasync(fd) != 0 ? errno : 0
            engine.post { [self] in
                deliver(failed == 0 ? .checkpointed : .checkpointFailed(.localIO(path: path, operation: "fdatasync", errno: failed)))
            }
        }
    }

    // MARK: Range requests

    /// A stream's bytes arrived: written at their offset.
    fileprivate func wrote(_ stream: Int, from first: Int64, count: Int64, reportedAt: inout Int64, position: Int64) {
        bytes += count
        environment.progress?.add(count)
        if position - reportedAt >= Self.reportEvery {
            reportedAt = position
            // Not from inside libcurl's callback: the machine may start or stop requests.
            environment.fetcher.engine.post { [self] in deliver(.progressed(stream: stream, from: first, position: position)) }
        }
    }

    fileprivate func end(of stream: Int) -> Int64? { environment.machine()?.end(of: stream) }

    fileprivate var fd: Int32 { environment.fd }
    fileprivate var path: String { environment.paths.partial }
}

/// Receives one range request's reply: written at its offset only when `SegmentReply.judge`
/// says it is the range asked, of the version; stopped at the stream's end, which a split may
/// have moved closer.
final class RangeSink: ResponseBodySink, @unchecked Sendable {
    let stream: Int
    let first: Int64
    let last: Int64
    private unowned let transfer: SegmentedTransfer
    private(set) var position: Int64
    private(set) var verdict: SegmentReply.Verdict?
    private(set) var failure: TransferFailure?
    private(set) var reachedEnd = false
    /// Stopped by the download: nothing more is written.
    var stopped = false
    private var reportedAt: Int64

    fileprivate init(stream: Int, first: Int64, last: Int64, transfer: SegmentedTransfer) {
        self.stream = stream
        self.first = first
        self.last = last
        self.transfer = transfer
        position = first
        reportedAt = first
    }

    func begin(_ head: ResponseHead) -> BodyDisposition {
        let verdict = SegmentReply.judge(head, first: first, last: last, version: transfer.version)
        self.verdict = verdict
        if verdict == .write { return .write }
        return head.isSuccess ? .abort : .discard
    }

    func write(_ incoming: UnsafeRawBufferPointer) -> Bool {
        guard !stopped, verdict == .write, let end = transfer.end(of: stream) else { return false }
        let room = end - position
        if room <= 0 {
            reachedEnd = true
            return false
        }
        let bytes = incoming.count > room ? UnsafeRawBufferPointer(rebasing: incoming[0..<Int(room)]) : incoming
        do {
            try FileSystem.write(bytes, to: transfer.fd, at: position, path: transfer.path)
        } catch {
            failure = error
            return false
        }
        position += Int64(bytes.count)
        transfer.wrote(stream, from: first, count: Int64(bytes.count), reportedAt: &reportedAt, position: position)
        if position >= end {
            reachedEnd = true
            // The rest of the range is another stream's now: stop here. A whole range ends
            // with its body.
            return end > last
        }
        return true
    }
}
