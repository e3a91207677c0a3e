import Glibc

/// One entry's download into its partial file, as a state machine: how the bytes come (one
/// stream from byte 0, one stream from an offset under the resume guard, or several range
/// requests at once), and how the download ended, in the entry's terms. `handle(_:)` takes
/// what happened and returns what to do; it does no I/O, reads no clock and draws no random
/// number (`DownloadMachineTests` is its table). `EntryMachine` holds it while it is
/// `.transferring` and forwards the download's events to it; `DownloadDriver` carries out its
/// effects.
///
/// Its state is one of three shapes, each carrying its data:
/// - `contiguous`: a GET of the whole file from byte 0, perhaps the *lead* of a segmented
///   download (its reply may offer a version worth splitting);
/// - `resumed`: a GET from an offset, with the resume guard's `If-Range` and overlap check;
/// - `segmented`: the embedded `SegmentedDownload`, from a lead that became splittable or from
///   a `.part` its segment map resumes.
///
/// The decisions it owns:
/// - a segment map resumes this `.part` (the resume is of the map's version, from its prefix,
///   on the map's URL, to a host that has not folded), and any other start removes the map;
/// - which resume guard a resumed stream sends, how many bytes it re-requests before the
///   offset, and that a partial file shorter than the offset is a `rangeMismatch`;
/// - whether a GET from byte 0 may lead a segmented download (segments on, a store for the
///   map, HTTP, a host that has not folded), and that it becomes one when its reply is
///   splittable (`SegmentReply.version(ofLead:…)`);
/// - how a stream's request ended (`TransferEnd`), and how the lead's ended for the segments;
/// - that the end of a segmented download counts the lead's bytes too, and whether it is a
///   change of version that spends the entry's one segmented restart.
struct DownloadMachine: Equatable {
    typealias TransferEnd = EntryMachine.TransferEnd

    /// What the driver finds around the download when it begins: facts, not decisions.
    struct Surroundings: Equatable {
        /// The source's URL, as the segment map names it.
        var url: String
        /// The partial file's path, for what is said of it.
        var partialPath: String
        /// The store's segment map of the `.part`, when it describes it (`SegmentMap.resumable`).
        var map: SegmentMap?
        /// A segment map row is in the store, describing the `.part` or not.
        var mapSeen = false
        /// `segment_min` in force; `.max`: segments are off.
        var segmentMin: Int64 = .max
        /// A state store is open to hold a segment map.
        var hasStore = false
        /// The source speaks HTTP (an http or https URL).
        var speaksHTTP = false
        /// The source's host asked for one connection per file in this run (`SegmentPoliteness`).
        var hostFolded = false
    }

    /// A stream's GET into the partial file.
    struct Get: Equatable {
        /// Where the new bytes go.
        var offset: Int64
        /// The partial file is longer than `offset`: cut it there first.
        var truncate: Bool
        /// Bytes before `offset` requested again and compared with those on disk.
        var overlap: Int64
        /// Sent as `If-Range`; nil: none.
        var ifRange: String?
        /// The version the partial file was started from, vouched for by `ifRange`.
        var startedFrom: RemoteValidators?
        /// The reply is watched for a version worth splitting (`leadSplittable`).
        var lead: Bool
        /// The partial file is opened (emptied) only once the request is on its way, at the
        /// reply's head at the latest: a new file's request does not wait for its creation.
        var opensPartial = false

        /// The first byte asked for.
        var firstByte: Int64 { offset - overlap }
        /// A range is asked for (`Range: bytes=firstByte-`).
        var asksRange: Bool { offset > 0 }
    }

    /// How a stream's request ended, as its writer and the transport saw it.
    struct StreamFacts: Equatable {
        /// A refused redirect, or the writer's own failure (the disk, a size rule, a reply that
        /// contradicts the request).
        var refused: TransferFailure?
        /// The transport's failure as libcurl told it; `reportedTransport` is the same with the
        /// host's name kept out of a message whose URL hides it.
        var transport: TransferFailure?
        var reportedTransport: TransferFailure?
        /// The reply's head, when one came and the writer placed its body (`placement`).
        var head: EntryMachine.ResponseHeadSummary?
        var placement: BodyPlacement?
        /// Where the writer got to in the file, and the body bytes it wrote.
        var position: Int64 = 0
        var bytes: Int64 = 0
        /// The lead stopped at the end of its range, the rest being other streams'.
        var reachedEnd = false
        /// The stream guard stopped the request before its first body byte, for want of a
        /// connection permit.
        var needsConnection = false
    }

