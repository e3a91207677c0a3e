import Foundation
import Glibc
import Synchronization
import Testing
@testable import MirrorCore

/// A new file's short body held in memory by `PartialFileWriter`: which bodies are held, that a
/// held body makes no file and records no start until it is written out (`spill`), and that a
/// body that outgrows the limit goes to its file whole, hashed, with its start recorded once.
struct HeldBodyTests {
    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var size: Int
        /// The reply says its length (otherwise it is chunked).
        var lengthKnown = true
        var status = 200
        /// The writer continues a partial file (a resume): never held.
        var resumes = false
        var holdLimit = PartialFileWriter.defaultHoldLimit
        /// The body stays in memory to its end.
        var held: Bool
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "1,000 bytes", size: 1_000, held: true),
        Case(name: "at the limit", size: PartialFileWriter.defaultHoldLimit, held: true),
        Case(name: "one byte past the limit", size: PartialFileWriter.defaultHoldLimit + 1, held: false),
        Case(name: "an empty body", size: 0, held: true),
        Case(name: "chunked, short", size: 1_000, lengthKnown: false, held: true),
        Case(name: "chunked, outgrows the limit on the way", size: 200_000, lengthKnown: false, held: false),
        Case(name: "not a new file's writer", size: 1_000, holdLimit: 0, held: false),
        Case(name: "a resume", size: 1_000, resumes: true, held: false),
        Case(name: "an error page", size: 1_000, status: 404, held: false),
    ]

    /// What the writer's opener and start record saw, as they happen.
    private final class Probe: Sendable {
        let path: String
        let opened = Mutex(0)
        let starts = Mutex<[Int64]>([])
        let hasher = Mutex<TrailingHasher?>(nil)
        init(path: String) { self.path = path }
        var fileContents: Data? { FileManager.default.contents(atPath: path) }
    }

    private func receive(_ body: Data, _ test: Case, probe: Probe) throws -> PartialFileWriter {
        let path = probe.path
        let opener: () throws(TransferFailure) -> (fd: Int32, hasher: TrailingHasher) = { () throws(TransferFailure) in
            probe.opened.withLock { $0 += 1 }
            let fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            guard fd >= 0 else { throw .localIO(path: path, operation: "open", errno: errno) }
            let hasher = TrailingHasher(fd: fd, path: path)
            probe.hasher.withLock { $0 = hasher }
            return (fd, hasher)
        }
        var fields: [(String, String)] = test.lengthKnown ? [("Content-Length", "\(body.count)")] : [("Transfer-Encoding", "chunked")]
        if test.resumes { fields = [("Content-Length", "\(body.count)"), ("Content-Range", "bytes 10-\(body.count + 9)/\(body.count + 10)")] }
        let head = ResponseHead(status: test.resumes ? 206 : test.status, fields: fields)
        let writer = PartialFileWriter(
            fd: -1, path: path, requestedOffset: test.resumes ? 10 : 0, expectedTotal: nil, pinnedSize: nil, maxSize: nil,
            hasher: nil, progress: nil,
            onStart: { _, from in probe.starts.withLock { $0.append(from) }; return nil },
            opener: opener, holdLimit: test.holdLimit)
        let disposition = writer.begin(head)
        guard disposition == .write else { return writer }
        try writer.receive(body)
        return writer
    }

    @Test(arguments: cases)
    func aNewFilesShortBodyIsHeldAndMakesNoFileUntilWritten(_ test: Case) throws {
        let directory = try TemporaryDirectory()
        let probe = Probe(path: directory.path("file.part"))
        let body = randomData(count: test.size, seed: UInt64(test.size))
        let writer = try receive(body, test, probe: probe)
        #expect(writer.holding == test.held)
        if test.status != 200 {
            #expect(probe.opened.withLock { $0 } == 1, "an error page's writer opens its file as before")
            return
        }
        if test.held {
            #expect(writer.heldBody == Array(body))
            #expect(probe.opened.withLock { $0 } == 0, "no file is made for a held body")
            #expect(probe.fileContents == nil)
            #expect(probe.starts.withLock { $0 }.isEmpty, "no start is recorded for a held body")
            #expect(writer.position == Int64(body.count) && writer.bytesWritten == Int64(body.count))
            #expect(writer.flushedPosition == 0)
            // The attempt ends without a commit: the body goes to its file, its start recorded.
            #expect(writer.spill() == nil)
            #expect(!writer.holding && writer.heldBody == nil)
            #expect(writer.spill() == nil, "a second spill writes nothing")
        } else {
            #expect(writer.heldBody == nil)
        }
        #expect(probe.opened.withLock { $0 } == 1, "the file is made once")
        #expect(probe.starts.withLock { $0 } == [test.resumes ? 10 : 0], "the start is recorded once")
        guard !test.resumes else { return }
        #expect(probe.fileContents == body, "the file holds the body")
        let hasher = try #require(probe.hasher.withLock { $0 })
        #expect(try hasher.finish(size: Int64(body.count)) == DigestHasher.hex(of: body), "the digest covers every byte, held or streamed")
    }

    /// Which downloads may hold their body: a new file, or a new version of `DEST`, where the
    /// store holds no partial record and no partial file is left to start over.
    @Test func whichDownloadsMayHoldTheirBody() {
        typealias Order = EntryMachine.TransferOrder
        let rows: [(Order, Bool, String)] = [
            (Order(source: 0, action: .download, offset: 0, remote: nil, startedFrom: nil, hadPartialRecord: false), true, "a new file"),
            (Order(source: 0, action: .replace(reason: "changed"), offset: 0, remote: nil, startedFrom: nil, hadPartialRecord: false), true, "a new version of DEST"),
            (Order(source: 0, action: .download, offset: 0, remote: nil, startedFrom: nil, hadPartialRecord: true), false, "a partial record of another version"),
            (Order(source: 0, action: .restart(reason: "larger"), offset: 0, remote: nil, startedFrom: nil, hadPartialRecord: false), false, "a partial file to start over"),
            (Order(source: 0, action: .resume(from: 10, source: .partial), offset: 10, remote: nil, startedFrom: nil, hadPartialRecord: false), false, "a resume"),
            (Order(source: 0, action: .resume(from: 10, source: .destination), offset: 10, remote: nil, startedFrom: nil, hadPartialRecord: false), false, "a short DEST continued"),
        ]
        for (order, holds, name) in rows {
            #expect(DownloadDriver.mayHold(order) == holds, "\(name)")
        }
    }

    /// A body that outgrows the limit on its way goes to its file whole, its start recorded
    /// once, and a writer with no room to hold (`holdLimit` 0) opens at the head as before.
    @Test(arguments: [0, PartialFileWriter.defaultHoldLimit])
    func aBodyThatOutgrowsTheLimitIsWrittenWholeOnce(holdLimit: Int) throws {
        let directory = try TemporaryDirectory()
        let probe = Probe(path: directory.path("file.part"))
        let test = Case(name: "chunked", size: 200_000, lengthKnown: false, holdLimit: holdLimit, held: false)
        let body = randomData(count: test.size, seed: 77)
        let writer = try receive(body, test, probe: probe)
        #expect(!writer.holding)
        #expect(probe.opened.withLock { $0 } == 1)
        #expect(probe.starts.withLock { $0 } == [0])
        #expect(probe.fileContents == body)
        let hasher = try #require(probe.hasher.withLock { $0 })
        #expect(try hasher.finish(size: Int64(body.count)) == DigestHasher.hex(of: body))
    }
}
