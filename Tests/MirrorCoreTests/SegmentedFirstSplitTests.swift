import Testing
@testable import MirrorCore

/// The first split of a paced lead among the slots held at that moment: pieces that grow by a
/// step in the file's order (`SegmentedDownload.firstSplit`), so that at one capped pace they
/// complete one after another and the digest hashes each while the next comes in.
struct SegmentedFirstSplitTests {
    /// A 100-byte file, pieces of 10 bytes or more, at most 4 streams; a hash rate low enough
    /// for a pace of a few bytes a second to give a step of whole bytes.
    static let limits = SegmentedDownload.Limits(maxStreams: 4, minPiece: 10, checkpointBytes: 30, hashRate: 50, maxStepShare: 0.2)

    struct Split: CustomTestStringConvertible, Sendable {
        var name: String
        var start: Int64
        var end: Int64 = 100
        var streams: Int
        var pace: Double
        var firstByteDelay: Double = 0
        var limits: SegmentedDownload.Limits = SegmentedFirstSplitTests.limits
        var pieces: [[Int64]]
        var testDescription: String { name }
    }

    static let splits: [Split] = [
        Split(name: "no pace known: equal pieces", start: 0, streams: 4, pace: 0, pieces: [[0, 25], [25, 50], [50, 75], [75, 100]]),
        Split(name: "an endless pace: equal pieces", start: 0, streams: 4, pace: .infinity, pieces: [[0, 25], [25, 50], [50, 75], [75, 100]]),
        // Step 25 × 10/50 = 5: pieces of 17.5, 22.5, 27.5 and 32.5 bytes.
        Split(name: "pieces grow by the mean × pace ÷ hash rate", start: 0, streams: 4, pace: 10, pieces: [[0, 18], [18, 40], [40, 68], [68, 100]]),
        // The same pace under a cap of 4 %: step 1, pieces of 23.5, 24.5, 25.5, 26.5.
        Split(name: "the step is capped", start: 0, streams: 4, pace: 10,
              limits: SegmentedDownload.Limits(maxStreams: 4, minPiece: 10, checkpointBytes: 30, hashRate: 50, maxStepShare: 0.04),
              pieces: [[0, 24], [24, 48], [48, 74], [74, 100]]),
        // 80 bytes in 2: step 40 × 0.2 = 8, pieces of 36 and 44.
        Split(name: "from where the lead has got to", start: 20, streams: 2, pace: 10, pieces: [[20, 56], [56, 100]]),
        Split(name: "no more streams than pieces of the least size", start: 65, streams: 4, pace: 0, pieces: [[65, 77], [77, 88], [88, 100]]),
        // Step 10 × 0.2 = 2 would leave a first piece of 7: below the least size.
        Split(name: "a step that leaves the first piece too short: equal pieces", start: 60, streams: 4, pace: 40, pieces: [[60, 70], [70, 80], [80, 90], [90, 100]]),
        Split(name: "one stream: the whole range", start: 0, streams: 1, pace: 10, pieces: [[0, 100]]),
        // Head start 10 × 0.5 = 5; the others share 95 less the steps: pieces of 21.25, 21.25,
        // 26.25 and 31.25 bytes (17.5, 22.5, 27.5 and 32.5 without).
        Split(name: "the lead's piece is longer by what it brings in while new streams wait", start: 0, streams: 4, pace: 10,
              firstByteDelay: 0.5, pieces: [[0, 21], [21, 43], [43, 69], [69, 100]]),
        // 100 bytes at 10 a second would be the whole file: a quarter of the mean piece, 6.25.
        Split(name: "the head start is capped", start: 0, streams: 4, pace: 10, firstByteDelay: 10,
              pieces: [[0, 22], [22, 43], [43, 69], [69, 100]]),
        Split(name: "no pace known: no head start either", start: 0, streams: 4, pace: 0, firstByteDelay: 1,
              pieces: [[0, 25], [25, 50], [50, 75], [75, 100]]),
        Split(name: "a delay that is not a number: none", start: 0, streams: 4, pace: 10, firstByteDelay: .nan,
              pieces: [[0, 18], [18, 40], [40, 68], [68, 100]]),
        // 40 bytes in 4 with head start 5 and step 2: a first piece of 5.75, below the least size.
        Split(name: "a head start that leaves a piece too short: equal pieces", start: 60, streams: 4, pace: 10, firstByteDelay: 0.5,
              pieces: [[60, 70], [70, 80], [80, 90], [90, 100]]),
    ]