    enum Event: Equatable {
        /// The driver found `Surroundings` (answers `transfer`, `receiveBody` and
        /// `sendAgainOnAConnection`).
        indirect case begin(Surroundings)
        /// The partial file is open; it holds `size` bytes.
        case opened(size: Int64)
        /// The partial file could not be opened, or cut, or its overlap read.
        case notOpened(TransferFailure)
        /// The lead's reply offers `version` in segments; the lead has written `position`.
        indirect case leadSplittable(SegmentVersion, position: Int64)
        /// The segments' map is recorded and the file allocated (or not: `false`).
        case segmentsReady(Bool)
        /// What happened to the segmented download (`SegmentedTransfer`).
        indirect case segments(SegmentedDownload.Event)
        /// The GET's request is over (a contiguous or resumed stream, or the lead).
        indirect case streamEnded(StreamFacts)
        /// The segmented download is over as `end` (its own bytes); the lead wrote `leadBytes`.
        indirect case segmentsEnded(TransferEnd, leadBytes: Int64)
    }

    enum Effect: Equatable {
        /// Remove the store's segment map of the `.part`: no map describes what is written next.
        case removeSegmentMap
        /// Open the partial file as it is, with its hasher; answers `opened` or `notOpened`.
        case openPartial
        /// Cut, position the hasher, read the overlap, then send the GET; a failure to prepare
        /// answers `notOpened`, the request's end `streamEnded`. With `opensPartial`: send the
        /// GET, then open the partial file, emptied; a failure to open ends the request, and
        /// `streamEnded` tells it.
        case get(Get)
        /// Set `SegmentedTransfer` going for `version`: on the lead (fresh), or on the `.part`
        /// its map describes (`resumed`, which answers `segmentsReady`).
        case startSegments(SegmentVersion, resumed: Bool)
        /// For `SegmentedTransfer`: what the embedded `SegmentedDownload` says.
        case segments(SegmentedDownload.Effect)
        /// The request was stopped before its first body byte: once the attempt holds a
        /// connection permit, close the partial file and `begin` again.
        case sendAgainOnAConnection
        /// Take the conditional GET's body (its reply is at hand) into the partial file, emptied,
        /// watched as the lead of a segmented download when `lead`.
        case takeBody(lead: Bool)
        /// The download is over: the entry hears `end`. `versionChanged`: a segmented download
        /// met another version of the file (the entry's one restart for that is spent).
        case ended(TransferEnd, versionChanged: Bool)
    }

    /// A GET from byte 0.
    /// Its request is sent as the stream begins; the partial file is opened meanwhile.
    struct Contiguous: Equatable {
        /// It may lead a segmented download.
        var mayLead: Bool
    }

    /// A GET from an offset.
    struct Resumed: Equatable {
        var offset: Int64
        var guarding: ResumeGuard
        var sent: Bool
    }

    /// Ranges fetched at once.
    struct Segmented: Equatable {
        var version: SegmentVersion
        var download: SegmentedDownload
        /// It grew from a lead (fresh); otherwise it resumes a `.part` from its map.
        var fromLead: Bool
        /// Its map is recorded: from now on its end, the lead's included, is the segments' to tell.
        var ready: Bool
    }

    enum State: Equatable {
        /// Ordered: the surroundings are not known yet.
        case ordered
        case contiguous(Contiguous)
        case resumed(Resumed)
        case segmented(Segmented)
        case ended
    }

    let order: EntryMachine.TransferOrder
    /// A version change met in segments may start the entry over (it has not yet).
    let mayRestartSegments: Bool
    /// The entry allows segments in this attempt (see `EntryMachine`: not after a pin failed on
    /// ranges joined without a precondition).
    let maySegment: Bool
    private(set) var state: State
    /// Where the `.part` is (from `begin`).
    private var partialPath = ""
    /// The download joined ranges sent without a precondition (a pinned file whose server
    /// names no version): a pin that fails says nothing then of whether the file changed.
    private(set) var joinedUnnamedRanges = false

    /// Bytes re-requested before the resume point when no validator vouches for the partial file.
    static let overlapLength: Int64 = 64 * 1024

    /// The download `order` asks for, waiting for its surroundings (`begin`).
    init(order: EntryMachine.TransferOrder, mayRestartSegments: Bool = true, maySegment: Bool = true) {
        self.order = order
        self.mayRestartSegments = mayRestartSegments
        self.maySegment = maySegment
        state = .ordered
    }

