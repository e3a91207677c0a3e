import Glibc
import Testing
@testable import MirrorCore

/// `DownloadMachine`, transition by transition: each row starts a machine for an order, feeds
/// events in order and states the effects each one must produce and the state it is left in.
/// Every (state, event) pair it handles appears in at least one row, and so does every pair it
/// does not expect (`everyTransitionIsInTheTable` keeps it so).
struct DownloadMachineTests {
    typealias Event = DownloadMachine.Event
    typealias Effect = DownloadMachine.Effect
    typealias Facts = DownloadMachine.StreamFacts

    struct Row: CustomTestStringConvertible, Sendable {
        var name: String
        var order: EntryMachine.TransferOrder
        var receiving = false
        var mayRestartSegments = true
        var steps: [(Event, [Effect])]
        /// Where the machine is left (`DownloadMachineTests.state(of:)`).
        var state: String
        var testDescription: String { name }
    }

    // Facts used by the rows.
    static let lastModified = "Sun, 06 Nov 1994 08:49:37 GMT"
    static let file = RemoteFile(size: 100, etag: "\"a\"", lastModified: lastModified)
    static let strong = RemoteValidators(file)
    static let weak = RemoteValidators(etag: "W/\"a\"", lastModified: nil, size: 100)
    static let url = "http://127.0.0.1/f"
    static let head = EntryMachine.ResponseHeadSummary(etag: "\"a\"", lastModified: lastModified)
    /// A file large enough to split (64 MiB), and a map of a quarter and a half of it on disk.
    static let total: Int64 = 64 << 20
    static let quarter = total / 4
    static let version = SegmentVersion(url: url, total: total, etag: "\"a\"", lastModified: lastModified)
    static let map = SegmentMap(version: version, durable: [ByteRange(0, quarter), ByteRange(2 * quarter, 3 * quarter)])
    static let reset = TransferFailure.curl(code: 56, message: "reset by 127.0.0.1", osErrno: ECONNRESET)
    static let redacted = TransferFailure.curl(code: 56, message: "reset by <host>", osErrno: ECONNRESET)
    static let serverError = TransferFailure.httpStatus(500)
    static let full = TransferFailure.localIO(path: "f.part", operation: "write", errno: ENOSPC)

    static let fresh = EntryMachine.TransferOrder(source: 0, action: .download, offset: 0, remote: nil, startedFrom: nil, hadPartialRecord: false)
    static func resume(from offset: Int64, startedFrom: RemoteValidators? = strong, remote: RemoteFile? = file,
                       from place: Action.ResumeSource = .partial) -> EntryMachine.TransferOrder {
        EntryMachine.TransferOrder(source: 0, action: .resume(from: offset, source: place), offset: offset, remote: remote,
                                   startedFrom: startedFrom, hadPartialRecord: startedFrom != nil)
    }

    /// Around a download whose file may come in segments.
    static func around(map: SegmentMap? = nil, mapSeen: Bool = false, segmentMin: Int64 = 64, hasStore: Bool = true,
                       http: Bool = true, folded: Bool = false, url: String = url) -> DownloadMachine.Surroundings {
        DownloadMachine.Surroundings(url: url, partialPath: "f.part", map: map, mapSeen: mapSeen, segmentMin: segmentMin,
                                     hasStore: hasStore, speaksHTTP: http, hostFolded: folded)
    }

    static func get(offset: Int64 = 0, truncate: Bool = false, overlap: Int64 = 0, ifRange: String? = nil,
                    startedFrom: RemoteValidators? = nil, lead: Bool = false, opensPartial: Bool = false) -> Effect {
        .get(DownloadMachine.Get(offset: offset, truncate: truncate, overlap: overlap, ifRange: ifRange, startedFrom: startedFrom, lead: lead,
                                 opensPartial: opensPartial))
    }
    /// The GET of a new stream from 0, the partial file opened while it travels.
    static func fresh(lead: Bool = false) -> Effect { get(lead: lead, opensPartial: true) }

    static func ended(_ end: EntryMachine.TransferEnd, versionChanged: Bool = false) -> Effect {
        .ended(end, versionChanged: versionChanged)
    }

    static func written(from: Int64 = 0, position: Int64 = 100, bytes: Int64 = 100) -> Facts {
        Facts(head: head, placement: .write(from: from, total: 100), position: position, bytes: bytes)
    }

