import Glibc
import Testing
@testable import MirrorCore

/// `SegmentedDownload`, transition by transition, on a 100-byte file split into pieces of at
/// least 10 bytes, with a checkpoint every 30 bytes and at most 4 streams: each row starts a
/// machine, feeds events in order and states the effects each one must produce.
struct SegmentedDownloadMachineTests {
    typealias Event = SegmentedDownload.Event
    typealias Effect = SegmentedDownload.Effect

    static let limits = SegmentedDownload.Limits(maxStreams: 4, minPiece: 10, checkpointBytes: 30)
    static let reset = TransferFailure.curl(code: 56, message: "reset", osErrno: ECONNRESET)
    static let serverError = TransferFailure.httpStatus(500)

    struct Row: CustomTestStringConvertible, Sendable {
        var name: String
        var start: SegmentedDownload
        /// Effects of `start()` (resumed shape) before the steps; nil: not called.
        var started: [Effect]?
        var steps: [(Event, [Effect])]
        var phase: SegmentedDownload.Phase
        var testDescription: String { name }
    }

    /// A fresh download whose lead was found slow enough to split.
    static func fresh(lead: Int64 = 0, folded: Bool = false, mayRestart: Bool = true) -> SegmentedDownload {
        var machine = paced(lead: lead, folded: folded, mayRestart: mayRestart)
        _ = machine.handle(.leadPaced(secondsLeft: 10))
        return machine
    }

    /// A fresh download whose lead is still paced.
    static func paced(lead: Int64 = 0, folded: Bool = false, mayRestart: Bool = true) -> SegmentedDownload {
        .fresh(total: 100, leadPosition: lead, folded: folded, mayRestart: mayRestart, limits: limits)
    }

    static func resumed(_ durable: [ByteRange]) -> SegmentedDownload {
        .resumed(total: 100, durable: durable, limits: limits)
    }

