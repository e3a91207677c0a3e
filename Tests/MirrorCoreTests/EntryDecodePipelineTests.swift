import Dispatch
import Glibc
import Synchronization
import Testing
@testable import MirrorCore

/// A long list is decoded on a thread of its own past its first batch (`EntryDecodePipeline`),
/// once no library is being loaded: the entries, their problems and a syntax error come out as
/// a list read on one thread gives them, in file order, whatever the batch they fall in. The
/// one shard of one (`all`) keeps every entry, so each can be checked.
@Suite(.serialized) struct EntryDecodePipelineTests {
    private static let resolution = ManifestDecoder.RootResolution(manifestDirectory: "/srv", override: nil, currentDirectory: "/")
    static let all = ShardSelection(index: 0, count: 1)!

    static func text(_ count: Int, entry: (Int) -> String = { "  - url: https://h/f\($0)\n    dest: d/f\($0)\n" }) -> String {
        "version: 1\nfiles:\n" + (0..<count).map(entry).joined()
    }

    static func decode(_ text: String, shard: ShardSelection? = EntryDecodePipelineTests.all) throws(ManifestError) -> Manifest {
        try ManifestLoader.decode(Array(text.utf8), path: "m.yaml", rootResolution: resolution, environment: [:], shard: shard)
    }

    @Test("every entry of a long list, in order", arguments: [1, EntryDecodePipeline.batch - 1, EntryDecodePipeline.batch, EntryDecodePipeline.batch + 1, 5_000])
    func entriesInOrder(count: Int) throws {
        let manifest = try Self.decode(Self.text(count))
        #expect(manifest.entries.count == count)
        #expect(manifest.entries.map(\.dest) == (0..<count).map { "d/f\($0)" })
        #expect(manifest.entries.map(\.location.line) == (0..<count).map { 3 + 2 * $0 })
    }

    @Test("problems of entries before and after the hand-over, each at its line, in file order")
    func problemsInFileOrder() throws {
        let bad: Set<Int> = [3, EntryDecodePipeline.batch - 1, EntryDecodePipeline.batch, 700, 2_999]
        let text = Self.text(3_000) { index in
            bad.contains(index) ? "  - url: https://h/f\(index)\n    dest: ../f\(index)\n" : "  - url: https://h/f\(index)\n    dest: d/f\(index)\n"
        }
        do {
            _ = try Self.decode(text)
            Issue.record("a manifest with bad dests loaded")
        } catch {
            #expect(error.diagnostics.map { $0.location?.line } == bad.sorted().map { 4 + 2 * $0 })
            #expect(error.diagnostics.map(\.key) == bad.sorted().map { "files[\($0)].dest" })
        }
    }

    @Test("a syntax error after the hand-over is reported where it is, and the decoding thread ends")
    func syntaxErrorAfterTheHandOver() throws {
        let text = Self.text(2_000) + "  - url: [unclosed\n" + Self.text(10).dropFirst("version: 1\nfiles:\n".count)
        do {
            _ = try Self.decode(text)
            Issue.record("a manifest with a syntax error loaded")
        } catch {
            #expect(error.diagnostics.count == 1)
            #expect((error.diagnostics.first?.location?.line ?? 0) >= 4_003, "\(error)")
        }
    }

    @Test("which lists are decoded on a thread of their own")
    func whichLists() throws {
        #expect(EntryDecodePipeline.applies(to: .entries(shard: Self.all)))
        #expect(EntryDecodePipeline.applies(to: .entries(shard: nil)), "a list kept whole: its decoding is the run's start")
        #expect(EntryDecodePipeline.applies(to: .nothing))
        #expect(EntryDecodePipeline.applies(to: .claims(suspects: [])))
        #expect(!EntryDecodePipeline.applies(to: .stream(skipping: [], body: { _ in })), "a stream's body runs on the reading thread")
    }

    @Test("a list read while a library loads is decoded on the reading thread until the load ends, and comes out the same")
    func whileALibraryLoads() throws {
        let text = Self.text(20_000)
        // Read while a load is under way throughout: on the reading thread alone.
        let startsWhileLoading = EntryDecodePipeline.Starts()
        let alone = try EntryDecodePipeline.$starts.withValue(startsWhileLoading) {
            try LibraryLoading.during { () throws(ManifestError) in try Self.decode(text, shard: nil) }
        }
        #expect(startsWhileLoading.count.load(ordering: .relaxed) == 0)
        #expect(alone.entries.count == 20_000)
        #expect(alone.entries.map(\.dest) == (0..<20_000).map { "d/f\($0)" })
        // A load that ends while the list is read: the second thread starts at a later batch.
        let loading = Mutex(true)
        let loader = JoinableThread {
            LibraryLoading.during {
                while loading.withLock({ $0 }) { usleep(200) }
            }
        }
        var late: Manifest?
        var failure: ManifestError?
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(5)) { loading.withLock { $0 = false } }
        let startsLate = EntryDecodePipeline.Starts()
        EntryDecodePipeline.$starts.withValue(startsLate) {
            do throws(ManifestError) { late = try Self.decode(text, shard: nil) } catch { failure = error }
        }
        loading.withLock { $0 = false }
        loader.join()
        #expect(startsLate.count.load(ordering: .relaxed) == 1, "the second thread, made once the load was over")
        #expect(failure.map { "\($0)" } == nil)
        #expect(late?.entries == alone.entries)
        #expect(!LibraryLoading.inProgress)
    }

    @Test("a shard read on its own is the shard chosen from the whole, however long")
    func shardOfALongList() throws {
        let whole = try Self.decode(Self.text(3_000), shard: nil)
        for index in 0..<3 {
            let selection = try #require(ShardSelection(index: index, count: 3))
            let shard = try Self.decode(Self.text(3_000), shard: selection)
            let (chosen, totals) = whole.selecting(selection, by: .hash)
            #expect(shard.entries == chosen.entries)
            #expect(shard.shardTotals == totals)
        }
    }
}
