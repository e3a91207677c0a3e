import CSQLite
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

    /// Every row is read beside the run, on a thread and a connection of its own, while the
    /// run's reads go a row at a time: once those rows are taken, reads give every record as
    /// this run last wrote or removed it, those written while the rows were being read too,
    /// and a dest with no record none. Without what was written meanwhile laid over the rows,
    /// the changed records read back as they were (the reading of 30,000 rows takes tens of
    /// milliseconds; the changes come during it).
    @Test func rowsReadBesideTheRunGiveWhatItWroteMeanwhile() throws {
        let directory = try TemporaryDirectory()
        let count = 30_000
        let version = { (index: Int) in
            CompleteVersion(validators: RemoteValidators(etag: "\"\(index)\"", lastModified: nil, size: 1), sha256: nil,
                            local: LocalIdentity(size: 1, modifiedNanoseconds: 1, inode: UInt64(index)))
        }
        do {
            let store = try #require(StateStore.open(root: directory.path, mode: .readWrite).store)
            try store.recordCommitted((0..<count).map { (dest: "f\($0)", url: "https://h/\($0)", version: version($0)) })
            store.close()
        }
        let store = try #require(StateStore.open(root: directory.path, mode: .readWrite).store)
        store.expect(entries: count)
        #expect(try store.record(for: "f0")?.url == "https://h/0")
        Thread.sleep(forTimeInterval: 0.005)
        var changed: Set<Int> = []
        for index in stride(from: 1, to: count, by: 997) {
            try store.update(dest: "f\(index)", url: "https://h/changed/\(index)") { $0.partial = RemoteValidators(etag: "\"p\"", lastModified: nil, size: 2) }
            changed.insert(index)
        }
        try store.removeRecords(["f2", "f\(count - 1)"])
        try store.update(dest: "new", url: "https://h/new") { _ in }
        // Every record, as last written; a read that takes the rows read beside the run comes
        // at one of these at the latest.
        for index in 0..<count {
            let record = try store.record(for: "f\(index)")
            if index == 2 || index == count - 1 {
                #expect(record == nil, "\(index)")
            } else if changed.contains(index) {
                #expect(record?.url == "https://h/changed/\(index)", "\(index)")
                #expect(record?.partial?.etag == "\"p\"", "\(index)")
            } else {
                #expect(record?.url == "https://h/\(index)", "\(index)")
                #expect(record?.complete?.local.inode == UInt64(index), "\(index)")
            }
        }
        #expect(try store.record(for: "new")?.url == "https://h/new")
        #expect(try store.record(for: "missing") == nil)
        store.close()
    }

    /// A store is made without syncs (it holds no record yet), and then records as any other
    /// does: `synchronous=NORMAL`, whether the opening made it or found it, and what it
    /// recorded is there at the next opening.
    @Test func aStoreMadeWithoutSyncsRecordsAsAnyOther() throws {
        let directory = try TemporaryDirectory()
        let made = try #require(StateStore.open(root: directory.path, mode: .readWrite).store)
        #expect(try made.synchronousLevel() == 1)
        try made.update(dest: "a", url: "https://h/a") { $0.partial = RemoteValidators(etag: "\"a\"", lastModified: nil, size: 1) }
        made.close()
        let found = try #require(StateStore.open(root: directory.path, mode: .readWrite).store)
        #expect(try found.synchronousLevel() == 1)
        #expect(try found.record(for: "a")?.partial?.etag == "\"a\"")
        found.close()
    }

    /// Writing the log back as the run goes (after each group of durable files) takes nothing
    /// from the store: every record committed before and after it is read back, and the
    /// descriptor the writeback keeps on the log is gone once the store is closed (looked for
    /// by the log's path in /proc/self/fd, which only this test's directory has).
    @Test func theLogWrittenBackAsTheRunGoesLosesNothingAndIsClosedWithTheStore() throws {
        let directory = try TemporaryDirectory()
        let store = try #require(StateStore.open(root: directory.path, mode: .readWrite).store)
        func descriptorsOnTheLog() throws -> Int {
            let log = directory.path(".mirror/state.sqlite-wal")
            return try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").filter { name in
                (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(name)")) == log
            }.count
        }
        let before = try descriptorsOnTheLog()
        for group in 0..<3 {
            try store.recordCommitted((0..<4).map { index in
                ("g\(group)/f\(index)", "https://h/\(group)/\(index)", CompleteVersion(
                    validators: RemoteValidators(etag: "\"\(group)-\(index)\"", lastModified: nil, size: 1), sha256: nil, local: LocalIdentity(size: 1, modifiedNanoseconds: 0, inode: 1)))
            })
            store.startLogWriteback()
        }
        #expect(try descriptorsOnTheLog() == before + 1, "the log is opened once, for every writeback")
        store.close()
        store.startLogWriteback()
        #expect(try descriptorsOnTheLog() == 0)

        let reopened = try #require(StateStore.open(root: directory.path, mode: .readOnly).store)
        for group in 0..<3 {
            for index in 0..<4 {
                #expect(try reopened.record(for: "g\(group)/f\(index)")?.complete?.validators.etag == "\"\(group)-\(index)\"")
            }
        }
        reopened.close()
    }

    /// A snapshot holds every record as the store has it (equal Strings of other bytes kept
    /// apart), when the store holds no more than max(1,024, 2 × the entries expected) rows; a
    /// store much larger than the run's entries has none, and is read a row at a time.
    /// Records are looked up by their dest's bytes, whether the store read its rows ahead
    /// (told what to expect, and not much larger than that) or reads a row at a time.
    @Test(arguments: [(1100, 600), (1100, 549), (1100, nil), (5, 1)])
    func recordsAreLookedUpByTheirBytesReadAheadOrNot(rows: Int, expected: Int?) throws {
        let directory = try TemporaryDirectory()
        let store = try #require(StateStore.open(root: directory.path, mode: .readWrite).store)
        try store.recordCommitted((0..<rows).map { index in
            ("f\(index)", "https://h/\(index)", CompleteVersion(
                validators: RemoteValidators(etag: "\"\(index)\"", lastModified: nil, size: 1), sha256: nil,
                local: LocalIdentity(size: 1, modifiedNanoseconds: 0, inode: 1)))
        })
        try store.update(dest: "\u{E9}", url: "https://h/precomposed") { _ in }
        store.close()
        let reopened = try #require(StateStore.open(root: directory.path, mode: .readOnly).store)
        if let expected { reopened.expect(entries: expected) }
        #expect(try reopened.record(for: "f0")?.complete?.validators.etag == "\"0\"")
        #expect(try reopened.record(for: "f\(rows - 1)")?.url == "https://h/\(rows - 1)")
        #expect(try reopened.record(for: "\u{E9}")?.url == "https://h/precomposed")
        #expect(try reopened.record(for: "e\u{301}") == nil, "the same String, other bytes")
        #expect(try reopened.record(for: "f\(rows)") == nil)
        reopened.close()
    }

    /// The log a run writes is folded into the database as it grows (after the groups of
    /// durable files that write it back), so it never holds much more than
    /// `StateStore.checkpointLogFrames`: 600 groups of 4 records, which leave a log of megabytes
    /// unfolded, leave one of at most twice that here (in 4 KiB pages and their headers),
    /// while the store reads every record.
    @Test func theLogIsFoldedInAsTheRunGoes() throws {
        let directory = try TemporaryDirectory()
        let store = try #require(StateStore.open(root: directory.path, mode: .readWrite).store)
        store.expect(entries: 2400)
        var largest: Int64 = 0
        for group in 0..<600 {
            try store.recordCommitted((0..<4).map { index in
                ("g\(group)/f\(index)", "https://h/\(group)/\(index)", CompleteVersion(
                    validators: RemoteValidators(etag: "\"\(group)-\(index)\"", lastModified: nil, size: 1), sha256: nil,
                    local: LocalIdentity(size: 1, modifiedNanoseconds: 0, inode: 1)))
            })
            store.startLogWriteback()
            var info = stat()
            if stat(directory.path(".mirror/state.sqlite-wal"), &info) == 0 { largest = max(largest, Int64(info.st_size)) }
        }
        #expect(largest > 0)
        #expect(largest <= Int64(2 * StateStore.checkpointLogFrames * (4096 + 24) + 32), "the log grew to \(largest) bytes")
        #expect(try store.record(for: "g0/f0")?.complete?.validators.etag == "\"0-0\"")
        #expect(try store.record(for: "g599/f3")?.complete?.validators.etag == "\"599-3\"")
        store.close()
        // Closed with its checkpointer: the log was the store's own to empty and remove.
        store.startLogWriteback()
        for leftover in ["state.sqlite-wal", "state.sqlite-shm"] {
            #expect(!FileManager.default.fileExists(atPath: directory.path(".mirror/\(leftover)")), "\(leftover) is left")
        }
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

    /// The store's file as schema 1 made it. Its records are read, and written, column by
    /// column by name: a store made before (or with a column a later mirror added in the
    /// middle of the table) opens unchanged, and each value lands in its own column.
    @Test(arguments: [false, true])
    func aStoreOfSchemaOneOpensUnchangedAndEachValueHasItsOwnColumn(extraColumn: Bool) throws {
        let directory = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.path(".mirror"), withIntermediateDirectories: true)
        let path = directory.path(".mirror/state.sqlite")
        var db: OpaquePointer?
        #expect(sqlite3_open(path, &db) == SQLITE_OK)
        let handle = try #require(db)
        let extra = extraColumn ? "extra TEXT DEFAULT 'kept'," : ""
        for sql in [
            """
            CREATE TABLE entries (
                dest TEXT PRIMARY KEY NOT NULL,
                url TEXT NOT NULL, \(extra)
                complete INTEGER NOT NULL DEFAULT 0,
                etag TEXT, last_modified TEXT, size INTEGER, sha256 TEXT,
                local_size INTEGER, local_mtime_ns INTEGER, local_inode INTEGER,
                partial INTEGER NOT NULL DEFAULT 0,
                partial_etag TEXT, partial_last_modified TEXT, partial_size INTEGER
            ) WITHOUT ROWID
            """,
            "PRAGMA user_version=1",
            """
            INSERT INTO entries (dest, url, complete, etag, last_modified, size, sha256, local_size, local_mtime_ns, local_inode,
                                 partial, partial_etag, partial_last_modified, partial_size)
            VALUES ('a.bin', 'https://h/a', 1, '"e1"', 'Sun, 06 Nov 1994 08:49:37 GMT', 100, 'ab12', 101, 102, 103,
                    1, '"p1"', 'Mon, 07 Nov 1994 08:49:37 GMT', 104)
            """,
        ] {
            #expect(sqlite3_exec(handle, sql, nil, nil, nil) == SQLITE_OK, "\(sql)")
        }
        sqlite3_close(handle)

        let expected = StateRecord(
            dest: "a.bin", url: "https://h/a",
            complete: CompleteVersion(
                validators: RemoteValidators(etag: "\"e1\"", lastModified: "Sun, 06 Nov 1994 08:49:37 GMT", size: 100),
                sha256: "ab12", local: LocalIdentity(size: 101, modifiedNanoseconds: 102, inode: 103)),
            partial: RemoteValidators(etag: "\"p1\"", lastModified: "Mon, 07 Nov 1994 08:49:37 GMT", size: 104))
        let readOnly = try #require(StateStore.open(root: directory.path, mode: .readOnly).store)
        #expect(try readOnly.record(for: "a.bin") == expected)
        readOnly.close()

        let store = try #require(StateStore.open(root: directory.path, mode: .readWrite).store)
        #expect(try store.record(for: "a.bin") == expected)
        try store.save(StateRecord(
            dest: "a.bin", url: "https://h/a2",
            complete: CompleteVersion(
                validators: RemoteValidators(etag: "\"e2\"", lastModified: "Tue, 08 Nov 1994 08:49:37 GMT", size: 200),
                sha256: "cd34", local: LocalIdentity(size: 201, modifiedNanoseconds: 202, inode: 203)),
            partial: RemoteValidators(etag: "\"p2\"", lastModified: "Wed, 09 Nov 1994 08:49:37 GMT", size: 204)))
        try store.save(StateRecord(dest: "b.bin", url: "https://h/b"))
        store.close()

        // Read back with SQL of the test's own: each value in the column of its name.
        #expect(sqlite3_open(path, &db) == SQLITE_OK)
        let reopened = try #require(db)
        defer { sqlite3_close(reopened) }
        var version: Int32 = -1
        var select: OpaquePointer?
        #expect(sqlite3_prepare_v2(reopened, "PRAGMA user_version", -1, &select, nil) == SQLITE_OK)
        if sqlite3_step(select) == SQLITE_ROW { version = sqlite3_column_int(select, 0) }
        sqlite3_finalize(select)
        #expect(version == 1)
        let columns = "url, complete, etag, last_modified, size, sha256, local_size, local_mtime_ns, local_inode, partial, partial_etag, partial_last_modified, partial_size" + (extraColumn ? ", extra" : "")
        func row(_ dest: String) -> [String] {
            var statement: OpaquePointer?
            guard sqlite3_prepare_v2(reopened, "SELECT \(columns) FROM entries WHERE dest = '\(dest)'", -1, &statement, nil) == SQLITE_OK else { return [] }
            defer { sqlite3_finalize(statement) }
            guard sqlite3_step(statement) == SQLITE_ROW else { return [] }
            return (0..<sqlite3_column_count(statement)).map { index in
                sqlite3_column_type(statement, index) == SQLITE_NULL ? "NULL" : String(cString: sqlite3_column_text(statement, index))
            }
        }
        #expect(row("a.bin") == ["https://h/a2", "1", "\"e2\"", "Tue, 08 Nov 1994 08:49:37 GMT", "200", "cd34", "201", "202", "203",
                                 "1", "\"p2\"", "Wed, 09 Nov 1994 08:49:37 GMT", "204"] + (extraColumn ? ["kept"] : []))
        #expect(row("b.bin") == ["https://h/b", "0", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL",
                                 "0", "NULL", "NULL", "NULL"] + (extraColumn ? ["kept"] : []))
    }

    /// A clean close marks the store's file (`StoreCloseMark`) and the next opening, read-write
    /// or read-only, skips `quick_check`; a read-write opening removes the mark at once, so a run
    /// killed meanwhile leaves none; a file changed after its close is checked.
    @Test func onlyAStoreAsItsCleanCloseLeftItSkipsTheCheck() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path(".mirror/state.sqlite")
        func mark() -> StoreCloseMark? {
            let descriptor = open(path, O_RDONLY)
            defer { close(descriptor) }
            return StoreCloseMark.read(descriptor)
        }
        let made = try #require(StateStore.open(root: directory.path, mode: .readWrite).store)
        #expect(made.checkedOnOpening, "a new store is checked")
        for index in 0..<50 { try made.update(dest: "f\(index)", url: "https://h/\(index)") { _ in } }
        made.close()
        // Closed within the tick of its last write, it may not be marked yet; once the clock
        // has passed that write, a close that writes nothing marks it.
        try Self.waitForTheClockToPassTheModificationOf(path)
        let again = try #require(StateStore.open(root: directory.path, mode: .readWrite).store)
        again.close()
        var info = stat()
        #expect(stat(path, &info) == 0)
        #expect(mark() == StoreCloseMark(info), "the close marked the file as it left it")

        let reopened = try #require(StateStore.open(root: directory.path, mode: .readWrite).store)
        #expect(!reopened.checkedOnOpening)
        #expect(mark() == nil, "removed while the store is open: a kill now leaves no mark")
        #expect(try reopened.record(for: "f7")?.url == "https://h/7")
        reopened.close()
        let readOnly = try #require(StateStore.open(root: directory.path, mode: .readOnly).store)
        #expect(!readOnly.checkedOnOpening)
        readOnly.close()
        #expect(mark() != nil, "a read-only opening neither removes nor writes the mark")

        // Written after its close, the file is checked again.
        var times = [timespec(tv_sec: 1_000_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000_000, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
        let touched = try #require(StateStore.open(root: directory.path, mode: .readOnly).store)
        #expect(touched.checkedOnOpening)
        touched.close()
    }

    /// A page damaged after a clean close, which only `quick_check` finds (the header and the
    /// schema read fine), is still found at the opening, and the store replaced.
    @Test func aPageDamagedAfterACleanCloseIsFoundAtTheOpening() throws {
        let directory = try TemporaryDirectory()
        try Self.closedStoreOf2000Records(in: directory)
        let path = directory.path(".mirror/state.sqlite")
        try Self.waitForTheClockToPassTheModificationOf(path)
        try #require(StateStore.open(root: directory.path, mode: .readWrite).store).close()
        let marked = try #require(StateStore.open(root: directory.path, mode: .readOnly).store)
        #expect(!marked.checkedOnOpening, "marked by its clean close")
        marked.close()
        let file = try FileHandle(forUpdating: URL(fileURLWithPath: path))
        try file.seek(toOffset: 4096 * 5)
        file.write(Data(repeating: 0x5a, count: 4096))
        try file.close()

        let opening = StateStore.open(root: directory.path, mode: .readWrite)
        #expect(opening.problem?.kind == .replaced, "\(String(describing: opening.problem))")
        #expect(try opening.store?.record(for: "f7") == nil)
        opening.store?.close()
    }

    /// Damage that `quick_check` reports as rows of its answer, not as an error (every cell
    /// offset of a leaf page out of range), is damage too: the store is replaced at the opening.
    @Test func damageQuickCheckReportsAsRowsIsFoundAtTheOpening() throws {
        let directory = try TemporaryDirectory()
        try Self.closedStoreOf2000Records(in: directory)
        let path = directory.path(".mirror/state.sqlite")
        let pages = try Data(contentsOf: URL(fileURLWithPath: path))
        // The last leaf page of an index B-tree (flag 0x0A: a table WITHOUT ROWID) and its cells.
        var leaf: (offset: Int, cells: Int)?
        for page in 1..<(pages.count / 4096) where pages[page * 4096] == 0x0A {
            let cells = Int(pages[page * 4096 + 3]) << 8 | Int(pages[page * 4096 + 4])
            if cells > 0 { leaf = (page * 4096, cells) }
        }
        let (offset, cells) = try #require(leaf)
        let file = try FileHandle(forUpdating: URL(fileURLWithPath: path))
        try file.seek(toOffset: UInt64(offset + 8))
        file.write(Data(repeating: 0xff, count: 2 * cells))
        try file.close()

        let opening = StateStore.open(root: directory.path, mode: .readWrite)
        #expect(opening.problem?.kind == .replaced, "\(String(describing: opening.problem))")
        opening.store?.close()
    }

    /// A store of 2,000 records, enough pages to damage one, closed.
    static func closedStoreOf2000Records(in directory: TemporaryDirectory) throws {
        let store = try #require(StateStore.open(root: directory.path, mode: .readWrite).store)
        for index in 0..<2000 { try store.update(dest: "f\(index)", url: "https://h/\(index)/long/enough/to/fill/pages") { _ in } }
        store.close()
    }

    /// Waits (at most a second) until the clock file times come from is past the file's
    /// modification time, as `StoreCloseMark.canMark` asks.
    static func waitForTheClockToPassTheModificationOf(_ path: String) throws {
        var info = stat()
        #expect(stat(path, &info) == 0)
        for _ in 0..<1000 {
            var now = timespec()
            clock_gettime(CLOCK_REALTIME_COARSE, &now)
            if StoreCloseMark.canMark(file: info, now: now) { return }
            usleep(1000)
        }
        Issue.record("the clock did not pass the store's modification time within a second")
    }

    @Test func theCloseMarkDecidesTheCheck() {
        var file = stat()
        file.st_ino = 12
        file.st_size = 4096
        file.st_mtim = timespec(tv_sec: 1_700_000_000, tv_nsec: 5)
        let same = StoreCloseMark(file)
        #expect(StoreCloseMark(text: same.text) == same)
        #expect(same.text == "1 12 4096 1700000000 5")
        #expect(!StoreCloseMark.needsCheck(mark: same, file: file))
        #expect(StoreCloseMark.needsCheck(mark: nil, file: file))
        for change in [{ (mark: inout StoreCloseMark) in mark.inode += 1 }, { $0.size += 1 },
                       { $0.modifiedSeconds += 1 }, { $0.modifiedNanoseconds += 1 }] {
            var other = same
            change(&other)
            #expect(StoreCloseMark.needsCheck(mark: other, file: file), "\(other)")
        }
        #expect(StoreCloseMark.canMark(file: file, now: timespec(tv_sec: 1_700_000_000, tv_nsec: 6)))
        #expect(StoreCloseMark.canMark(file: file, now: timespec(tv_sec: 1_700_000_001, tv_nsec: 0)))
        #expect(!StoreCloseMark.canMark(file: file, now: timespec(tv_sec: 1_700_000_000, tv_nsec: 5)), "the same tick")
        #expect(!StoreCloseMark.canMark(file: file, now: timespec(tv_sec: 1_699_999_999, tv_nsec: 999_999_999)))
        for text in ["", "1", "2 12 4096 1700000000 5", "1 12 4096 1700000000", "1 12 4096 1700000000 5 6", "1 x 4096 1700000000 5", "1 12  4096 1700000000"] {
            #expect(StoreCloseMark(text: text) == nil, "\(text)")
        }
    }
}