    static let rows: [Row] = [
        Row(name: "a lead with little left at its pace stays one stream, recording nothing", start: paced(), steps: [
            (.leadPaced(secondsLeft: 1.5), []),
            (.slotOffered, [.declineSlot]),
            (.progressed(stream: 0, from: 0, position: 60), []),
            (.streamEnded(stream: 0, .reachedEnd, position: 100), []),
        ], phase: .pacing),
        Row(name: "over a short round trip, a lead with 1.5 s left stays one stream", start: paced(), steps: [
            (.leadPaced(secondsLeft: 1.5, slots: 1, firstByteDelay: 0.019), []),
            (.slotOffered, [.declineSlot]),
        ], phase: .pacing),
        Row(name: "over a long round trip, a lead with 1.5 s left is split", start: paced(), steps: [
            (.leadPaced(secondsLeft: 1.5, slots: 1, firstByteDelay: 0.02), [.startSegments]),
        ], phase: .running),
        Row(name: "over a long round trip, a lead with 0.4 s left stays one stream", start: paced(), steps: [
            (.leadPaced(secondsLeft: 0.4, slots: 1, firstByteDelay: 0.2), []),
        ], phase: .pacing),
        Row(name: "a slow lead starts the segments once, then slots split it", start: paced(), steps: [
            (.progressed(stream: 0, from: 0, position: 20), []),
            (.leadPaced(secondsLeft: 30), [.startSegments]),
            (.leadPaced(secondsLeft: 30), []),
            (.slotOffered, [.request(stream: 1, first: 60, last: 99)]),
        ], phase: .running),
        Row(name: "a free slot splits the lead in half", start: fresh(), steps: [
            (.slotOffered, [.request(stream: 1, first: 50, last: 99)]),
        ], phase: .running),
        Row(name: "a second slot splits the largest range left", start: fresh(), steps: [
            (.slotOffered, [.request(stream: 1, first: 50, last: 99)]),
            (.progressed(stream: 0, from: 0, position: 20), []),
            (.slotOffered, [.request(stream: 2, first: 75, last: 99)]),
        ], phase: .running),
        Row(name: "a slot is declined when no piece would be worth a connection", start: fresh(lead: 85), steps: [
            (.slotOffered, [.declineSlot]),
        ], phase: .running),
        Row(name: "a slot is declined past the most streams", start: fresh(), steps: [
            (.slotOffered, [.request(stream: 1, first: 50, last: 99)]),
            (.slotOffered, [.request(stream: 2, first: 25, last: 49)]),
            (.slotOffered, [.request(stream: 3, first: 75, last: 99)]),
            (.slotOffered, [.declineSlot]),
        ], phase: .running),
        Row(name: "a folded host gets no further stream", start: fresh(folded: true), steps: [
            (.slotOffered, [.declineSlot]),
        ], phase: .running),
        Row(name: "progress past the checkpoint size asks for a checkpoint, then records what it covered", start: fresh(), steps: [
            (.progressed(stream: 0, from: 0, position: 20), []),
            (.progressed(stream: 0, from: 0, position: 35), [.checkpoint]),
            (.progressed(stream: 0, from: 0, position: 40), []),
            (.checkpointed, [.recordMap([ByteRange(0, 35)])]),
        ], phase: .running),
        Row(name: "a checkpoint falls due: one starts when bytes are unrecorded, none while one runs or none are", start: fresh(), steps: [
            (.checkpointDue, []),
            (.progressed(stream: 0, from: 0, position: 5), []),
            (.checkpointDue, [.checkpoint]),
            (.checkpointDue, []),
            (.checkpointed, [.recordMap([ByteRange(0, 5)])]),
            (.checkpointDue, []),
        ], phase: .running),
        Row(name: "bytes written during a checkpoint start the next one when it is done", start: fresh(), steps: [
            (.progressed(stream: 0, from: 0, position: 30), [.checkpoint]),
            (.progressed(stream: 0, from: 0, position: 65), []),
            (.checkpointed, [.recordMap([ByteRange(0, 30)]), .checkpoint]),
            (.checkpointed, [.recordMap([ByteRange(0, 65)])]),
        ], phase: .running),
        Row(name: "a stream that reaches its end splits the largest running range", start: fresh(), steps: [
            (.slotOffered, [.request(stream: 1, first: 50, last: 99)]),
            (.progressed(stream: 0, from: 0, position: 10), []),
            (.streamEnded(stream: 1, .reachedEnd, position: 100), [.request(stream: 1, first: 30, last: 49)]),
        ], phase: .running),
        Row(name: "an extra stream with nothing left to take gives its slot back", start: fresh(), steps: [
            (.slotOffered, [.request(stream: 1, first: 50, last: 99)]),
            (.progressed(stream: 0, from: 0, position: 45), [.checkpoint]),
            (.streamEnded(stream: 1, .reachedEnd, position: 100), [.releaseSlot(stream: 1)]),
        ], phase: .running),
        Row(name: "the last stream done: the digest reads on, a last checkpoint, then complete", start: fresh(), steps: [
            (.slotOffered, [.request(stream: 1, first: 50, last: 99)]),
            (.progressed(stream: 0, from: 0, position: 45), [.checkpoint]),
            (.streamEnded(stream: 1, .reachedEnd, position: 100), [.releaseSlot(stream: 1)]),
            // The checkpoint under way covers less: another follows it.
            (.streamEnded(stream: 0, .reachedEnd, position: 50), [.advanceHash(to: 100)]),
            (.checkpointed, [.recordMap([ByteRange(0, 45)]), .checkpoint]),
            (.checkpointed, [.recordMap([ByteRange(0, 100)]), .complete]),
        ], phase: .completed),
        Row(name: "a failed stream leaves its rest to the next stream that is free", start: fresh(), steps: [
            (.slotOffered, [.request(stream: 1, first: 50, last: 99)]),
            (.progressed(stream: 0, from: 0, position: 20), []),
            (.streamEnded(stream: 1, .failed(serverError), position: 60), [.releaseSlot(stream: 1)]),
            (.streamEnded(stream: 0, .reachedEnd, position: 50), [.advanceHash(to: 60), .request(stream: 0, first: 60, last: 99)]),
        ], phase: .running),
        Row(name: "with no stream left the written bytes are made durable, then the download fails keeping them", start: fresh(), steps: [
            (.streamEnded(stream: 0, .failed(serverError), position: 20), [.checkpoint]),
            (.checkpointed, [.recordMap([ByteRange(0, 20)]), .fail(serverError, discard: false)]),
        ], phase: .failed),
        Row(name: "a failure with nothing new written fails at once", start: resumed([ByteRange(0, 40)]),
            started: [.advanceHash(to: 40), .request(stream: 0, first: 40, last: 99)], steps: [
            (.streamEnded(stream: 0, .failed(serverError), position: 40), [.fail(serverError, discard: false)]),
        ], phase: .failed),
        Row(name: "a fold while the lead runs: the lead takes back every range, the others stop", start: fresh(), steps: [
            (.slotOffered, [.request(stream: 1, first: 50, last: 99)]),
            (.slotOffered, [.request(stream: 2, first: 25, last: 49)]),
            (.streamEnded(stream: 1, .fold(reset), position: 50), [.foldHost, .releaseSlot(stream: 1), .stop(stream: 2), .releaseSlot(stream: 2)]),
            (.slotOffered, [.declineSlot]),
            (.streamEnded(stream: 0, .reachedEnd, position: 100), [.advanceHash(to: 100), .checkpoint]),
        ], phase: .finishing),
        Row(name: "a fold with no lead leaves the rest to the streams that run", start: resumed([ByteRange(0, 40)]),
            started: [.advanceHash(to: 40), .request(stream: 0, first: 40, last: 99)], steps: [
            (.slotOffered, [.request(stream: 1, first: 70, last: 99)]),
            (.streamEnded(stream: 1, .fold(.httpStatus(503)), position: 70), [.foldHost, .releaseSlot(stream: 1)]),
            (.streamEnded(stream: 0, .reachedEnd, position: 70), [.advanceHash(to: 70), .request(stream: 0, first: 70, last: 99)]),
        ], phase: .running),
        Row(name: "another version stops every stream and discards the .part and its map", start: fresh(), steps: [
            (.slotOffered, [.request(stream: 1, first: 50, last: 99)]),
            (.streamEnded(stream: 1, .versionChanged("412"), position: 50), [
                .releaseSlot(stream: 1), .stop(stream: 0),
                .fail(.rangeMismatch("the file changed on the server during a segmented download (412)"), discard: true),
            ]),
            (.progressed(stream: 0, from: 0, position: 30), []),
        ], phase: .failed),
        Row(name: "another version again, after the restart: the remote is unstable", start: fresh(mayRestart: false), steps: [
            (.slotOffered, [.request(stream: 1, first: 50, last: 99)]),
            (.streamEnded(stream: 1, .versionChanged("412"), position: 50), [
                .releaseSlot(stream: 1), .stop(stream: 0), .fail(.unstableRemote("412"), discard: true),
            ]),
        ], phase: .failed),
        Row(name: "a failed checkpoint stops every stream and keeps the map as it was", start: fresh(), steps: [
            (.slotOffered, [.request(stream: 1, first: 50, last: 99)]),
            (.progressed(stream: 0, from: 0, position: 30), [.checkpoint]),
            (.checkpointFailed(.localIO(path: "f.part", operation: "fdatasync", errno: EIO)), [
                .stop(stream: 0), .stop(stream: 1), .releaseSlot(stream: 1),
                .fail(.localIO(path: "f.part", operation: "fdatasync", errno: EIO), discard: false),
            ]),
        ], phase: .failed),
        Row(name: "a resumed .part: stream 0 takes the largest missing range, a slot the next", start: resumed([ByteRange(0, 40), ByteRange(60, 70)]),
            started: [.advanceHash(to: 40), .request(stream: 0, first: 70, last: 99)], steps: [
            (.slotOffered, [.request(stream: 1, first: 40, last: 59)]),
        ], phase: .running),
        Row(name: "a resumed .part that is all durable only needs its digest", start: resumed([ByteRange(0, 100)]),
            started: [.advanceHash(to: 100), .checkpoint], steps: [
            (.checkpointed, [.recordMap([ByteRange(0, 100)]), .complete]),
        ], phase: .completed),
        Row(name: "a folded host: a stream that reaches its end stops while others run", start: resumed([]),
            started: [.request(stream: 0, first: 0, last: 99)], steps: [
            (.slotOffered, [.request(stream: 1, first: 50, last: 99)]),
            (.streamEnded(stream: 1, .fold(reset), position: 60), [.foldHost, .releaseSlot(stream: 1)]),
            (.streamEnded(stream: 0, .reachedEnd, position: 50), [.advanceHash(to: 60), .request(stream: 0, first: 60, last: 99)]),
        ], phase: .running),
        Row(name: "a stream's end after the download failed only gives its slot back", start: fresh(), steps: [
            (.slotOffered, [.request(stream: 1, first: 50, last: 99)]),
            (.checkpointed, []),
            (.progressed(stream: 0, from: 0, position: 30), [.checkpoint]),
            (.checkpointFailed(.cancelled), [.stop(stream: 0), .stop(stream: 1), .releaseSlot(stream: 1), .fail(.cancelled, discard: false)]),
            (.streamEnded(stream: 1, .reachedEnd, position: 100), []),
            (.checkpointed, []),
        ], phase: .failed),
    ]