    /// A GET from 0 that may lead segments, sent (the partial file opened as it goes).
    static let leading: [(Event, [Effect])] = [
        (.begin(around()), [fresh(lead: true)]),
    ]
    /// That lead, splittable before its first byte.
    static let splitting: [(Event, [Effect])] = leading + [
        (.leadSplittable(version, position: 0), [.startSegments(version, resumed: false)]),
    ]
    /// …its pace worth splitting, its map recorded: stream 1 fetches the second half.
    static let segmenting: [(Event, [Effect])] = splitting + [
        (.segments(.leadPaced(secondsLeft: 10)), [.segments(.startSegments)]),
        (.segmentsReady(true), []),
        (.segments(.slotOffered), [.segments(.request(stream: 1, first: total / 2, last: total - 1))]),
    ]
    /// What the embedded `SegmentedDownload` (tested on its own) answers to `last` after
    /// `segmenting`'s events: the rows check that the download's events reach it as they should.
    static func segments(after last: SegmentedDownload.Event, mayRestart: Bool = true) -> [Effect] {
        var inner = SegmentedDownload.fresh(total: total, leadPosition: 0, mayRestart: mayRestart)
        _ = inner.handle(.leadPaced(secondsLeft: 10))
        _ = inner.handle(.slotOffered)
        return inner.handle(last).map(Effect.segments)
    }
    /// A `.part` its map resumes, opened.
    static let resumingSegments: [(Event, [Effect])] = [
        (.begin(around(map: map, mapSeen: true)), [.openPartial]),
        (.opened(size: total), [.startSegments(version, resumed: true)]),
    ]
    /// Its map recorded again: the digest reads on to the end of the first range, and stream 0
    /// fetches the first gap.
    static let resumedSegments: [(Event, [Effect])] = resumingSegments + [
        (.segmentsReady(true), [.segments(.advanceHash(to: quarter)), .segments(.request(stream: 0, first: quarter, last: 2 * quarter - 1))]),
    ]
    /// A resume from 50 under a strong ETag, sent.
    static let resuming: [(Event, [Effect])] = [
        (.begin(around()), [.openPartial]),
        (.opened(size: 50), [get(offset: 50, ifRange: "\"a\"", startedFrom: strong)]),
    ]
    static let unexpectedPrefix = "internal error: "

