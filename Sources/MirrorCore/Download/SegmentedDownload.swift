/// One large file fetched over several connections at once, as a state machine: which range
/// each connection (a *stream*) fetches, when a free transfer slot splits the largest range
/// still to come (work stealing), when the bytes written are made durable and recorded, and
/// how the download ends. `handle(_:)` takes what happened and returns what to do; it does no
/// I/O, reads no clock and draws no random number (`SegmentedDownloadTests` is its table).
/// `SegmentedTransfer` carries out the effects on the transfer engine's thread.
///
/// Two shapes start it:
/// - `fresh`: the entry's plain GET (stream 0, the *lead*) answered 200 with a size of at least
///   `segment_min` and a version that range requests can name; it goes on from byte 0 alone
///   until its pace shows the rest would take long enough (`leadPaced`), then every slot
///   offered takes a piece of what it has not reached yet.
/// - `resumed`: a `.part` whose map (`SegmentMap`) says which ranges are on disk; stream 0
///   (on the entry's slot) fetches the largest missing range, further slots the others.
///
/// Rules it owns:
/// - a stream is never split into pieces under `minPiece` bytes, and at most `maxStreams` run;
/// - the slots free when the lead is paced share what it has not reached in pieces that grow
///   by a step in the file's order (`firstSplit`), so that they complete one after another;
/// - a stream that reaches the end of its range takes the largest range no one fetches, else
///   splits the largest one still running; an extra slot with nothing to take is given back;
/// - every `checkpointBytes` written (and at the end) the file is made durable and only then
///   are the ranges written before it recorded: a crash loses at most that much, and a range
///   is never recorded before its bytes are on disk;
/// - a sign of another version ends every stream and discards the `.part` with its map;
///   a refusal that asks for politeness (`fold`) lets no further stream start for the run;
/// - when no stream runs and bytes are missing, the download fails and keeps what it recorded.
struct SegmentedDownload: Equatable {
    struct Limits: Equatable {
        var maxStreams = 16
        /// No stream is given a range shorter than this by a split.
        var minPiece: Int64 = 1 << 20
        /// Bytes written between two `fdatasync`s of the file (and records of the map).
        var checkpointBytes: Int64 = 32 << 20
        /// The lead is split only when, at its pace so far, it still has this long to go (where
        /// new streams would start quickly; see `minSecondsLeftFar`): a file that one connection
        /// brings in a moment gains nothing from more, and its digest would wait for the ranges
        /// after the lead's.
        var minSecondsLeft = 2.0
        /// Where a new stream would wait at least `farFirstByteDelay` for its first byte (as the
        /// lead's own wait says: the handshakes and the server's answer, so a long round trip, or
        /// a slow server), `minSecondsLeftFar` is enough: over a long round trip a connection's
        /// window bounds its pace, so more connections bring more, while a stream's start costs
        /// only that wait. Through a link with an 80 ms round trip a 256 MiB lead had about 1.4 s
        /// left at its pace and stayed one stream in 2 runs of 8 under `minSecondsLeft` (1.49 s;
        /// only a pace taken in a lull said 2 s); with this rule it split in 8 of 8 (0.91-1.23 s).
        var minSecondsLeftFar = 0.5
        var farFirstByteDelay = 0.02

        /// How long the lead must still have to go, at its pace, to be split, for streams that
        /// wait `firstByteDelay` seconds for their first byte.
        func minSecondsLeft(firstByteDelay: Double) -> Double {
            firstByteDelay >= farFirstByteDelay ? min(minSecondsLeft, minSecondsLeftFar) : minSecondsLeft
        }
        /// The pace the digest is read back and hashed at, in bytes a second, for the first
        /// split (`firstSplit`): OpenSSL's SHA-256 on one core here, 1.4 to 1.8 GB/s with the
        /// read back.
        var hashRate = 2.0e9
        /// The first split's step, at most this share of the mean piece: the last piece is
        /// then at most 1.75 % longer than the mean at 8 streams, what a link the lead's pace
        /// misjudges can lose.
        var maxStepShare = 0.005
        /// The lead's head start in the first split (`firstSplit`), at most this share of the
        /// mean piece: a first byte that was slow for a reason of its own (a server that took
        /// long to answer) does not leave the lead most of the file.
        var maxHeadStartShare = 0.25
        /// A checkpoint at least this often while bytes come in, however slowly.
        static let checkpointInterval: Duration = .seconds(5)

        /// For a file of `total` bytes: a checkpoint every eighth of it, from 1 MiB to 32 MiB.
        static func forFile(of total: Int64) -> Limits {
            Limits(checkpointBytes: min(32 << 20, max(1 << 20, total / 8)))
        }
    }

