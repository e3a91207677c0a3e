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
}