    static let rows: [Row] = [
        // Contiguous, from 0.
        Row(name: "a new file: the partial emptied, one GET that may lead segments, written whole", order: fresh, steps: leading + [
            (.streamEnded(written()), [ended(.written(position: 100, total: 100, bytes: 100, restartedFromZero: false, head: head))]),
        ], state: "ended"),
        Row(name: "a stale segment map goes before a download from 0", order: fresh, steps: [
            (.begin(around(mapSeen: true)), [.removeSegmentMap, fresh(lead: true)]),
        ], state: "contiguous.sent"),
        Row(name: "segments off: the GET leads nothing", order: fresh, steps: [
            (.begin(around(segmentMin: .max)), [fresh()]),
        ], state: "contiguous.sent"),
        Row(name: "no store for a map: the GET leads nothing", order: fresh, steps: [
            (.begin(around(hasStore: false)), [fresh()]),
        ], state: "contiguous.sent"),
        Row(name: "not HTTP: the GET leads nothing", order: fresh, steps: [
            (.begin(around(http: false)), [fresh()]),
        ], state: "contiguous.sent"),
        Row(name: "a host that asked for fewer connections: the GET leads nothing", order: fresh, steps: [
            (.begin(around(folded: true)), [fresh()]),
        ], state: "contiguous.sent"),
        Row(name: "the partial cannot be made while the GET travels: that GET's failure, as the writer's", order: fresh, steps: leading + [
            (.streamEnded(Facts(refused: full, transport: .cancelled, reportedTransport: .cancelled)), [ended(.failed(full, bytes: 0))]),
        ], state: "ended"),
        Row(name: "a transport failure is reported with the host kept out of it", order: fresh, steps: leading + [
            (.streamEnded(Facts(transport: reset, reportedTransport: redacted, position: 30, bytes: 30)),
             [ended(.failed(redacted, bytes: 30))]),
        ], state: "ended"),
        Row(name: "a refused redirect or a writer's failure comes before the transport's", order: fresh, steps: leading + [
            (.streamEnded(Facts(refused: full, transport: reset, reportedTransport: redacted, head: head, placement: .write(from: 0, total: 100),
                                position: 30, bytes: 30)),
             [ended(.failed(full, bytes: 30))]),
        ], state: "ended"),
        Row(name: "no reply at all", order: fresh, steps: leading + [
            (.streamEnded(Facts()), [ended(.noResponse(bytes: 0))]),
        ], state: "ended"),
        Row(name: "a reply its writer rejected", order: fresh, steps: leading + [
            (.streamEnded(Facts(head: head, placement: .reject(serverError))), [ended(.rejected(serverError, bytes: 0))]),
        ], state: "ended"),
        Row(name: "a reply that says the file is complete already", order: fresh, steps: leading + [
            (.streamEnded(Facts(head: head, placement: .alreadyComplete(total: 100))), [ended(.alreadyComplete(total: 100, head: head))]),
        ], state: "ended"),
        Row(name: "stopped by the stream guard before any byte: sent again once on a connection, from the start", order: fresh,
            steps: leading + [
            (.streamEnded(Facts(needsConnection: true)), [.sendAgainOnAConnection]),
            (.begin(around()), [fresh(lead: true)]),
        ], state: "contiguous.sent"),
        Row(name: "the conditional GET's body: taken at once (its request is sent), ending as any", order: fresh, receiving: true, steps: [
            (.begin(around(mapSeen: true)), [.removeSegmentMap, .takeBody(lead: true)]),
            (.streamEnded(written()), [ended(.written(position: 100, total: 100, bytes: 100, restartedFromZero: false, head: head))]),
        ], state: "ended"),
        Row(name: "the conditional GET's body leads segments as a GET from 0 does", order: fresh, receiving: true, steps: [
            (.begin(around()), [.takeBody(lead: true)]),
            (.leadSplittable(version, position: 0), [.startSegments(version, resumed: false)]),
            (.segments(.leadPaced(secondsLeft: 10)), [.segments(.startSegments)]),
            (.segmentsReady(true), []),
            (.segments(.slotOffered), [.segments(.request(stream: 1, first: total / 2, last: total - 1))]),
        ], state: "segmented.ready"),
        Row(name: "the conditional GET's body from a host that folded leads nothing", order: fresh, receiving: true, steps: [
            (.begin(around(folded: true)), [.takeBody(lead: false)]),
            (.leadSplittable(version, position: 0), [ended(.notStarted(.localConflict("\(unexpectedPrefix)…"), mustRestart: false))]),
        ], state: "ended"),
        Row(name: "the conditional GET's body with segments off leads nothing", order: fresh, receiving: true, steps: [
            (.begin(around(segmentMin: .max)), [.takeBody(lead: false)]),
            (.streamEnded(Facts()), [ended(.noResponse(bytes: 0))]),
        ], state: "ended"),

        // Resumed, from an offset.
        Row(name: "a resume under a strong ETag: If-Range with it, no overlap, the record's version", order: resume(from: 50),
            steps: resuming + [
            (.streamEnded(written(from: 50, bytes: 50)), [ended(.written(position: 100, total: 100, bytes: 50, restartedFromZero: false, head: head))]),
        ], state: "ended"),
        Row(name: "a partial longer than the offset is cut there", order: resume(from: 50), steps: [
            (.begin(around()), [.openPartial]),
            (.opened(size: 70), [get(offset: 50, truncate: true, ifRange: "\"a\"", startedFrom: strong)]),
        ], state: "resumed.sent"),
        Row(name: "a partial that shrank below the offset: a range mismatch, and the next attempt restarts", order: resume(from: 50), steps: [
            (.begin(around()), [.openPartial]),
            (.opened(size: 20), [ended(.notStarted(.rangeMismatch("partial file shrank to 20 bytes while resuming from 50"), mustRestart: true))]),
        ], state: "ended"),
        Row(name: "a resume with no record: no If-Range, the bytes before the offset asked again and compared",
            order: resume(from: 100_000, startedFrom: nil), steps: [
            (.begin(around()), [.openPartial]),
            (.opened(size: 100_000), [get(offset: 100_000, overlap: DownloadMachine.overlapLength)]),
        ], state: "resumed.sent"),
        Row(name: "an overlap is never longer than the offset", order: resume(from: 50, startedFrom: nil), steps: [
            (.begin(around()), [.openPartial]),
            (.opened(size: 50), [get(offset: 50, overlap: 50)]),
        ], state: "resumed.sent"),
        Row(name: "a weak ETag recorded, its strong twin served: If-Range with the strong one, and the overlap",
            order: resume(from: 50, startedFrom: weak, remote: RemoteFile(size: 100, etag: "\"a\"", lastModified: nil)), steps: [
            (.begin(around()), [.openPartial]),
            (.opened(size: 50), [get(offset: 50, overlap: 50, ifRange: "\"a\"", startedFrom: weak)]),
        ], state: "resumed.sent"),
        Row(name: "the whole file answered to a range: a restart from zero, whatever ended it", order: resume(from: 50), steps: resuming + [
            (.streamEnded(Facts(transport: reset, reportedTransport: redacted, head: head, placement: .write(from: 0, total: 100),
                                position: 30, bytes: 30)),
             [ended(.failed(redacted, bytes: 30, restartedFromZero: true))]),
        ], state: "ended"),
        Row(name: "the whole file answered to the overlap's range is a restart too",
            order: resume(from: 100_000, startedFrom: nil), steps: [
            (.begin(around()), [.openPartial]),
            (.opened(size: 100_000), [get(offset: 100_000, overlap: DownloadMachine.overlapLength)]),
            (.streamEnded(written()), [ended(.written(position: 100, total: 100, bytes: 100, restartedFromZero: true, head: head))]),
        ], state: "ended"),
        Row(name: "a resume with no reply, after the whole file began, still counts as a restart", order: resume(from: 50), steps: resuming + [
            (.streamEnded(Facts(placement: .write(from: 0, total: 100))), [ended(.noResponse(bytes: 0, restartedFromZero: true))]),
        ], state: "ended"),
        Row(name: "a resumed stream stopped by the stream guard is sent again from the start", order: resume(from: 50), steps: resuming + [
            (.streamEnded(Facts(needsConnection: true)), [.sendAgainOnAConnection]),
        ], state: "ordered"),
        Row(name: "a resume's partial cannot be opened", order: resume(from: 50), steps: [
            (.begin(around()), [.openPartial]),
            (.notOpened(full), [ended(.notStarted(full, mustRestart: false))]),
        ], state: "ended"),
        Row(name: "a stale map (other URL) goes, and the .part is resumed as one stream", order: resume(from: quarter, startedFrom: version.validators), steps: [
            (.begin(around(map: map, mapSeen: true, url: "http://127.0.0.1/g")), [.removeSegmentMap, .openPartial]),
        ], state: "resumed.opening"),
        Row(name: "a map is not resumed in segments on a host that folded", order: resume(from: quarter, startedFrom: version.validators), steps: [
            (.begin(around(map: map, mapSeen: true, folded: true)), [.removeSegmentMap, .openPartial]),
        ], state: "resumed.opening"),
        Row(name: "a map is not resumed from another offset than its prefix", order: resume(from: 30, startedFrom: version.validators), steps: [
            (.begin(around(map: map, mapSeen: true)), [.removeSegmentMap, .openPartial]),
        ], state: "resumed.opening"),
        Row(name: "a map is not resumed for a copy of DEST", order: resume(from: quarter, startedFrom: version.validators, from: .destination), steps: [
            (.begin(around(map: map, mapSeen: true)), [.removeSegmentMap, .openPartial]),
        ], state: "resumed.opening"),
        Row(name: "a map is not resumed for another version than the record's",
            order: resume(from: quarter, startedFrom: RemoteValidators(etag: "\"b\"", lastModified: lastModified, size: 100)), steps: [
            (.begin(around(map: map, mapSeen: true)), [.removeSegmentMap, .openPartial]),
        ], state: "resumed.opening"),
        Row(name: "a resumed stream never leads segments", order: resume(from: 50), steps: resuming + [
            (.leadSplittable(version, position: 60), [ended(.notStarted(.localConflict("\(unexpectedPrefix)…"), mustRestart: false))]),
        ], state: "ended"),

        // Segmented, from a lead.
        Row(name: "a splittable lead becomes segmented; its map recorded, it paces, then splits", order: fresh, steps: segmenting,
            state: "segmented.ready"),
        Row(name: "a lead that would soon be done stays one stream and ends as one", order: fresh, steps: splitting + [
            (.segments(.leadPaced(secondsLeft: 1)), []),
            (.streamEnded(written()), [ended(.written(position: 100, total: 100, bytes: 100, restartedFromZero: false, head: head))]),
        ], state: "ended"),
        Row(name: "a lead whose map could not be recorded goes on alone and ends as one stream", order: fresh, steps: splitting + [
            (.segments(.leadPaced(secondsLeft: 10)), [.segments(.startSegments)]),
            (.segmentsReady(false), []),
            (.streamEnded(written()), [ended(.written(position: 100, total: 100, bytes: 100, restartedFromZero: false, head: head))]),
        ], state: "ended"),
        Row(name: "a lead that ends before its map is recorded ends as one stream", order: fresh, steps: splitting + [
            (.streamEnded(Facts(transport: serverError, reportedTransport: serverError, head: head, placement: .write(from: 0, total: 100),
                                position: 5, bytes: 5)),
             [ended(.failed(serverError, bytes: 5))]),
        ], state: "ended"),
        Row(name: "a lead stopped at the end of its range is done with it", order: fresh, steps: segmenting + [
            (.streamEnded(Facts(transport: TransferFailure.curl(code: 23, message: "write", osErrno: 0), head: head,
                                placement: .write(from: 0, total: total), position: total / 2, bytes: total / 2, reachedEnd: true)),
             segments(after: .streamEnded(stream: 0, .reachedEnd, position: total / 2))),
        ], state: "segmented.ready"),
        Row(name: "a lead reset by the server folds the host", order: fresh, steps: segmenting + [
            (.streamEnded(Facts(transport: reset, reportedTransport: redacted, position: 30, bytes: 30)),
             segments(after: .streamEnded(stream: 0, .fold(reset), position: 30))),
        ], state: "segmented.ready"),
        Row(name: "a lead whose writer failed fails its stream", order: fresh, steps: segmenting + [
            (.streamEnded(Facts(refused: full, transport: reset, position: 30, bytes: 30)),
             segments(after: .streamEnded(stream: 0, .failed(full), position: 30))),
        ], state: "segmented.ready"),
        Row(name: "a lead that failed otherwise fails its stream", order: fresh, steps: segmenting + [
            (.streamEnded(Facts(transport: serverError, reportedTransport: serverError, position: 30, bytes: 30)),
             segments(after: .streamEnded(stream: 0, .failed(serverError), position: 30))),
        ], state: "segmented.ready"),
        Row(name: "a lead cut short with no failure is a partial body", order: fresh, steps: segmenting + [
            (.streamEnded(Facts(head: head, placement: .write(from: 0, total: total), position: 30, bytes: 30)),
             segments(after: .streamEnded(stream: 0, .failed(.partialBody(received: 30, expected: total)), position: 30))),
        ], state: "segmented.ready"),
        Row(name: "a lead that wrote to the end reached it", order: fresh, steps: segmenting + [
            (.streamEnded(Facts(head: head, placement: .write(from: 0, total: total), position: total, bytes: total)),
             segments(after: .streamEnded(stream: 0, .reachedEnd, position: total))),
        ], state: "segmented.ready"),
        Row(name: "a segmented download that completes counts the lead's bytes", order: fresh, steps: segmenting + [
            (.segmentsEnded(.written(position: 100, total: 100, bytes: 50, restartedFromZero: false, head: head), leadBytes: 50),
             [ended(.written(position: 100, total: 100, bytes: 100, restartedFromZero: false, head: head))]),
        ], state: "ended"),
        Row(name: "another version met in segments spends the entry's restart", order: fresh, steps: segmenting + [
            (.segmentsEnded(.failed(.rangeMismatch("changed"), bytes: 20), leadBytes: 50),
             [ended(.failed(.rangeMismatch("changed"), bytes: 70), versionChanged: true)]),
        ], state: "ended"),
        Row(name: "a second change of version makes the remote unstable", order: fresh, mayRestartSegments: false, steps: segmenting + [
            (.segments(.streamEnded(stream: 1, .versionChanged("412"), position: total / 2)),
             segments(after: .streamEnded(stream: 1, .versionChanged("412"), position: total / 2), mayRestart: false)),
        ], state: "segmented.ready"),
        Row(name: "a segmented download that fails otherwise counts the lead's bytes", order: fresh, steps: segmenting + [
            (.segmentsEnded(.failed(.cancelled, bytes: 20), leadBytes: 50), [ended(.failed(.cancelled, bytes: 70))]),
        ], state: "ended"),
        Row(name: "a second splittable word for the same lead is a driver bug", order: fresh, steps: splitting + [
            (.leadSplittable(version, position: 0), [ended(.notStarted(.localConflict("\(unexpectedPrefix)…"), mustRestart: false))]),
        ], state: "ended"),

        // Segmented, from a map.
        Row(name: "a .part its map describes: its missing ranges in segments", order: resume(from: quarter, startedFrom: version.validators), steps: resumedSegments + [
            (.segments(.slotOffered), [.segments(.request(stream: 1, first: 3 * quarter, last: total - 1))]),
        ], state: "segmented.ready"),
        Row(name: "a map that cannot be recorded again: not resumed, and the next attempt restarts", order: resume(from: quarter, startedFrom: version.validators),
            steps: resumingSegments + [
            (.segmentsReady(false), [ended(.notStarted(.localConflict("cannot record the segment map of f.part; not resuming it"), mustRestart: true))]),
        ], state: "ended"),
        Row(name: "a .part of a map cannot be opened", order: resume(from: quarter, startedFrom: version.validators), steps: [
            (.begin(around(map: map, mapSeen: true)), [.openPartial]),
            (.notOpened(full), [ended(.notStarted(full, mustRestart: false))]),
        ], state: "ended"),
        Row(name: "segments resumed from a map end with no lead's bytes", order: resume(from: quarter, startedFrom: version.validators), steps: resumedSegments + [
            (.segmentsEnded(.written(position: total, total: total, bytes: 2 * quarter, restartedFromZero: false, head: head), leadBytes: 0),
             [ended(.written(position: total, total: total, bytes: 2 * quarter, restartedFromZero: false, head: head))]),
        ], state: "ended"),
        Row(name: "segments resumed from a map have no lead whose end to hear", order: resume(from: quarter, startedFrom: version.validators), steps: resumedSegments + [
            (.streamEnded(written()), [ended(.notStarted(.localConflict("\(unexpectedPrefix)…"), mustRestart: false))]),
        ], state: "ended"),

        // Events no state expects.
        Row(name: "an opened file before the surroundings are known", order: fresh, steps: [
            (.opened(size: 0), [ended(.notStarted(.localConflict("\(unexpectedPrefix)…"), mustRestart: false))]),
        ], state: "ended"),
        Row(name: "a second begin", order: fresh, steps: [
            (.begin(around()), [fresh(lead: true)]),
            (.begin(around()), [ended(.notStarted(.localConflict("\(unexpectedPrefix)…"), mustRestart: false))]),
        ], state: "ended"),
        Row(name: "a stream's end before its request", order: resume(from: 50), steps: [
            (.begin(around()), [.openPartial]),
            (.streamEnded(written()), [ended(.notStarted(.localConflict("\(unexpectedPrefix)…"), mustRestart: false))]),
        ], state: "ended"),
        Row(name: "a contiguous stream told it was opened: its driver opens the file itself", order: fresh, steps: leading + [
            (.opened(size: 0), [ended(.notStarted(.localConflict("\(unexpectedPrefix)…"), mustRestart: false))]),
        ], state: "ended"),
        Row(name: "a contiguous stream told its file could not be opened: the GET's end says so instead", order: fresh, steps: leading + [
            (.notOpened(full), [ended(.notStarted(.localConflict("\(unexpectedPrefix)…"), mustRestart: false))]),
        ], state: "ended"),
        Row(name: "a resumed stream opened twice", order: resume(from: 50), steps: resuming + [
            (.opened(size: 50), [ended(.notStarted(.localConflict("\(unexpectedPrefix)…"), mustRestart: false))]),
        ], state: "ended"),
        Row(name: "segments' words for a contiguous stream", order: fresh, steps: leading + [
            (.segments(.slotOffered), [ended(.notStarted(.localConflict("\(unexpectedPrefix)…"), mustRestart: false))]),
        ], state: "ended"),
        Row(name: "segments ready for a resumed stream", order: resume(from: 50), steps: resuming + [
            (.segmentsReady(true), [ended(.notStarted(.localConflict("\(unexpectedPrefix)…"), mustRestart: false))]),
        ], state: "ended"),
        Row(name: "segments' end for a resumed stream", order: resume(from: 50), steps: resuming + [
            (.segmentsEnded(.failed(.cancelled, bytes: 0), leadBytes: 0),
             [ended(.notStarted(.localConflict("\(unexpectedPrefix)…"), mustRestart: false))]),
        ], state: "ended"),
        Row(name: "segments ready twice", order: fresh, steps: segmenting + [
            (.segmentsReady(true), [ended(.notStarted(.localConflict("\(unexpectedPrefix)…"), mustRestart: false))]),
        ], state: "ended"),
        Row(name: "a segmented .part opened twice", order: resume(from: quarter, startedFrom: version.validators), steps: resumedSegments + [
            (.opened(size: total), [ended(.notStarted(.localConflict("\(unexpectedPrefix)…"), mustRestart: false))]),
        ], state: "ended"),
        Row(name: "anything after the end", order: fresh, steps: leading + [
            (.streamEnded(Facts()), [ended(.noResponse(bytes: 0))]),
            (.streamEnded(Facts()), [ended(.notStarted(.localConflict("\(unexpectedPrefix)…"), mustRestart: false))]),
        ], state: "ended"),
    ]