    @Test(arguments: rows)
    func transitions(_ row: Row) {
        var machine = row.start
        if let started = row.started {
            #expect(machine.start() == started, "start()")
        }
        for (index, (event, effects)) in row.steps.enumerated() {
            #expect(machine.handle(event) == effects, "step \(index): \(event)")
        }
        #expect(machine.phase == row.phase)
    }

    /// However the events fall, no range is recorded before a checkpoint covered it, and
    /// every extra slot taken is given back exactly once.
    /// Progress is posted: it may arrive after its stream ended and took its next range under
    /// the same id. Progress of the range before (here 50-99, up to 100) must not count for the
    /// next one (25-49): it would mark bytes written that no one wrote, and the hash and the
    /// map would then read them.
    @Test func progressOfAStreamsPreviousRangeDoesNotCountForItsNext() throws {
        var machine = Self.fresh()
        #expect(machine.handle(.slotOffered) == [.request(stream: 1, first: 50, last: 99)])
        let effects = machine.handle(.streamEnded(stream: 1, .reachedEnd, position: 100))
        #expect(effects.contains(.request(stream: 1, first: 25, last: 49)), "\(effects)")
        let before = machine.writtenRanges
        #expect(machine.handle(.progressed(stream: 1, from: 50, position: 100)) == [])
        #expect(machine.streams[1]?.position == 25, "the new range has nothing written yet")
        #expect(machine.writtenRanges == before)
        _ = machine.handle(.progressed(stream: 1, from: 25, position: 40))
        #expect(machine.streams[1]?.position == 40, "its own progress counts")
    }