    @Test(arguments: splits)
    func firstSplit(_ split: Split) {
        let pieces = SegmentedDownload.firstSplit(from: split.start, to: split.end, streams: split.streams, bytesPerSecond: split.pace,
                                                   firstByteDelay: split.firstByteDelay, limits: split.limits)
        #expect(pieces.map { [$0.start, $0.end] } == split.pieces)
        // Whatever the pace, the pieces cover the range in order, each at least the least size.
        #expect(pieces.first?.start == split.start && pieces.last?.end == split.end)
        #expect(zip(pieces, pieces.dropFirst()).allSatisfy { $0.end == $1.start })
        #expect(pieces.count == 1 || pieces.allSatisfy { $0.count >= split.limits.minPiece })
    }

    /// A lead at 0 with 100 bytes to go in 10 s (10 bytes a second), paced with `slots` held.
    static func paced(slots: Int) -> SegmentedDownload {
        var machine = SegmentedDownload.fresh(total: 100, leadPosition: 0, limits: limits)
        #expect(machine.handle(.leadPaced(secondsLeft: 10, slots: slots)) == [.startSegments])
        return machine
    }

    @Test func theSlotsHeldTakeThePlannedPiecesAndTheLeadStopsAtItsOwn() {
        var machine = Self.paced(slots: 3)
        // Planned, not applied: the lead still runs to the end until a slot takes a piece.
        #expect(machine.end(of: 0) == 100)
        #expect(machine.handle(.slotOffered) == [.request(stream: 1, first: 18, last: 39)])
        #expect(machine.end(of: 0) == 18)
        #expect(machine.handle(.slotOffered) == [.request(stream: 2, first: 40, last: 67)])
        #expect(machine.handle(.slotOffered) == [.request(stream: 3, first: 68, last: 99)])
        #expect(machine.handle(.slotOffered) == [.declineSlot])
    }

    @Test func theLeadsFirstByteDelayMovesThePlannedPiecesOn() {
        var machine = SegmentedDownload.fresh(total: 100, leadPosition: 0, limits: Self.limits)
        #expect(machine.handle(.leadPaced(secondsLeft: 10, slots: 3, firstByteDelay: 0.5)) == [.startSegments])
        #expect(machine.handle(.slotOffered) == [.request(stream: 1, first: 21, last: 42)])
        #expect(machine.end(of: 0) == 21)
        #expect(machine.handle(.slotOffered) == [.request(stream: 2, first: 43, last: 68)])
        #expect(machine.handle(.slotOffered) == [.request(stream: 3, first: 69, last: 99)])
    }

    /// A new stream's wait for its first byte: the lead's (a handshake and a round trip) when
    /// its connection is opened at the split; less what of the handshake is over when the
    /// connections were opened earlier, but never less than half, the request's round trip.
    @Test(arguments: [
        (lead: 0.08, warmedFor: nil as Double?, expected: 0.08),
        (lead: 0.08, warmedFor: 0.0, expected: 0.08),
        (lead: 0.08, warmedFor: 0.01, expected: 0.07),
        (lead: 0.08, warmedFor: 0.05, expected: 0.04),
        (lead: 0.08, warmedFor: 5.0, expected: 0.04),
    ])
    func aStreamsFirstByteDelay(_ row: (lead: Double, warmedFor: Double?, expected: Double)) {
        #expect(abs(SegmentedTransfer.streamFirstByteDelay(lead: row.lead, warmedFor: row.warmedFor) - row.expected) < 1e-9)
    }

    @Test func slotsBeyondThePlanSplitTheLargestRangeInHalf() {
        // One slot held: two pieces, 45 and 55 bytes (step 50 × 0.2 = 10).
        var machine = Self.paced(slots: 1)
        #expect(machine.handle(.slotOffered) == [.request(stream: 1, first: 45, last: 99)])
        #expect(machine.handle(.slotOffered) == [.request(stream: 2, first: 72, last: 99)])
    }

    @Test func aLeadAlreadyPastItsPlannedEndKeepsItsRangeAndIsSplitInHalf() {
        var machine = Self.paced(slots: 3)
        #expect(machine.handle(.progressed(stream: 0, from: 0, position: 25)) == [])
        #expect(machine.handle(.slotOffered) == [.request(stream: 1, first: 62, last: 99)])
        #expect(machine.end(of: 0) == 62)
    }

    @Test func withoutSlotsHeldThePaceStartsTheSegmentsAsBefore() {
        var machine = Self.paced(slots: 0)
        #expect(machine.handle(.slotOffered) == [.request(stream: 1, first: 50, last: 99)])
        #expect(machine.end(of: 0) == 50)
    }

    @Test func aPlanNoSlotTookLeavesTheLeadToTheEnd() {
        // The segments could not start (no map): no slot is offered, and the lead runs on.
        var machine = Self.paced(slots: 3)
        #expect(machine.handle(.progressed(stream: 0, from: 0, position: 25)) == [])
        #expect(machine.end(of: 0) == 100)
    }
}