    /// The state's shape and where it is in it, as the rows name it.
    static func state(of machine: DownloadMachine) -> String {
        switch machine.state {
        case .ordered: return "ordered"
        case .contiguous: return "contiguous.sent"
        case .resumed(let stream): return stream.sent ? "resumed.sent" : "resumed.opening"
        case .segmented(let segmented):
            if segmented.ready { return "segmented.ready" }
            return segmented.fromLead ? "segmented.lead" : "segmented.resuming"
        case .ended: return "ended"
        }
    }

    static func machine(for row: Row) -> DownloadMachine {
        row.receiving ? .receiving(row.order) : DownloadMachine(order: row.order, mayRestartSegments: row.mayRestartSegments)
    }

    /// An unexpected event's failure names the event and the state; the rows say only that it
    /// is one (`…`).
    static func comparable(_ effects: [Effect]) -> [Effect] {
        effects.map { effect in
            if case .ended(.notStarted(.localConflict(let text), let mustRestart), let changed) = effect, text.hasPrefix(unexpectedPrefix) {
                return .ended(.notStarted(.localConflict("\(unexpectedPrefix)…"), mustRestart: mustRestart), versionChanged: changed)
            }
            return effect
        }
    }

    @Test(arguments: rows) func transitions(_ row: Row) {
        var machine = Self.machine(for: row)
        for (index, (event, expected)) in row.steps.enumerated() {
            let effects = Self.comparable(machine.handle(event))
            #expect(effects == expected, "step \(index + 1): \(event)")
        }
        #expect(Self.state(of: machine) == row.state)
        #expect(machine.isEnded == (row.state == "ended"))
    }