    /// How a stream's request ended.
    enum StreamEnd: Equatable {
        /// It wrote its whole range (and was stopped there).
        case reachedEnd
        /// A failure that leaves the version as it is (a reset connection, a 500, a full disk).
        case failed(TransferFailure)
        /// As `failed`, and the host asked for fewer connections (a 429, a 503, a reset, a
        /// range answered with the whole file): no further stream starts in this run.
        case fold(TransferFailure)
        /// The server has another version now (a 412, another total or validator).
        case versionChanged(String)
    }

    enum Event: Equatable {
        /// At the lead's pace so far, it would need this long for the rest of the file; `slots`
        /// extra slots are held now, each offered next (`slotOffered`). `firstByteDelay`: how
        /// long the lead's own request waited for its first byte (seconds), what a stream that
        /// starts now is expected to wait too while the lead goes on (`firstSplit`).
        case leadPaced(secondsLeft: Double, slots: Int = 0, firstByteDelay: Double = 0)
        /// An extra transfer slot is held for this download.
        case slotOffered
        /// `stream` has written its range from `from` up to `position` (exclusive). `from` names
        /// the range the stream was asked for: progress is posted, and may arrive after the
        /// stream ended and was given its next range (the same id), so it counts only while the
        /// stream still writes the range it came from.
        case progressed(stream: Int, from: Int64, position: Int64)
        /// `stream`'s request is over, having written up to `position`.
        case streamEnded(stream: Int, StreamEnd, position: Int64)
        /// The `checkpoint` asked for is done: the bytes written before it are on disk.
        case checkpointed
        case checkpointFailed(TransferFailure)
        /// `checkpointInterval` has passed since the last checkpoint began.
        case checkpointDue
    }

    enum Effect: Equatable {
        /// The lead is worth splitting: record the map (before any byte out of order),
        /// allocate the file, and offer slots from now on.
        case startSegments
        /// Start (or go on with) `stream`: a range request for bytes `first...last`.
        case request(stream: Int, first: Int64, last: Int64)
        /// Stop `stream`'s request now; its end is not reported.
        case stop(stream: Int)
        /// Give back the extra slot `stream` held.
        case releaseSlot(stream: Int)
        /// Give back the slot just offered: nothing is worth a new stream.
        case declineSlot
        /// `fdatasync` the file; answers `checkpointed` or `checkpointFailed`.
        case checkpoint
        /// Record these ranges as the map's durable ones.
        case recordMap([ByteRange])
        /// No more than one stream to this host for the rest of the run.
        case foldHost
        /// Bytes up to here are written without a gap: the digest may read them.
        case advanceHash(to: Int64)
        /// Every byte is written and durable.
        case complete
        /// The download is over without the whole file: `discard` when the `.part` and its map
        /// are of another version than the server's and must go.
        case fail(TransferFailure, discard: Bool)
    }

    enum Phase: Equatable {
        /// Fresh shape: the lead runs alone, as a plain download, until its pace shows that
        /// splitting is worth it (`leadPaced`); no map, no checkpoint.
        case pacing
        case running
        /// Every byte is written; the last checkpoint is under way.
        case finishing
        case completed
        case failed
    }

    struct Stream: Equatable {
        var first: Int64
        var position: Int64
        var end: Int64
        /// Holds a slot of its own (not the entry's), given back when it stops.
        var extraSlot: Bool
        /// The entry's plain GET of the whole file: a 200 from byte 0, whose end can grow back.
        var isLead: Bool
    }

    let total: Int64
    let limits: Limits
    /// Whether the entry may start over once more after a change of version (it has not yet):
    /// the failure then asks for that restart; otherwise the remote is unstable.
    let mayRestart: Bool
    private(set) var phase: Phase = .running
    /// Running streams by id.
    private(set) var streams: [Int: Stream] = [:]
    /// Ranges fully written by streams that moved on or ended (not durable yet, perhaps).
    private(set) var written: [ByteRange]
    /// Ranges recorded in the map.
    private(set) var durable: [ByteRange]
    private(set) var folded: Bool
    private var nextStream = 1
    private var sinceCheckpoint: Int64 = 0
    /// The ranges a checkpoint under way will make durable.
    private var pendingCheckpoint: [ByteRange]?
    /// Why the download fails once the checkpoint under way is done.
    private var failing: TransferFailure?
    private var hashedTo: Int64 = 0
    /// The first split, planned when the lead was paced (`firstSplit`): where the lead is to
    /// stop, applied as the first slot is offered, and the pieces the offered slots take.
    private var plannedLeadEnd: Int64?
    private var plannedPieces: [ByteRange] = []