    @Test func randomEventsNeverRecordUnwrittenBytesAndGiveEverySlotBackOnce() {
        var random = SeededGenerator(seed: 7)
        for _ in 0..<300 {
            var machine = Self.fresh()
            var slots: Set<Int> = []
            var written: [ByteRange] = []
            var pending: [ByteRange]?
            var earlier: [Int: [(first: Int64, end: Int64)]] = [:]
            for _ in 0..<60 {
                let running = machine.streams.keys.sorted()
                var event: Event
                switch Int.random(in: 0..<6, using: &random) {
                case 0: event = .slotOffered
                case 1, 2:
                    guard let id = running.randomElement(using: &random), let stream = machine.streams[id] else { continue }
                    if let stale = earlier[id]?.randomElement(using: &random), stale.first != stream.first, Bool.random(using: &random) {
                        // Progress of a range the stream had before, arriving late: never counted.
                        event = .progressed(stream: id, from: stale.first, position: stale.end)
                    } else {
                        event = .progressed(stream: id, from: stream.first, position: min(stream.end, stream.position + Int64.random(in: 1...20, using: &random)))
                    }
                case 3:
                    guard let id = running.randomElement(using: &random), let stream = machine.streams[id] else { continue }
                    let ends: [SegmentedDownload.StreamEnd] = [.reachedEnd, .reachedEnd, .failed(Self.serverError), .fold(Self.reset)]
                    let end = ends.randomElement(using: &random)!
                    event = .streamEnded(stream: id, end, position: end == .reachedEnd ? stream.end : stream.position)
                default: event = .checkpointed
                }
                if case .progressed(let id, let from, let position) = event, let stream = machine.streams[id], stream.first == from {
                    written = ByteRanges.merged(written + [ByteRange(stream.first, position)])
                }
                for (id, stream) in machine.streams where earlier[id]?.last?.first != stream.first {
                    earlier[id, default: []].append((stream.first, stream.end))
                }
                if case .streamEnded(let id, _, let position) = event, let stream = machine.streams[id] {
                    written = ByteRanges.merged(written + [ByteRange(stream.first, position)])
                }
                let covered = pending
                let durableBefore = machine.durable
                for effect in machine.handle(event) {
                    switch effect {
                    case .request(let id, _, _): if id != 0, !slots.contains(id), event == .slotOffered { slots.insert(id) }
                    case .releaseSlot(let id): #expect(slots.remove(id) != nil, "slot of stream \(id) given back twice")
                    case .checkpoint: pending = machine.writtenRanges
                    case .recordMap(let ranges):
                        for range in ranges {
                            // Recorded only what a checkpoint covered, and only what was written.
                            #expect(ByteRanges.covers((covered ?? []) + durableBefore + ByteRanges.gaps(in: [range], total: 100), total: 100),
                                    "recorded \(range) that no checkpoint covered")
                            #expect(ByteRanges.covers(written + ByteRanges.gaps(in: [range], total: 100), total: 100), "recorded \(range) never written")
                        }
                    default: break
                    }
                }
                if machine.phase == .completed || machine.phase == .failed { break }
            }
            if machine.phase == .failed || machine.phase == .completed { #expect(slots.isEmpty, "slots still held: \(slots)") }
        }
    }
}