    @Test func everyTransitionIsInTheTable() {
        var seen = Set<String>()
        for row in Self.rows {
            var machine = Self.machine(for: row)
            for (event, _) in row.steps {
                seen.insert("\(Self.state(of: machine)) \(Self.name(of: event))")
                _ = machine.handle(event)
            }
        }
        let handled = [
            "ordered begin",
            "contiguous.sent leadSplittable", "contiguous.sent streamEnded",
            "resumed.opening opened", "resumed.opening notOpened", "resumed.sent streamEnded",
            "segmented.resuming opened", "segmented.resuming notOpened", "segmented.resuming segmentsReady",
            "segmented.lead segmentsReady", "segmented.lead streamEnded", "segmented.lead segments",
            "segmented.ready segments", "segmented.ready streamEnded", "segmented.ready segmentsEnded",
        ]
        let unexpected = [
            "ordered opened", "contiguous.sent begin", "resumed.opening streamEnded", "contiguous.sent opened", "contiguous.sent notOpened",
            "resumed.sent opened", "contiguous.sent segments", "resumed.sent segmentsReady", "resumed.sent segmentsEnded",
            "resumed.sent leadSplittable", "segmented.ready segmentsReady", "segmented.ready opened", "segmented.lead leadSplittable",
            "ended streamEnded",
        ]
        for transition in handled + unexpected {
            #expect(seen.contains(transition), "no row covers \(transition)")
        }
    }

    static func name(of event: Event) -> String {
        String(describing: event).prefix { $0 != "(" }.description
    }
}
