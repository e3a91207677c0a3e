import Foundation
import Glibc
import Testing
@testable import MirrorCore

struct StateStoreTests {
    /// Records are read once and then served from memory: what a write changes must show in
    /// the next read, and dests that are equal Strings but different bytes stay two records.
    /// Both ways of reading: all rows at once (a run that expects about as many entries as
    /// the store holds) and one row at a time (a store shared with a larger manifest).
    @Test(arguments: [2, nil])
    func readsSeeEveryWriteAndKeepDestsApartByBytes(expected: Int?) throws {
        let directory = try TemporaryDirectory()
        let store = try #require(StateStore.open(root: directory.path, mode: .readWrite).store)
        if let expected { store.expect(entries: expected) }
        #expect(try store.record(for: "\u{E9}") == nil)
        try store.update(dest: "\u{E9}", url: "https://h/precomposed") { $0.partial = RemoteValidators(etag: "\"1\"", lastModified: nil, size: 10) }
        try store.update(dest: "e\u{301}", url: "https://h/decomposed") { _ in }
        #expect(try store.record(for: "\u{E9}")?.url == "https://h/precomposed")
        #expect(try store.record(for: "\u{E9}")?.partial?.etag == "\"1\"")
        #expect(try store.record(for: "e\u{301}")?.url == "https://h/decomposed")
        try store.update(dest: "\u{E9}", url: "https://h/precomposed") { $0.partial = nil }
        #expect(try store.record(for: "\u{E9}")?.partial == nil)
        store.close()

        // A new opening reads the same from the file.
        let reopened = try #require(StateStore.open(root: directory.path, mode: .readOnly).store)
        #expect(try reopened.record(for: "\u{E9}")?.url == "https://h/precomposed")
        #expect(try reopened.record(for: "e\u{301}")?.url == "https://h/decomposed")
        #expect(try reopened.record(for: "\u{E9}")?.partial == nil)
    }

    /// A FIFO at a store's name (the run's own, or a shard's store an unsharded run reads) is
    /// a store that cannot be used, named as a FIFO, and never opened: `plan`, `verify` and
    /// `sync` hung forever in its blocking open.
    @Test(arguments: ["state.sqlite", "state.shard-0-of-2.sqlite"])
    func aFIFOAtAStoresNameIsNeverOpened(name: String) throws {
        let scenario = try SyncScenario()
        let present = try scenario.directory.write(Data("here".utf8), to: "source/present.txt")
        try scenario.write(text: "version: 1\nallow_file: true\nroot: ./root\nfiles:\n  - url: \"file://\(present)\"\n")
        try FileManager.default.createDirectory(atPath: scenario.directory.path("root/.mirror"), withIntermediateDirectories: true)
        #expect(mkfifo(scenario.directory.path("root/.mirror/" + name), 0o600) == 0)
        for command in ["plan", "verify", "sync"] {
            let result = try MirrorBinary.run([command, "m.yaml"], in: scenario.directory.path, timeout: .seconds(10))
            #expect(result.stderr.contains("root/.mirror/\(name) cannot be used (it is a FIFO, not a regular file"), "\(command): \(result)")
        }
        var info = stat()
        #expect(lstat(scenario.directory.path("root/.mirror/" + name), &info) == 0 && info.st_mode & S_IFMT == S_IFIFO)
    }
}