    /// The entry's GET of the whole file is under way as stream 0 and has written `position`.
    static func fresh(total: Int64, leadPosition: Int64, folded: Bool = false, mayRestart: Bool = true, limits: Limits? = nil) -> SegmentedDownload {
        var download = SegmentedDownload(total: total, durable: [], folded: folded, mayRestart: mayRestart, limits: limits ?? .forFile(of: total))
        download.phase = .pacing
        download.streams[0] = Stream(first: 0, position: leadPosition, end: total, extraSlot: false, isLead: true)
        return download
    }

    /// A `.part` with `durable` on disk; `start()` sets stream 0 going.
    static func resumed(total: Int64, durable: [ByteRange], folded: Bool = false, mayRestart: Bool = true, limits: Limits? = nil) -> SegmentedDownload {
        SegmentedDownload(total: total, durable: ByteRanges.merged(durable), folded: folded, mayRestart: mayRestart, limits: limits ?? .forFile(of: total))
    }

    private init(total: Int64, durable: [ByteRange], folded: Bool, mayRestart: Bool, limits: Limits) {
        self.mayRestart = mayRestart
        self.total = total
        self.durable = durable
        self.written = durable
        self.folded = folded
        self.limits = limits
    }

    // MARK: Queries (for the driver, on the same thread)

    /// Where `stream` must stop writing: its range may have been cut short by a split.
    func end(of stream: Int) -> Int64? { streams[stream]?.end }

    /// Whether an extra slot would be used now.
    var wantsStream: Bool {
        phase == .running && !folded && streams.count < limits.maxStreams && (bestPiece != nil)
    }

    /// Every byte written so far, running streams included: what a checkpoint makes durable.
    var writtenRanges: [ByteRange] {
        ByteRanges.merged(written + streams.values.map { ByteRange($0.first, $0.position) })
    }

    // MARK: Transitions

    /// Resumed shape only: stream 0, on the entry's slot, takes the largest missing range.
    mutating func start() -> [Effect] {
        guard phase == .running, streams.isEmpty else { return [] }
        if ByteRanges.covers(written, total: total) {
            // Everything was recorded before the crash: only the file's digest is left.
            phase = .finishing
            pendingCheckpoint = written
            return [.advanceHash(to: total), .checkpoint]
        }
        var effects = advanceHash()
        effects += assign(stream: 0, extraSlot: false)
        return effects
    }

