import Foundation
import Glibc
import Synchronization
import Testing
@testable import MirrorCore

/// A manifest too large to hold is checked whole, then read a second time as its entries are
/// verified (`ManifestLoader.loadStreaming`, `ManifestEntryStream`): the same entries, the
/// same output, and nothing read from a file changed in between.
struct StreamedVerifyTests {
    /// Entries with a repeat (kept once) and `defaults` after `files` (the entries are read in
    /// the context the whole top level gives).
    static let text = """
        version: 1
        allow_file: true
        root: ./root
        files:
          - url: http://h/a
            dest: d/a
          - url: http://h/b
            dest: d/b
          - url: http://h/a
            dest: d/a
          - url: http://h/c
            dest: c
        defaults:
          retries: 2

        """

    @Test func theStreamHandsOnTheEntriesTheLoadKeeps() throws {
        let directory = try TemporaryDirectory()
        let path = try directory.write(Data(Self.text.utf8), to: "m.yaml")
        let held = try ManifestLoader.load(path: path, environment: [:])
        let (manifest, stream) = try ManifestLoader.loadStreaming(path: path, environment: [:], streamingAbove: 0)
        let entries = try #require(stream)
        #expect(manifest.entries.isEmpty && entries.count == 3)
        var streamed: [Entry] = []
        try entries.forEach { streamed.append($0) }
        // The stream does not gather the repeats' places: only `mirror lock`, which holds the
        // text anyway, writes them.
        #expect(streamed == held.entries.map { entry in
            var entry = entry
            entry.repeatLocations = []
            return entry
        })
        #expect(streamed.map(\.settings.retries) == [2, 2, 2])
        #expect(held.entries[0].repeatLocations.map(\.line) == [9])
        // Below the size, the entries are held.
        let small = try ManifestLoader.loadStreaming(path: path, environment: [:])
        #expect(small.stream == nil && small.manifest.entries == held.entries)
    }

    @Test func aFileChangedInPlaceSinceTheCheckIsNotRead() throws {
        let directory = try TemporaryDirectory()
        let path = try directory.write(Data(Self.text.utf8), to: "m.yaml")
        let (_, stream) = try ManifestLoader.loadStreaming(path: path, environment: [:], streamingAbove: 0)
        let entries = try #require(stream)
        // The same size, another dest: written into the same file.
        let descriptor = open(path, O_WRONLY | O_CLOEXEC)
        try #require(descriptor >= 0)
        let changed = Array(Self.text.replacingOccurrences(of: "dest: c\n", with: "dest: e\n").utf8)
        #expect(changed.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) } == changed.count)
        close(descriptor)
        var handed = 0
        #expect {
            try entries.forEach { _ in handed += 1 }
        } throws: { error in
            "\(error)" == "\(path) changed while it was read: its entries are not the ones checked; run the command again"
        }
        #expect(handed == 0)
    }

    /// `mirror lock` replaces a manifest by a rename: the stream reads the file it checked.
    @Test func aManifestReplacedByARenameIsReadAsItWasChecked() throws {
        let directory = try TemporaryDirectory()
        let path = try directory.write(Data(Self.text.utf8), to: "m.yaml")
        let held = try ManifestLoader.load(path: path, environment: [:])
        let (_, stream) = try ManifestLoader.loadStreaming(path: path, environment: [:], streamingAbove: 0)
        let replacement = try directory.write(Data(Self.text.replacingOccurrences(of: "dest: c\n", with: "dest: e\n").utf8), to: "new.yaml")
        #expect(rename(replacement, path) == 0)
        var streamed: [String] = []
        try #require(stream).forEach { streamed.append($0.dest) }
        #expect(streamed == held.entries.map(\.dest))
    }

    /// A repeated dest makes the loader read the text again for the entries' claims: a file
    /// changed in between is refused, not judged on the other text's entries.
    @Test func aFileChangedBeforeItsSecondReadingIsRefused() throws {
        let directory = try TemporaryDirectory()
        let path = try directory.write(Data(Self.text.utf8), to: "m.yaml")
        let descriptor = open(path, O_RDWR | O_CLOEXEC)
        try #require(descriptor >= 0)
        defer { close(descriptor) }
        let decoder = ManifestDecoder(
            file: path, environment: [:], rootResolution: .init(manifestDirectory: directory.path, override: nil, currentDirectory: "/"))
        let size = Self.text.utf8.count
        let first = try #require(try ManifestStream.read(.file(descriptor: descriptor, size: size), decoder: decoder, context: nil))
        let context = try #require(first.files).context
        // Same length, the repeat now another entry's dest.
        let changed = Array(Self.text.replacingOccurrences(of: "dest: c\n", with: "dest: f\n").utf8)
        #expect(changed.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) } == changed.count)
        #expect {
            _ = try ManifestStream.reread(
                .file(descriptor: descriptor, size: size), decoder: decoder, context: context, purpose: .claims(suspects: []), as: first)
        } throws: { error in
            "\(error)" == "\(path) changed while it was read: its entries are not the ones checked; run the command again"
        }
        // A text cut short no longer reads at all: the same answer, not a syntax error.
        #expect(ftruncate(descriptor, 40) == 0)
        #expect {
            _ = try ManifestStream.reread(
                .file(descriptor: descriptor, size: size), decoder: decoder, context: context, purpose: .claims(suspects: []), as: first)
        } throws: { error in
            "\(error)".hasSuffix("changed while it was read: its entries are not the ones checked; run the command again")
        }
    }

    /// Batches finished out of order go out in order; the stream's wait for the results to
    /// catch up ends when they have, not before.
    @Test func resultsGoOutInOrderAndTheWindowWaitEndsWhenTheyDo() async throws {
        let out = Mutex<[String]>([])
        let order = VerifyResultOrder { results in out.withLock { $0 += results.map(\.dest) } }
        func batch(_ name: String) -> [VerifiedEntry] {
            [VerifiedEntry(dest: name, status: .ok, size: nil, sha256: nil, hashFromStore: false, detail: nil)]
        }
        let waited = Atomic<Bool>(false)
        let done = DispatchSemaphore(value: 0)
        DetachedThread.start {
            order.waitUntilDelivered(3)
            waited.store(true, ordering: .sequentiallyConsistent)
            done.signal()
        }
        order.finished(batch: 2, batch("c"))
        order.finished(batch: 1, batch("b"))
        try await Task.sleep(for: .milliseconds(100))
        #expect(out.withLock { $0 }.isEmpty && !waited.load(ordering: .sequentiallyConsistent), "nothing before batch 0")
        order.finished(batch: 0, batch("a"))
        #expect(done.wait(timeout: .now() + 10) == .success, "the wait ended once three batches were out")
        #expect(out.withLock { $0 } == ["a", "b", "c"])
        #expect(order.delivered == 3)
    }

    /// A change made within the file system's time resolution keeps the size and the times: the
    /// text's checksum still tells the readings apart, however libyaml cuts the text.
    @Test func theTextChecksumIsTheSameForAnyPiecesAndOtherForOtherText() {
        var generator = SeededGenerator(seed: 3)
        let text = Array(randomData(count: 5_000, seed: 9))
        func checksum(_ bytes: [UInt8], pieces: Int) -> UInt64 {
            var checksum = TextChecksum()
            var cuts = (0..<pieces).map { _ in Int.random(in: 0...bytes.count, using: &generator) }.sorted()
            cuts.append(bytes.count)
            var start = 0
            for cut in cuts {
                bytes[start..<cut].withUnsafeBytes { checksum.add($0) }
                start = cut
            }
            return checksum.value
        }
        let whole = checksum(text, pieces: 0)
        for pieces in [1, 2, 7, 100, 999] {
            #expect(checksum(text, pieces: pieces) == whole)
        }
        var changed = text
        changed[4_321] ^= 1
        #expect(checksum(changed, pieces: 3) != whole)
        #expect(checksum(Array(text.dropLast()), pieces: 3) != whole)
        #expect(checksum(text + [0], pieces: 3) != whole)
    }

    /// `mirror lock` holds the text it edits: a manifest larger than that may be is refused
    /// before it is read (not after minutes of loading millions of entries). The file here is
    /// sparse past its first line: a load would have stopped at its NUL bytes instead.
    @Test func lockRefusesAManifestTooLargeToEditBeforeReadingIt() throws {
        let scenario = try SyncScenario()
        let path = try scenario.write(text: "version: 1\n", to: "big.yaml")
        try #require(truncate(path, off_t(ManifestLoader.maximumHeldSize + 1)) == 0)
        let locked = try scenario.run(["lock", "big.yaml"])
        #expect(locked.status == 2, "\(locked)")
        #expect(locked.stderr == "mirror: cannot read manifest `big.yaml`: it is larger than 64 MiB, the most `mirror lock` edits (it holds the text in memory); pin a manifest of fewer entries (about 1,000,000 fit), or split this one\n")
    }

    /// The same manifest padded past 64 MiB with comments is verified as a stream: its output,
    /// text and JSON, is that of the manifest held.
    @Test func aManifestPastTheHeldSizeIsVerifiedAsAStreamWithTheSameOutput() throws {
        let scenario = try SyncScenario()
        var text = "version: 1\nallow_file: true\nroot: ./root\nconcurrency: 3\nfiles:\n"
        for index in 0..<600 {
            let name = "f\(index).txt"
            // Every third file is missing; one in seven has another size than its pin.
            if index % 3 != 0 { _ = try scenario.directory.write(Data("file \(index)\n".utf8), to: "root/\(name)") }
            let size = index % 7 == 0 ? 1 : "file \(index)\n".utf8.count
            text += "  - url: \"file:///nowhere/\(name)\"\n    dest: \(name)\n    size: \(size)\n"
            // The warning an entry without TLS checks gets comes from the streamed reading too.
            if index % 100 == 0 { text += "    insecure: true\n" }
        }
        // Files synced from a source, whose records the stores hold: checked against them, a
        // row at a time when the manifest is streamed; one changed since.
        var synced = "version: 1\nallow_file: true\nroot: ./root\nfiles:\n"
        for index in 0..<100 {
            let source = try scenario.directory.write(Data("synced \(index)\n".utf8), to: "source/g\(index).txt")
            synced += "  - url: \"file://\(source)\"\n    dest: g\(index).txt\n"
        }
        try scenario.write(text: synced, to: "synced.yaml")
        let sync = try scenario.run(["sync", "--quiet", "synced.yaml"])
        try #require(sync.status == 0, "\(sync)")
        _ = try scenario.directory.write(Data("changed\n".utf8), to: "root/g7.txt")
        text += synced.components(separatedBy: "files:\n")[1]
        try scenario.write(text: text, to: "held.yaml")
        let padding = String(repeating: "# a comment that takes the manifest past the size a manifest is held at ......\n", count: 8_192)
        let descriptor = open(scenario.directory.path("streamed.yaml"), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        try #require(descriptor >= 0)
        var written = 0
        for piece in [text] + Array(repeating: padding, count: ManifestLoader.maximumHeldSize / padding.utf8.count + 1) {
            written += Array(piece.utf8).withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
        }
        close(descriptor)
        #expect(written > ManifestLoader.maximumHeldSize)
        for arguments in [["verify"], ["verify", "--json"]] {
            let held = try scenario.run(arguments + ["held.yaml"])
            let streamed = try scenario.run(arguments + ["streamed.yaml"])
            #expect(held.status == 1 && streamed.status == 1, "\(held)\n\(streamed)")
            #expect(streamed.stdout == held.stdout)
            // The warnings name the manifest they are in.
            #expect(streamed.stderr.replacingOccurrences(of: "streamed.yaml:", with: "held.yaml:") == held.stderr)
            #expect(held.stderr.contains("missing     f3.txt"), "\(held)")
            #expect(held.stderr.contains("f100.txt: insecure: true"), "\(held)")
            #expect(held.stderr.contains("modified    g7.txt") || held.stdout.contains("\"dest\":\"g7.txt\",\"status\":\"modified\""), "\(held)")
            #expect(held.stdout.contains("ok          g8.txt") || held.stdout.contains("\"dest\":\"g8.txt\",\"status\":\"ok\""), "\(held)")
        }
    }
}