/// `ByteRanges`: merging, the prefix, gaps, and the store's text form.
struct ByteRangesTests {
    @Test func mergesSortsAndFindsGaps() {
        let ranges = [ByteRange(50, 60), ByteRange(0, 10), ByteRange(10, 20), ByteRange(55, 70), ByteRange(80, 80)]
        #expect(ByteRanges.merged(ranges) == [ByteRange(0, 20), ByteRange(50, 70)])
        #expect(ByteRanges.prefix(of: ranges) == 20)
        #expect(ByteRanges.prefix(of: [ByteRange(5, 10)]) == 0)
        #expect(ByteRanges.gaps(in: ranges, total: 100) == [ByteRange(20, 50), ByteRange(70, 100)])
        #expect(ByteRanges.gaps(in: [], total: 100) == [ByteRange(0, 100)])
        #expect(ByteRanges.covers([ByteRange(0, 60), ByteRange(60, 100)], total: 100))
    }

    @Test func theStoresTextFormRoundTripsAndRefusesAnythingElse() {
        let ranges = [ByteRange(0, 1_048_576), ByteRange(2_097_152, 4_194_304)]
        #expect(ByteRanges.encode(ranges) == "0-1048576,2097152-4194304")
        #expect(ByteRanges.decode(ByteRanges.encode(ranges)) == ranges)
        #expect(ByteRanges.decode("") == [])
        for bad in ["0-", "5-5", "7-3", "a-b", "0-10,", "-1-4"] { #expect(ByteRanges.decode(bad) == nil, "\(bad)") }
    }
}