    mutating func handle(_ event: Event) -> [Effect] {
        switch event {
        case .leadPaced(let secondsLeft, let slots, let firstByteDelay):
            guard phase == .pacing, secondsLeft >= limits.minSecondsLeft(firstByteDelay: firstByteDelay) else { return [] }
            phase = .running
            if let lead = streams[0], slots > 0 {
                let pieces = Self.firstSplit(
                    from: lead.position, to: total, streams: 1 + min(slots, limits.maxStreams - 1),
                    bytesPerSecond: Double(total - lead.position) / secondsLeft, firstByteDelay: firstByteDelay, limits: limits)
                if pieces.count > 1 {
                    plannedLeadEnd = pieces[0].end
                    plannedPieces = Array(pieces.dropFirst())
                }
            }
            return [.startSegments]

        case .slotOffered:
            guard wantsStream else { return [.declineSlot] }
            let id = nextStream
            nextStream += 1
            return assign(stream: id, extraSlot: true)

        case .progressed(let id, let from, let position):
            guard phase == .running || phase == .pacing, var stream = streams[id], stream.first == from,
                  position > stream.position
            else { return [] }
            if phase == .pacing {
                // Nothing is recorded yet: the lead is a plain download.
                stream.position = min(position, stream.end)
                streams[id] = stream
                return []
            }
            sinceCheckpoint += position - stream.position
            stream.position = min(position, stream.end)
            streams[id] = stream
            var effects = advanceHash()
            if sinceCheckpoint >= limits.checkpointBytes, pendingCheckpoint == nil {
                effects += startCheckpoint()
            }
            return effects

        case .streamEnded(let id, let end, let position):
            // While pacing the lead's end is the entry's own, not the machine's.
            guard phase != .pacing, var stream = streams.removeValue(forKey: id) else { return [] }
            stream.position = max(stream.position, min(position, stream.end))
            written = ByteRanges.merged(written + [ByteRange(stream.first, stream.position)])
            guard phase == .running else { return stream.extraSlot ? [.releaseSlot(stream: id)] : [] }
            switch end {
            case .reachedEnd:
                var effects = advanceHash()
                if stream.position >= stream.end, !folded || streams.isEmpty, bestPiece != nil {
                    return effects + assign(stream: id, extraSlot: stream.extraSlot)
                }
                if stream.extraSlot { effects.append(.releaseSlot(stream: id)) }
                return effects + afterStreamStopped(failure: nil)
            case .failed(let failure):
                return (stream.extraSlot ? [.releaseSlot(stream: id)] : []) + afterStreamStopped(failure: failure)
            case .fold(let failure):
                var effects: [Effect] = folded ? [] : [.foldHost]
                folded = true
                if stream.extraSlot { effects.append(.releaseSlot(stream: id)) }
                if let leadID = streams.first(where: { $0.value.isLead })?.key {
                    // The whole file is coming on the lead anyway: it takes back every range,
                    // and the other streams stop.
                    streams[leadID]!.end = total
                    for (other, running) in streams where other != leadID {
                        streams[other] = nil
                        written = ByteRanges.merged(written + [ByteRange(running.first, running.position)])
                        effects.append(.stop(stream: other))
                        if running.extraSlot { effects.append(.releaseSlot(stream: other)) }
                    }
                    return effects
                }
                return effects + afterStreamStopped(failure: failure)
            case .versionChanged(let reason):
                phase = .failed
                var effects: [Effect] = stream.extraSlot ? [.releaseSlot(stream: id)] : []
                for (other, running) in streams.sorted(by: { $0.key < $1.key }) {
                    effects.append(.stop(stream: other))
                    if running.extraSlot { effects.append(.releaseSlot(stream: other)) }
                }
                streams = [:]
                let failure: TransferFailure = mayRestart
                    ? .rangeMismatch("the file changed on the server during a segmented download (\(reason))")
                    : .unstableRemote(reason)
                return effects + [.fail(failure, discard: true)]
            }

        case .checkpointed:
            guard let captured = pendingCheckpoint else { return [] }
            pendingCheckpoint = nil
            durable = ByteRanges.merged(durable + captured)
            var effects: [Effect] = [.recordMap(durable)]
            switch phase {
            case .finishing where ByteRanges.covers(durable, total: total):
                phase = .completed
                effects.append(.complete)
            case .finishing:
                effects += startCheckpoint()
            case .running:
                if let failing, streams.isEmpty {
                    if writtenRanges != durable { return effects + startCheckpoint() }
                    phase = .failed
                    effects.append(.fail(failing, discard: false))
                } else if sinceCheckpoint >= limits.checkpointBytes {
                    effects += startCheckpoint()
                }
            case .pacing, .completed, .failed:
                break
            }
            return effects

        case .checkpointDue:
            // Slow streams too lose at most this long of work.
            guard phase == .running, pendingCheckpoint == nil, sinceCheckpoint > 0 else { return [] }
            return startCheckpoint()

        case .checkpointFailed(let failure):
            guard pendingCheckpoint != nil, phase == .running || phase == .finishing else { return [] }
            pendingCheckpoint = nil
            phase = .failed
            var effects: [Effect] = []
            for (id, stream) in streams.sorted(by: { $0.key < $1.key }) {
                effects.append(.stop(stream: id))
                if stream.extraSlot { effects.append(.releaseSlot(stream: id)) }
            }
            streams = [:]
            return effects + [.fail(failure, discard: false)]
        }
    }

    // MARK: Steps

    /// The range a new stream would take: the largest no stream fetches, else the second half
    /// of the largest a stream still has ahead of it, when both halves are worth a connection.
    private var bestPiece: (range: ByteRange, splitting: Int?)? {
        let assigned = written + streams.values.map { ByteRange($0.first, $0.end) }
        if let gap = ByteRanges.gaps(in: assigned, total: total).max(by: { $0.count < $1.count }) {
            return (gap, nil)
        }
        guard !folded,
              let (id, stream) = streams.max(by: { ($0.value.end - $0.value.position, $1.key) < ($1.value.end - $1.value.position, $0.key) })
        else { return nil }
        let ahead = stream.end - stream.position
        guard ahead >= 2 * limits.minPiece else { return nil }
        let middle = stream.position + ahead / 2
        return (ByteRange(middle, stream.end), id)
    }