    /// The body of the conditional GET's reply, its request already sent: `begin` says whether
    /// it may lead segments, as a GET from 0 may.
    static func receiving(_ order: EntryMachine.TransferOrder, mayRestartSegments: Bool = true, maySegment: Bool = true) -> DownloadMachine {
        var machine = DownloadMachine(order: order, mayRestartSegments: mayRestartSegments, maySegment: maySegment)
        machine.receiving = true
        return machine
    }

    /// The conditional GET's body: the request is sent before the download begins.
    private(set) var receiving = false

    /// The embedded segmented download, when there is one.
    var segments: SegmentedDownload? {
        if case .segmented(let segmented) = state { return segmented.download }
        return nil
    }

    var isEnded: Bool { state == .ended }

    // MARK: Transitions

    mutating func handle(_ event: Event) -> [Effect] {
        switch (state, event) {
        case (.ordered, .begin(let around)):
            return begin(around)

        case (.resumed(var stream), .opened(let size)) where !stream.sent:
            if size < stream.offset {
                return end(.notStarted(.rangeMismatch("partial file shrank to \(size) bytes while resuming from \(stream.offset)"),
                                       mustRestart: true))
            }
            stream.sent = true
            state = .resumed(stream)
            let overlap = stream.guarding.checksOverlap ? min(Self.overlapLength, stream.offset) : 0
            let ifRange = stream.guarding.ifRange
            return [.get(Get(offset: stream.offset, truncate: size > stream.offset, overlap: overlap, ifRange: ifRange,
                             startedFrom: ifRange == nil ? nil : order.startedFrom, lead: false))]
        case (.segmented(let segmented), .opened) where !segmented.fromLead && !segmented.ready:
            return [.startSegments(segmented.version, resumed: true)]

        case (.resumed, .notOpened(let failure)), (.segmented, .notOpened(let failure)):
            return end(.notStarted(failure, mustRestart: false))

        case (.contiguous(let stream), .leadSplittable(let version, let position)) where stream.mayLead:
            let download = SegmentedDownload.fresh(total: version.total, leadPosition: position, mayRestart: mayRestartSegments)
            state = .segmented(Segmented(version: version, download: download, fromLead: true, ready: false))
            return [.startSegments(version, resumed: false)]

        case (.segmented(var segmented), .segmentsReady(let recorded)) where !segmented.ready:
            if !segmented.fromLead, !recorded {
                return end(.notStarted(.localConflict("cannot record the segment map of \(partialPath); not resuming it"), mustRestart: true))
            }
            segmented.ready = recorded
            let effects = segmented.fromLead ? [] : segmented.download.start()
            state = .segmented(segmented)
            return effects.map(Effect.segments)

        case (.segmented(var segmented), .segments(let inner)):
            let effects = segmented.download.handle(inner)
            state = .segmented(segmented)
            return effects.map(Effect.segments)

        case (.contiguous, .streamEnded(let facts)):
            return streamEnded(facts, firstByte: 0)
        case (.resumed(let stream), .streamEnded(let facts)) where stream.sent:
            let overlap = stream.guarding.checksOverlap ? min(Self.overlapLength, stream.offset) : 0
            return streamEnded(facts, firstByte: stream.offset - overlap)
        case (.segmented(var segmented), .streamEnded(let facts)) where segmented.fromLead:
            guard segmented.ready else {
                // Still a plain download (paced, or its map could not be recorded): its end is
                // the entry's, as any stream's.
                return streamEnded(facts, firstByte: 0)
            }
            // The lead is one stream of several: the segments tell the end, once all are done.
            let effects = segmented.download.handle(.streamEnded(stream: 0, Self.leadEnd(facts, total: segmented.version.total),
                                                                 position: facts.position))
            state = .segmented(segmented)
            return effects.map(Effect.segments)

        case (.segmented(let segmented), .segmentsEnded(let end, let leadBytes)):
            // Ranges a pin alone vouched for: nothing showed whether the file changed
            // between them (see `joinedUnnamedRanges`).
            if segmented.version.precondition == nil { joinedUnnamedRanges = true }
            var versionChanged = false
            if case .failed(.rangeMismatch, _, _) = end { versionChanged = true }
            state = .ended
            return [.ended(Self.adding(leadBytes, to: end), versionChanged: versionChanged)]

        default:
            return unexpected(event)
        }
    }

    // MARK: Steps