    /// The first split of what the lead has not reached, `start..<end`, among `streams`
    /// streams, the lead's piece first. In equal pieces at one capped pace every range after
    /// the lead's completes at once, and the digest reads all of them back after the last
    /// byte (225 MiB and 160 ms of a 256 MiB file over 8 connections at 5 MB/s each). Here
    /// the pieces grow by a step in the file's order, so that each completes after the one
    /// before it by about the time its predecessor takes to hash: the step is the mean piece ×
    /// (the lead's pace ÷ `hashRate`), at most `maxStepShare` of it. As many streams as leave
    /// each piece `minPiece` or more.
    ///
    /// The lead goes on while the other streams wait for their first byte (a connection's
    /// handshake and a round trip: `firstByteDelay`, as the lead's own request waited), so its
    /// piece is longer by what it brings in meanwhile at its pace, at most `maxHeadStartShare`
    /// of the mean piece. Without it the lead completed its piece first, one round trip and
    /// more ahead of the second, and then took half of what the last had left, which came in
    /// last.
    static func firstSplit(from start: Int64, to end: Int64, streams: Int, bytesPerSecond: Double, firstByteDelay: Double = 0,
                           limits: Limits) -> [ByteRange] {
        let remaining = end - start
        let count = max(1, min(streams, Int(remaining / max(1, limits.minPiece))))
        guard count > 1 else { return [ByteRange(start, end)] }
        let mean = Double(remaining) / Double(count)
        let paced = bytesPerSecond.isFinite && bytesPerSecond > 0
        let ratio = paced ? min(bytesPerSecond / limits.hashRate, limits.maxStepShare) : 0
        let delay = firstByteDelay.isFinite && firstByteDelay > 0 ? firstByteDelay : 0
        var headStart = paced ? min(bytesPerSecond * delay, mean * limits.maxHeadStartShare) : 0
        var step = mean * ratio
        // The pieces after the lead's share what its head start leaves, growing by the step.
        var first = (Double(remaining) - headStart - step * Double(count * (count - 1) / 2)) / Double(count)
        if first < Double(limits.minPiece) {
            step = 0
            headStart = 0
            first = mean
        }
        var pieces: [ByteRange] = []
        var at = start
        for index in 0..<count {
            let next = index == count - 1 ? end
                : start + Int64((headStart + first * Double(index + 1) + step * Double(index * (index + 1) / 2)).rounded())
            pieces.append(ByteRange(at, next))
            at = next
        }
        return pieces
    }

    /// Gives `id` the best piece (its request), or, when there is none, ends it.
    private mutating func assign(stream id: Int, extraSlot: Bool) -> [Effect] {
        if let leadEnd = plannedLeadEnd {
            plannedLeadEnd = nil
            // The lead is cut where the plan says, unless it is already there.
            if var lead = streams[0], lead.isLead, lead.position < leadEnd, leadEnd < lead.end {
                lead.end = leadEnd
                streams[0] = lead
            } else {
                plannedPieces = []
            }
        }
        if !plannedPieces.isEmpty {
            let piece = plannedPieces.removeFirst()
            streams[id] = Stream(first: piece.start, position: piece.start, end: piece.end, extraSlot: extraSlot, isLead: false)
            return [.request(stream: id, first: piece.start, last: piece.end - 1)]
        }
        guard let piece = bestPiece else {
            return extraSlot ? [.releaseSlot(stream: id)] : []
        }
        if let victim = piece.splitting { streams[victim]!.end = piece.range.start }
        streams[id] = Stream(first: piece.range.start, position: piece.range.start, end: piece.range.end, extraSlot: extraSlot, isLead: false)
        return [.request(stream: id, first: piece.range.start, last: piece.range.end - 1)]
    }

    /// A stream is gone: finish when every byte is written, fail when bytes are missing and no
    /// stream is left to fetch them.
    private mutating func afterStreamStopped(failure: TransferFailure?) -> [Effect] {
        if ByteRanges.covers(written, total: total), streams.isEmpty {
            phase = .finishing
            if pendingCheckpoint != nil { return [] }
            return startCheckpoint()
        }
        if let failure { failing = failing ?? failure }
        guard streams.isEmpty else { return [] }
        let failure = failing ?? .partialBody(received: ByteRanges.prefix(of: written), expected: total)
        failing = failure
        // What was written is made durable and recorded first: the next attempt resumes it.
        if pendingCheckpoint != nil { return [] }
        if writtenRanges != durable { return startCheckpoint() }
        phase = .failed
        return [.fail(failure, discard: false)]
    }

    private mutating func startCheckpoint() -> [Effect] {
        pendingCheckpoint = writtenRanges
        sinceCheckpoint = 0
        return [.checkpoint]
    }

    /// Lets the digest read on while no lead writes ahead of it: the lead's own bytes are
    /// handed to it as they are written.
    private mutating func advanceHash() -> [Effect] {
        guard !streams.values.contains(where: \.isLead) else { return [] }
        let prefix = ByteRanges.prefix(of: writtenRanges)
        guard prefix > hashedTo else { return [] }
        hashedTo = prefix
        return [.advanceHash(to: prefix)]
    }
}