    private mutating func begin(_ around: Surroundings) -> [Effect] {
        partialPath = around.partialPath
        if let map = around.map, order.offset > 0, order.offset == map.prefix, case .resume(_, .partial) = order.action,
           map.version.url == around.url, map.version.matches(order.startedFrom), !around.hostFolded, maySegment {
            let download = SegmentedDownload.resumed(total: map.version.total, durable: map.durable, mayRestart: mayRestartSegments)
            state = .segmented(Segmented(version: map.version, download: download, fromLead: false, ready: false))
            return [.openPartial]
        }
        // Any other start writes the `.part` as one stream from the offset: no map describes it.
        let removal: [Effect] = around.mapSeen ? [.removeSegmentMap] : []
        if order.offset > 0 {
            let guarding = ResumeGuard.choose(recorded: order.startedFrom, current: order.remote)
            state = .resumed(Resumed(offset: order.offset, guarding: guarding, sent: false))
            return removal + [.openPartial]
        }
        let mayLead = around.segmentMin < .max && around.hasStore && around.speaksHTTP && !around.hostFolded && maySegment
        if receiving {
            // The reply is at hand: its body goes into the partial file, perhaps as a lead.
            state = .contiguous(Contiguous(mayLead: mayLead))
            return removal + [.takeBody(lead: mayLead)]
        }
        // A new stream: its request goes first, the partial file is made while it travels
        // (the driver opens it before any byte of the reply is taken).
        state = .contiguous(Contiguous(mayLead: mayLead))
        return removal + [.get(Get(offset: 0, truncate: false, overlap: 0, ifRange: nil, startedFrom: nil, lead: mayLead, opensPartial: true))]
    }

    /// How a stream's GET ended, in the entry's terms.
    private mutating func streamEnded(_ facts: StreamFacts, firstByte: Int64) -> [Effect] {
        if facts.needsConnection {
            // Stopped before its first body byte: nothing was written or recorded.
            state = .ordered
            return [.sendAgainOnAConnection]
        }
        return end(Self.end(of: facts, firstByte: firstByte))
    }

    private mutating func end(_ end: TransferEnd) -> [Effect] {
        state = .ended
        return [.ended(end, versionChanged: false)]
    }

    /// An event the state does not expect: a driver bug. The download ends as a failure.
    private mutating func unexpected(_ event: Event) -> [Effect] {
        let was = state
        state = .ended
        return [.ended(.notStarted(.localConflict("internal error: \(event) while downloading in \(was)"), mustRestart: false),
                       versionChanged: false)]
    }

    /// How a GET whose first byte asked was `firstByte` ended.
    static func end(of facts: StreamFacts, firstByte: Int64) -> TransferEnd {
        let bytes = facts.bytes
        var restartedFromZero = false
        if case .write(from: 0, _)? = facts.placement, firstByte > 0 { restartedFromZero = true }
        if let failure = facts.refused ?? facts.reportedTransport {
            return .failed(failure, bytes: bytes, restartedFromZero: restartedFromZero)
        }
        guard let head = facts.head, let placement = facts.placement else {
            return .noResponse(bytes: bytes, restartedFromZero: restartedFromZero)
        }
        switch placement {
        case .alreadyComplete(let total):
            return .alreadyComplete(total: total, head: head)
        case .write(_, let total):
            return .written(position: facts.position, total: total, bytes: bytes, restartedFromZero: restartedFromZero, head: head)
        case .reject(let failure):
            return .rejected(failure, bytes: bytes, restartedFromZero: restartedFromZero)
        }
    }

    /// How the lead's request ended, for the segmented download of a file of `total` bytes.
    static func leadEnd(_ facts: StreamFacts, total: Int64) -> SegmentedDownload.StreamEnd {
        if facts.reachedEnd { return .reachedEnd }
        if let failure = facts.refused { return .failed(failure) }
        if let failure = facts.transport { return streamEnd(after: failure) }
        if facts.position >= total { return .reachedEnd }
        return .failed(.partialBody(received: facts.position, expected: total))
    }

    /// A connection the server reset asks for fewer of them.
    static func streamEnd(after failure: TransferFailure) -> SegmentedDownload.StreamEnd {
        if case .curl(_, _, let osErrno) = failure, osErrno == ECONNRESET { return .fold(failure) }
        return .failed(failure)
    }

    /// `end` with the lead's bytes counted too.
    static func adding(_ lead: Int64, to end: TransferEnd) -> TransferEnd {
        switch end {
        case .failed(let failure, let bytes, let restarted): return .failed(failure, bytes: bytes + lead, restartedFromZero: restarted)
        case .written(let position, let total, let bytes, let restarted, let head):
            return .written(position: position, total: total, bytes: bytes + lead, restartedFromZero: restarted, head: head)
        default: return end
        }
    }
}
