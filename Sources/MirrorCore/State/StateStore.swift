import CLinux
import CSQLite
import Glibc
import Synchronization

/// The state store, `state.sqlite` in the state directory (`ROOT/.mirror`, or `state_dir`):
/// per destination, the validators and hash of the version on disk and the local file it was
/// verified as, and the validators a partial download was started from.
///
/// It is a cache. Losing it loses no data: `mirror` then decides by size, as with no store.
/// A store that SQLite finds damaged (not a database, corrupt) is replaced (read-write) or
/// ignored (read-only); one that cannot be opened for any other reason (permissions, a full
/// disk, a newer schema) is left as it is and not used. Either way the opening returns a
/// `StateStoreProblem` that concerns the whole run, for the CLI to say at the default verbosity.
/// A failed read or write of one record is reported the same way and never fails an entry.
public final class StateStore: Sendable {
    public enum Mode: Sendable {
        /// For `sync`: creates the state directory and the store if missing; replaces a
        /// damaged one.
        case readWrite
        /// For `plan` and `verify`: opens an existing store without writing anything, not even
        /// SQLite's lock files; a missing store is not created.
        case readOnly
    }

    /// The result of `open`: the store, if one could be used, and what went wrong otherwise.
    public struct Opening: Sendable {
        public var store: StateStore?
        public var problem: StateStoreProblem?
    }

    public static let schemaVersion: Int32 = 1
    static let fileName = "state.sqlite"

    /// The store's path, for messages.
    public let path: String
    private let connection: Mutex<Connection>
    /// Opened by the first checkpoint during a run (`startLogWriteback`; nil when it could
    /// not be); closed, and never opened again, by `close`.
    private let checkpointer = Mutex<CheckpointerState>(.none)

    private enum CheckpointerState {
        case none
        case open(LogCheckpointer?)
        case closed
    }

    private init(path: String, connection: sending Connection) {
        self.path = path
        self.connection = Mutex(connection)
    }

    /// `state.sqlite`, or `state.shard-K-of-N.sqlite`: each shard writes a store of its own,
    /// so no SQLite file is ever written by two machines.
    static func name(shard: ShardSelection?) -> String {
        shard.map { "state.\($0.fileNamePart).sqlite" } ?? fileName
    }

    /// Opens the store of `root` (in `ROOT/.mirror`, or in `stateDirectory` when given).
    public static func open(root: String, stateDirectory: String? = nil, mode: Mode, shard: ShardSelection? = nil) -> Opening {
        open(in: StateDirectory(root: RootDirectory(path: root), separate: stateDirectory), mode: mode, shard: shard)
    }

    /// The same, in a state directory the run has opened already (see `RunLock.acquire(in:wait:)`).
    static func open(in directory: StateDirectory, mode: Mode, shard: ShardSelection? = nil) -> Opening {
        open(in: directory, mode: mode, name: name(shard: shard))
    }

    /// Opens the store file `name` in the state directory, by a name its descriptor vouches
    /// for (see `DescriptorVFS`). The store keeps a descriptor of the directory of its own.
    static func open(in directory: StateDirectory, mode: Mode, name fileName: String) -> Opening {
        let path = directory.file(fileName)
        func notOpened(_ why: String) -> Opening {
            // The store is opened through /proc/self/fd (see `DescriptorVFS`).
            let hint = access("/proc/self/fd", X_OK) == 0 ? "" : "; /proc is not mounted, and mirror opens the store through /proc/self/fd"
            return Opening(store: nil, problem: StateStoreProblem(.notOpened, "state store \(path) cannot be used (\(why)\(hint)); it is left as it is, and this run decides by size"))
        }
        let held: Int32?
        do {
            held = try directory.withDescriptor(create: mode == .readWrite) { fd throws(TransferFailure) in
                let copy = fcntl(fd, F_DUPFD_CLOEXEC, 0)
                if copy < 0 { throw .localIO(path: directory.path, operation: "open", errno: errno) }
                return copy
            }
        } catch {
            return notOpened("\(error)")
        }
        // No state directory: nothing recorded yet (read-only).
        guard let held else { return Opening(store: nil, problem: nil) }
        guard DescriptorVFS.isRegistered else {
            Glibc.close(held)
            return notOpened("SQLite's unix VFS is missing")
        }
        // Only a regular file is opened: a FIFO at the store's name would block the open (or
        // its first read) forever, and a device or socket is no database.
        var info = stat()
        if fstatat(held, fileName, &info, AT_SYMLINK_NOFOLLOW) == 0, let kind = Self.notRegular(info.st_mode) {
            Glibc.close(held)
            return notOpened(kind == "symbolic link" ? "it is a symbolic link, which mirror does not follow" : "it is a \(kind), not a regular file; it is never opened")
        }
        switch mode {
        case .readOnly:
            guard fstatat(held, fileName, &info, AT_SYMLINK_NOFOLLOW) == 0 else {
                let code = errno
                Glibc.close(held)
                return code == ENOENT ? Opening(store: nil, problem: nil) : notOpened(String(cString: strerror(code)))
            }
            // A run that was killed leaves its last records in the write-ahead log; only then
            // is the log read (through SQLite's existing shared-memory file).
            var log = stat()
            let logHasRecords = fstatat(held, fileName + "-wal", &log, AT_SYMLINK_NOFOLLOW) == 0 && log.st_size > 0
            do {
                let connection = try Connection(directory: held, name: fileName, readOnly: true, immutable: !logHasRecords)
                return Opening(store: StateStore(path: path, connection: connection), problem: nil)
            } catch {
                Glibc.close(held)
                return notOpened("\(error)")
            }
        case .readWrite:
            do {
                return Opening(store: StateStore(path: path, connection: try Connection(directory: held, name: fileName, readOnly: false, immutable: false)), problem: nil)
            } catch StoreError.newerSchema(let version) {
                Glibc.close(held)
                return notOpened("schema \(version), newer than this mirror's \(schemaVersion)")
            } catch {
                guard error.isDamage else {
                    var info = stat()
                    let isLink = fstatat(held, fileName, &info, AT_SYMLINK_NOFOLLOW) == 0 && info.st_mode & S_IFMT == S_IFLNK
                    Glibc.close(held)
                    return notOpened(isLink ? "it is a symbolic link, which mirror does not follow" : "\(error)")
                }
                // A damaged cache is thrown away and started afresh, and said so.
                for suffix in ["", "-wal", "-shm"] { unlinkat(held, fileName + suffix, 0) }
                do {
                    let fresh = try Connection(directory: held, name: fileName, readOnly: false, immutable: false)
                    return Opening(store: StateStore(path: path, connection: fresh), problem: StateStoreProblem(
                        .replaced, "state store \(path) was damaged (\(error)); replaced it with a new one, so this run decides by size"))
                } catch {
                    Glibc.close(held)
                    return notOpened("\(error)")
                }
            }
        }
    }

    /// What a file of `mode` is when it is not a regular file; nil for a regular file.
    static func notRegular(_ mode: mode_t) -> String? {
        switch mode & S_IFMT {
        case S_IFREG: nil
        case S_IFIFO: "FIFO"
        case S_IFLNK: "symbolic link"
        case S_IFDIR: "directory"
        case S_IFCHR: "character device"
        case S_IFBLK: "block device"
        case S_IFSOCK: "socket"
        default: "special file"
        }
    }

    /// Tells the store how many records the run will ask for: with not many more rows than
    /// that, every row is read at once, on a thread and a connection of its own, while the
    /// run's first entries are answered a row at a time (see `RecordsReader`).
    public func expect(entries: Int) {
        connection.withLock { $0.expect(entries: entries) }
    }

    public func record(for dest: String) throws(StoreError) -> StateRecord? {
        try connection.withLock { connection throws(StoreError) in try connection.read(dest) }
    }

    public func save(_ record: StateRecord) throws(StoreError) {
        try connection.withLock { connection throws(StoreError) in try connection.write(record) }
    }

    /// Folds the write-ahead log into the database and closes it, so a later read-only
    /// opening sees every record without reading the log. Further calls fail.
    public func close() {
        // First: the store's own connection, closed last, empties and removes the log; and no
        // writeback or checkpoint starts after this.
        checkpointer.withLock { checkpointer in
            if case .open(let opened) = checkpointer { opened?.close() }
            checkpointer = .closed
        }
        connection.withLock { $0.close() }
    }

    /// Whether the opening ran SQLite's `quick_check` (see `StoreCloseMark`).
    var checkedOnOpening: Bool {
        connection.withLock { $0.checkedOnOpening }
    }

    /// How the connection syncs (`PRAGMA synchronous`; 1: NORMAL).
    func synchronousLevel() throws(StoreError) -> Int32 {
        try connection.withLock { connection throws(StoreError) in try connection.synchronousLevel() }
    }

    /// Starts writing the log's pages to the disk, without waiting for them, and folds the log
    /// into the database once it holds `checkpointLogFrames` pages. Commits are not synced one
    /// by one (`synchronous=NORMAL`), so the log a run leaves is synced, folded in and emptied
    /// when the store is closed, after the run's last file: written back and folded in as the
    /// run goes, that is left with the last commits only (300 new files left a 1 MB log, whose
    /// sync at the end took 9 ms and emptying 3 to 4 ms). For a run that makes its files
    /// durable, after each group of them, on the thread that wrote the group.
    ///
    /// The checkpoint goes through a connection of its own (`LogCheckpointer`), so the store's
    /// connection, which the engine's thread reads and writes records through, is never held
    /// meanwhile: SQLite lets a checkpoint run beside a writer.
    func startLogWriteback() {
        // Under the checkpointer's lock, which `close` takes first (so nothing here runs once
        // it has), and outside the connection's, which the engine's thread waits on to read
        // a record: the writeback and the checkpoint take milliseconds.
        checkpointer.withLock { checkpointer in
            if case .closed = checkpointer { return }
            let (log, logFrames) = connection.withLock { $0.openLog() }
            if log >= 0 { _ = mirror_start_writeback(log, 0, 0) }
            guard logFrames >= Self.checkpointLogFrames else { return }
            if case .none = checkpointer {
                checkpointer = .open(connection.withLock { $0.openCheckpointer() })
            }
            if case .open(let opened) = checkpointer { opened?.checkpoint() }
        }
    }

    /// The pages in the log at which `startLogWriteback` folds it into the database (256 KiB
    /// of 4 KiB pages).
    static let checkpointLogFrames = 64
    /// The pages at which the store's own connection folds the log in at its next commit,
    /// as SQLite does by default (a run that does not write it back).
    static let autocheckpointLogFrames = 1000

    /// Records, in one transaction, that each `dest` now holds `version` (nil: none known)
    /// and no partial file: a group of commits. All are written or none.
    public func recordCommitted(_ commits: [(dest: String, url: String, version: CompleteVersion?)]) throws(StoreError) {
        guard !commits.isEmpty else { return }
        try connection.withLock { connection throws(StoreError) in
            try connection.transaction { () throws(StoreError) in
                for commit in commits {
                    var record = try connection.read(commit.dest) ?? StateRecord(dest: commit.dest, url: commit.url)
                    record.url = commit.url
                    record.partial = nil
                    record.complete = commit.version
                    try connection.write(record)
                }
            }
        }
    }

    /// Every record in the store, in no particular order: what `prune` compares with the manifest.
    public func allRecords() throws(StoreError) -> [StateRecord] {
        try connection.withLock { connection throws(StoreError) in try connection.readAll() }
    }

    /// Removes the records of `dests`, in one transaction: all or none.
    public func removeRecords(_ dests: [String]) throws(StoreError) {
        guard !dests.isEmpty else { return }
        try connection.withLock { connection throws(StoreError) in
            try connection.transaction { () throws(StoreError) in
                for dest in dests { try connection.remove(dest) }
            }
        }
    }

    /// Notes that the prune is moving the file at `note.path` into its trash (see
    /// `PruneTrash`), replacing a note of the same path: committed before the move.
    func noteTrash(_ note: PruneTrash.Note) throws(StoreError) {
        try connection.withLock { connection throws(StoreError) in try connection.noteTrash(note) }
    }

    /// Forgets the note of `path`: nothing of it is left in a trash.
    func forgetTrash(_ path: String) throws(StoreError) {
        try connection.withLock { connection throws(StoreError) in try connection.forgetTrash(path) }
    }

    /// Every move into a trash that no prune has finished, by path.
    func trashNotes() throws(StoreError) -> [PruneTrash.Note] {
        try connection.withLock { connection throws(StoreError) in try connection.trashNotes() }
    }

    /// The segment map of `dest`'s `.part` (see `SegmentMap`), if one is recorded.
    func segmentMap(for dest: String) throws(StoreError) -> SegmentMap? {
        try connection.withLock { connection throws(StoreError) in try connection.segmentMap(dest) }
    }

    /// Records `map` as `dest`'s, replacing any other.
    func saveSegmentMap(_ map: SegmentMap, for dest: String) throws(StoreError) {
        try connection.withLock { connection throws(StoreError) in try connection.saveSegmentMap(map, dest: dest) }
    }

    /// Forgets `dest`'s segment map: its `.part` is gone, complete, or no longer segmented.
    func removeSegmentMap(for dest: String) throws(StoreError) {
        try connection.withLock { connection throws(StoreError) in try connection.removeSegmentMap(dest) }
    }

    /// Updates the record of `dest` in place; `change` receives nil when there is none.
    public func update(dest: String, url: String, _ change: (inout StateRecord) -> Void) throws(StoreError) {
        try connection.withLock { connection throws(StoreError) in
            var record = try connection.read(dest) ?? StateRecord(dest: dest, url: url)
            record.url = url
            change(&record)
            try connection.write(record)
        }
    }
}

/// A failure of the state store: SQLite's code and message.
public enum StoreError: Error, Sendable, CustomStringConvertible {
    case sqlite(code: Int32, message: String)
    case newerSchema(Int32)

    /// Whether SQLite found the file damaged (not a database, or corrupt): only such a store
    /// is replaced. Every other failure (permissions, I/O, a full disk, a busy lock) says
    /// nothing against the records in it.
    var isDamage: Bool {
        guard case .sqlite(let code, _) = self else { return false }
        return code & 0xff == SQLITE_CORRUPT || code & 0xff == SQLITE_NOTADB
    }

    public var description: String {
        switch self {
        case .sqlite(let code, let message): return "SQLite error \(code): \(message)"
        case .newerSchema(let version): return "schema version \(version) is newer than this mirror's"
        }
    }
}

/// One SQLite connection and its prepared statements. Used under the store's lock only.
private final class Connection {
    private let db: OpaquePointer
    /// The state directory, by whose descriptor SQLite names the store and its `-wal` and
    /// `-shm` files (see `DescriptorVFS`): open as long as the connection is, closed after it.
    private let directory: Int32
    /// The store's name in `directory`, its write-ahead log's, and the log opened for
    /// `startLogWriteback` (-1 until then).
    private let fileName: String
    private var logName: String { fileName + "-wal" }
    private var logDescriptor: Int32 = -1
    /// The pages in the log after the last commit, as SQLite's log hook tells them.
    private let logFrames = LogFrameCount()
    /// Writes one record of `entries`; nil when the store is open read-only.
    private let upsert: NamedStatement<EntryColumn>?
    /// Every record, read in one pass beside the run (`RecordsReader`) and kept in step with
    /// each write: one query per run instead of one per entry. Keyed by the dest's bytes, as
    /// SQLite compares TEXT; Swift's String == would take "é" and "e\u{301}", two files, for
    /// one. Only when the store holds not many more rows than the run has entries (see
    /// `expect`); a store shared with other, larger manifests is read a record at a time.
    private var records: [DestKey: StateRecord]?
    private var decidedOnRecords = false
    /// Reading every row beside the run, from `expect` until its rows are taken into `records`.
    private var reader: RecordsReader?
    /// What this connection wrote (a record) or removed (nil) since `reader` began: the rows it
    /// read may predate it, and this goes over them when they are taken.
    private var writtenSinceReader: [DestKey: StateRecord?]?
    /// The one-row SELECT, prepared at its first use and kept: preparing it is most of a
    /// row's read.
    private var selectOne: NamedStatement<EntryColumn>?
    /// How SQLite was asked to open the store, for `reader`'s connection.
    private let openedAs: (name: String, flags: Int32)

    /// The columns of `entries` (see the schema in `init`), by name: every statement on the
    /// table lists them from here and binds and reads them by name (see `NamedStatement`).
    enum EntryColumn: Int, StoreColumn {
        case dest, url
        /// 1 when the version below is on disk, verified; the next seven describe it.
        case complete
        case etag, lastModified, size, sha256, localSize, localModifiedNanoseconds, localInode
        /// 1 when a partial download was started from the validators after it.
        case partial
        case partialEtag, partialLastModified, partialSize

        var name: String {
            switch self {
            case .dest: "dest"
            case .url: "url"
            case .complete: "complete"
            case .etag: "etag"
            case .lastModified: "last_modified"
            case .size: "size"
            case .sha256: "sha256"
            case .localSize: "local_size"
            case .localModifiedNanoseconds: "local_mtime_ns"
            case .localInode: "local_inode"
            case .partial: "partial"
            case .partialEtag: "partial_etag"
            case .partialLastModified: "partial_last_modified"
            case .partialSize: "partial_size"
            }
        }
    }

    private var isOpen = true
    private let readOnly: Bool
    /// Whether the opening ran `quick_check` (see `StoreCloseMark`).
    let checkedOnOpening: Bool
    /// Set when SQLite found the file damaged during the run: the close then leaves no mark.
    private var sawDamage = false

    /// Opens the store `name` in the directory open as `directory`, which the connection owns
    /// once this succeeds (and the caller still does when it throws).
    /// - Parameter immutable: read without any locking or shared memory: nothing is written
    ///   next to a store that `plan` reads.
    init(directory: Int32, name file: String, readOnly: Bool, immutable: Bool) throws(StoreError) {
        var handle: OpaquePointer?
        let flags = readOnly
            ? SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX
            : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        // The mark of the last clean close, read and (to write) removed before SQLite reads
        // anything. No file yet: nothing to read, and a new store's check costs nothing.
        var needsCheck = true
        let descriptor = openat(directory, file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        if descriptor >= 0 {
            var info = stat()
            if fstat(descriptor, &info) == 0 {
                needsCheck = StoreCloseMark.needsCheck(mark: StoreCloseMark.read(descriptor), file: info)
            }
            if !readOnly { StoreCloseMark.remove(descriptor) }
            Glibc.close(descriptor)
        }
        checkedOnOpening = needsCheck
        self.readOnly = readOnly
        let path = DescriptorVFS.path(of: file, in: directory)
        let name = readOnly ? "file:" + Self.uriEscaped(path) + (immutable ? "?immutable=1" : "?mode=ro") : path
        let opened = sqlite3_open_v2(name, &handle, flags, DescriptorVFS.name)
        openedAs = (name, flags & ~SQLITE_OPEN_CREATE)
        guard let handle else { throw .sqlite(code: opened, message: "cannot open") }
        guard opened == SQLITE_OK else {
            let error = StoreError.sqlite(code: opened, message: String(cString: sqlite3_errmsg(handle)))
            sqlite3_close(handle)
            throw error
        }
        db = handle
        self.directory = directory
        fileName = file
        do throws(StoreError) {
            sqlite3_busy_timeout(db, 5000)
            if !readOnly {
                // Replaces SQLite's own hook, which folds the log in at 1000 pages: the hook
                // does that too, and notes the count for `startLogWriteback`.
                sqlite3_wal_hook(db, { context, db, name, frames in
                    let count = Unmanaged<LogFrameCount>.fromOpaque(context!).takeUnretainedValue()
                    count.count = Int(frames)
                    if Int(frames) >= StateStore.autocheckpointLogFrames { sqlite3_wal_checkpoint(db, name) }
                    return SQLITE_OK
                }, Unmanaged.passUnretained(logFrames).toOpaque())
            }
            let version = try Self.userVersion(db)
            if version > StateStore.schemaVersion { throw .newerSchema(version) }
            if !readOnly {
                // A store being made holds no record yet, so its making is not synced (six
                // syncs before a first run's first request): a crash meanwhile leaves a file
                // SQLite finds damaged, which the next run replaces, or one without its tables,
                // which it makes again. Records are synced as in any store.
                let making = version < StateStore.schemaVersion
                try Self.execute(db, making ? "PRAGMA synchronous=OFF" : "PRAGMA synchronous=NORMAL")
                try Self.execute(db, "PRAGMA journal_mode=WAL")
                if making {
                    try Self.execute(db, """
                        CREATE TABLE IF NOT EXISTS entries (
                            dest TEXT PRIMARY KEY NOT NULL,
                            url TEXT NOT NULL,
                            complete INTEGER NOT NULL DEFAULT 0,
                            etag TEXT, last_modified TEXT, size INTEGER, sha256 TEXT,
                            local_size INTEGER, local_mtime_ns INTEGER, local_inode INTEGER,
                            partial INTEGER NOT NULL DEFAULT 0,
                            partial_etag TEXT, partial_last_modified TEXT, partial_size INTEGER
                        ) WITHOUT ROWID
                        """)
                    try Self.execute(db, "PRAGMA user_version=\(StateStore.schemaVersion)")
                }
                // Added within schema 1: a mirror that does not know the table leaves it alone.
                try Self.execute(db, """
                    CREATE TABLE IF NOT EXISTS \(Self.trashTable) (
                        path TEXT PRIMARY KEY NOT NULL,
                        size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, inode INTEGER NOT NULL
                    ) WITHOUT ROWID
                    """)
                // Added within schema 1, as the trash notes.
                try Self.execute(db, """
                    CREATE TABLE IF NOT EXISTS \(Self.segmentTable) (
                        dest TEXT PRIMARY KEY NOT NULL,
                        url TEXT NOT NULL, total INTEGER NOT NULL, etag TEXT, last_modified TEXT,
                        durable TEXT NOT NULL
                    ) WITHOUT ROWID
                    """)
                if making { try Self.execute(db, "PRAGMA synchronous=NORMAL") }
            }
            // A quick structural check, so a damaged file is found here and not mid-run; not
            // for a file that is as its last clean close left it.
            if needsCheck { try Self.quickCheck(db) }
            let updates = EntryColumn.allCases.filter { $0 != .dest }.map { "\($0.name) = excluded.\($0.name)" }
            upsert = readOnly ? nil : try NamedStatement(db, """
                INSERT INTO entries (\(EntryColumn.names)) VALUES (\(EntryColumn.parameters))
                ON CONFLICT(dest) DO UPDATE SET \(updates.joined(separator: ", "))
                """)
        } catch {
            sqlite3_close_v2(db)
            throw error
        }
    }

    deinit {
        close()
    }

    func close() {
        guard isOpen else { return }
        isOpen = false
        // Its connection names the store by the directory's descriptor, closed below.
        reader?.stop()
        reader = nil
        writtenSinceReader = nil
        upsert?.finalize()
        selectOne?.finalize()
        selectOne = nil
        let checkpointed = sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)", nil, nil, nil) == SQLITE_OK
        let closed = sqlite3_close_v2(db) == SQLITE_OK
        if logDescriptor >= 0 { Glibc.close(logDescriptor) }
        if !readOnly, checkpointed, closed, !sawDamage { markClosed() }
        Glibc.close(directory)
        // The rows are let go with the store, not here: the runner keeps its last run's store
        // until it is released, and a command line that exits once it has the reports does
        // not spend its end freeing them (20,000 rows: about 3.5 ms). A closed store reads none.
    }

    /// Marks the file as this clean close leaves it (`StoreCloseMark`), when every record is
    /// in it: SQLite has removed the log (or left it empty).
    private func markClosed() {
        var log = stat()
        if fstatat(directory, logName, &log, AT_SYMLINK_NOFOLLOW) == 0, log.st_size > 0 { return }
        let descriptor = openat(directory, fileName, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard descriptor >= 0 else { return }
        var info = stat()
        if fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG { StoreCloseMark.write(descriptor) }
        Glibc.close(descriptor)
    }

    /// The log, opened for writeback (-1 when it cannot be), and the pages it holds.
    func openLog() -> (descriptor: Int32, frames: Int) {
        guard isOpen else { return (-1, 0) }
        // The log stays the same file while the connection is open (SQLite removes it only
        // when the last connection closes); writeback needs no write access to it.
        if logDescriptor < 0 { logDescriptor = openat(directory, logName, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) }
        return (logDescriptor, logFrames.count)
    }

    /// A second connection to the same store, for checkpoints; nil when it cannot be opened.
    func openCheckpointer() -> LogCheckpointer? {
        guard isOpen else { return nil }
        return LogCheckpointer(path: DescriptorVFS.path(of: fileName, in: directory))
    }

    private func ensureOpen() throws(StoreError) {
        if !isOpen { throw .sqlite(code: SQLITE_MISUSE, message: "the state store is closed") }
    }

    /// The run will ask for about this many records: every row is read beside it from now
    /// on, once (`RecordsReader`).
    func expect(entries: Int) {
        guard isOpen, !decidedOnRecords, reader == nil else { return }
        writtenSinceReader = [:]
        reader = RecordsReader(name: openedAs.name, flags: openedAs.flags, expected: entries)
    }

    func read(_ dest: String) throws(StoreError) -> StateRecord? {
        try ensureOpen()
        if records == nil, let reader, let rows = reader.take(waiting: false) { takeRecords(rows) }
        if let records { return records[DestKey(dest)] }
        return try readOne(dest)
    }

    /// The row of `dest`, by the kept statement.
    private func readOne(_ dest: String) throws(StoreError) -> StateRecord? {
        if selectOne == nil {
            selectOne = try NamedStatement<EntryColumn>(db, "SELECT \(EntryColumn.names) FROM entries WHERE dest = :dest")
        }
        let select = selectOne!
        defer { select.reset() }
        select.bind(.dest, dest)
        var found: StateRecord?
        let step = Self.eachRow(of: select) { found = $1 }
        guard step == SQLITE_DONE else { throw failure(step) }
        return found
    }

    /// Takes the rows `reader` read (nil: none, the table being much larger than the run or
    /// unreadable there), with what was written since it began over them; from then on
    /// records are looked up in them, or read a row at a time.
    private func takeRecords(_ rows: RecordsReader.Rows?) {
        reader = nil
        decidedOnRecords = true
        if case .read(var read) = rows, let written = writtenSinceReader {
            for (key, record) in written { read[key] = record }
            records = read
        }
        writtenSinceReader = nil
    }

    func readAll() throws(StoreError) -> [StateRecord] {
        try ensureOpen()
        if let records { return Array(records.values) }
        let select = try NamedStatement<EntryColumn>(db, "SELECT \(EntryColumn.names) FROM entries")
        defer { select.finalize() }
        var found: [StateRecord] = []
        let step = Self.eachRow(of: select) { found.append($1) }
        guard step == SQLITE_DONE else { throw failure(step) }
        return found
    }

    func remove(_ dest: String) throws(StoreError) {
        try change("DELETE FROM entries WHERE dest = :dest") { (statement: NamedStatement<EntryColumn>) in
            statement.bind(.dest, dest)
        }
        records?[DestKey(dest)] = nil
        writtenSinceReader?.updateValue(nil, forKey: DestKey(dest))
    }

    /// Runs the one-statement change `sql`, its parameters bound by `bind`.
    private func change<Column: StoreColumn>(_ sql: String, _ bind: (NamedStatement<Column>) -> Void) throws(StoreError) {
        try ensureOpen()
        let statement = try NamedStatement<Column>(db, sql)
        defer { statement.finalize() }
        bind(statement)
        let step = statement.step()
        guard step == SQLITE_DONE else { throw failure(step) }
    }

    /// The notes of a prune's moves into its trash (see `PruneTrash`).
    private static let trashTable = "prune_trash"

    /// The columns of the trash notes, by name (see `EntryColumn`).
    enum TrashColumn: Int, StoreColumn {
        case path, size, modifiedNanoseconds, inode

        var name: String {
            switch self {
            case .path: "path"
            case .size: "size"
            case .modifiedNanoseconds: "mtime_ns"
            case .inode: "inode"
            }
        }
    }

    func noteTrash(_ note: PruneTrash.Note) throws(StoreError) {
        try change("INSERT OR REPLACE INTO \(Self.trashTable) (\(TrashColumn.names)) VALUES (\(TrashColumn.parameters))") {
            (statement: NamedStatement<TrashColumn>) in
            statement.bind(.path, note.path)
            statement.bind(.size, note.identity.size)
            statement.bind(.modifiedNanoseconds, note.identity.modifiedNanoseconds)
            statement.bind(.inode, Int64(bitPattern: note.identity.inode))
        }
    }

    func forgetTrash(_ path: String) throws(StoreError) {
        try change("DELETE FROM \(Self.trashTable) WHERE path = :path") { (statement: NamedStatement<TrashColumn>) in
            statement.bind(.path, path)
        }
    }

    /// The notes, in path order; none in a store made before the table was (opened read-only).
    func trashNotes() throws(StoreError) -> [PruneTrash.Note] {
        try ensureOpen()
        let exists = try Self.prepare(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '\(Self.trashTable)'")
        let hasTable = sqlite3_step(exists) == SQLITE_ROW
        sqlite3_finalize(exists)
        guard hasTable else { return [] }
        let select = try NamedStatement<TrashColumn>(db, "SELECT \(TrashColumn.names) FROM \(Self.trashTable) ORDER BY path")
        defer { select.finalize() }
        var notes: [PruneTrash.Note] = []
        while true {
            let step = select.step()
            if step == SQLITE_DONE { return notes }
            guard step == SQLITE_ROW else { throw failure(step) }
            notes.append(PruneTrash.Note(path: select.text(.path) ?? "", identity: LocalIdentity(
                size: select.integer(.size) ?? 0, modifiedNanoseconds: select.integer(.modifiedNanoseconds) ?? 0,
                inode: UInt64(bitPattern: select.integer(.inode) ?? 0))))
        }
    }

    /// The maps of segmented partial files (see `SegmentMap`).
    private static let segmentTable = "segment_maps"

    /// The columns of the segment maps, by name (see `EntryColumn`).
    enum SegmentColumn: Int, StoreColumn {
        case dest, url, total, etag, lastModified, durable

        var name: String {
            switch self {
            case .dest: "dest"
            case .url: "url"
            case .total: "total"
            case .etag: "etag"
            case .lastModified: "last_modified"
            case .durable: "durable"
            }
        }
    }

    /// Whether the store holds any segment map: looked at once, so that a run of entries none
    /// of which is segmented asks nothing more per entry.
    private var anySegmentMap: Bool?

    func segmentMap(_ dest: String) throws(StoreError) -> SegmentMap? {
        try ensureOpen()
        if anySegmentMap == nil {
            let exists = try Self.prepare(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '\(Self.segmentTable)'")
            let hasTable = sqlite3_step(exists) == SQLITE_ROW
            sqlite3_finalize(exists)
            if hasTable {
                let any = try Self.prepare(db, "SELECT 1 FROM \(Self.segmentTable) LIMIT 1")
                anySegmentMap = sqlite3_step(any) == SQLITE_ROW
                sqlite3_finalize(any)
            } else {
                anySegmentMap = false
            }
        }
        guard anySegmentMap == true else { return nil }
        let select = try NamedStatement<SegmentColumn>(db, "SELECT \(SegmentColumn.names) FROM \(Self.segmentTable) WHERE dest = :dest")
        defer { select.finalize() }
        select.bind(.dest, dest)
        let step = select.step()
        if step == SQLITE_DONE { return nil }
        guard step == SQLITE_ROW else { throw failure(step) }
        // A map that cannot be read is a map all the same: its `.part` must not be taken by size.
        let durable = ByteRanges.decode(select.text(.durable) ?? "") ?? []
        let version = SegmentVersion(
            url: select.text(.url) ?? "", total: select.integer(.total) ?? 0,
            etag: select.text(.etag), lastModified: select.text(.lastModified))
        return SegmentMap(version: version, durable: durable)
    }

    func saveSegmentMap(_ map: SegmentMap, dest: String) throws(StoreError) {
        try change("INSERT OR REPLACE INTO \(Self.segmentTable) (\(SegmentColumn.names)) VALUES (\(SegmentColumn.parameters))") {
            (statement: NamedStatement<SegmentColumn>) in
            statement.bind(.dest, dest)
            statement.bind(.url, map.version.url)
            statement.bind(.total, map.version.total)
            statement.bind(.etag, map.version.etag)
            statement.bind(.lastModified, map.version.lastModified)
            statement.bind(.durable, ByteRanges.encode(map.durable))
        }
        anySegmentMap = true
    }

    func removeSegmentMap(_ dest: String) throws(StoreError) {
        try change("DELETE FROM \(Self.segmentTable) WHERE dest = :dest") { (statement: NamedStatement<SegmentColumn>) in
            statement.bind(.dest, dest)
        }
    }

    /// Every row of `db`, when it holds at most max(1,024, 2 × `expected`); they are counted
    /// first, up to one row past that bound (a store shared with much larger manifests is not
    /// scanned to its end), and made room for at once (a table grown by doubling moved each of
    /// a million records about twice on the way). `failed` carries the step's code when a row
    /// could not be read or `stopping` said so; a statement that cannot be prepared throws.
    fileprivate static func readWhole(_ db: OpaquePointer, expected: Int, stopping: () -> Bool = { false }) throws(StoreError) -> Whole {
        let most = max(1024, 2 * expected)
        if stopping() { return .failed(SQLITE_INTERRUPT) }
        let count = try NamedStatement<EntryColumn>(db, "SELECT count(*) FROM (SELECT 1 FROM entries LIMIT \(most + 1))")
        defer { count.finalize() }
        let counted = count.step()
        guard counted == SQLITE_ROW else { return .failed(counted) }
        let rows = Int(sqlite3_column_int64(count.handle, 0))
        guard rows <= most else { return .tooMany }
        if stopping() { return .failed(SQLITE_INTERRUPT) }
        let select = try NamedStatement<EntryColumn>(db, "SELECT \(EntryColumn.names) FROM entries")
        defer { select.finalize() }
        var found: [DestKey: StateRecord] = [:]
        found.reserveCapacity(rows)
        let step = eachRow(of: select, stopping: stopping) { found[$0] = $1 }
        return step == SQLITE_DONE ? .rows(found) : .failed(step)
    }

    /// What `readWhole` read.
    fileprivate enum Whole {
        case rows([DestKey: StateRecord])
        /// The store holds many more rows than the run has entries.
        case tooMany
        /// The last step's code.
        case failed(Int32)
    }

    /// Steps `select` (of `EntryColumn.names`) to its end, handing each row to `take`, unless
    /// `stopping` says so (asked every 1,024 rows); the last step's code (`SQLITE_DONE` when
    /// every row was read).
    fileprivate static func eachRow(of select: NamedStatement<EntryColumn>, stopping: () -> Bool = { false },
                                    _ take: (DestKey, StateRecord) -> Void) -> Int32 {
        var count = 0
        while true {
            count += 1
            if count & 1023 == 0, stopping() { return SQLITE_INTERRUPT }
            let step = select.step()
            guard step == SQLITE_ROW else { return step }
            let dest = select.text(.dest) ?? ""
            var record = StateRecord(dest: dest, url: select.text(.url) ?? "")
            if select.flag(.complete), let localSize = select.integer(.localSize),
               let mtime = select.integer(.localModifiedNanoseconds), let inode = select.integer(.localInode) {
                record.complete = CompleteVersion(
                    validators: RemoteValidators(etag: select.text(.etag), lastModified: select.text(.lastModified), size: select.integer(.size)),
                    sha256: select.text(.sha256),
                    local: LocalIdentity(size: localSize, modifiedNanoseconds: mtime, inode: UInt64(bitPattern: inode))
                )
            }
            if select.flag(.partial) {
                record.partial = RemoteValidators(
                    etag: select.text(.partialEtag), lastModified: select.text(.partialLastModified), size: select.integer(.partialSize))
            }
            take(DestKey(dest), record)
        }
    }

    /// Every row of the store SQLite opens as `name` with `flags`, read by a connection of its
    /// own; nil when it holds many more rows than `expected` (max(1,024, 2 × that)), cannot be
    /// read, or `stopping` was set.
    fileprivate static func readEverything(name: String, flags: Int32, expected: Int, stopping: () -> Bool) -> [DestKey: StateRecord]? {
        var handle: OpaquePointer?
        let opened = sqlite3_open_v2(name, &handle, flags, DescriptorVFS.name)
        defer { sqlite3_close_v2(handle) }
        guard opened == SQLITE_OK, let db = handle else { return nil }
        sqlite3_busy_timeout(db, 5000)
        guard case .rows(let rows) = try? readWhole(db, expected: expected, stopping: stopping) else { return nil }
        return rows
    }

    /// Runs `body` in one transaction; a failure rolls it back, and the records read at
    /// start are no longer trusted (they may hold rolled-back writes).
    func transaction(_ body: () throws(StoreError) -> Void) throws(StoreError) {
        try ensureOpen()
        try Self.execute(db, "BEGIN IMMEDIATE")
        do {
            try body()
            try Self.execute(db, "COMMIT")
        } catch {
            sqlite3_exec(db, "ROLLBACK", nil, nil, nil)
            records = nil
            // Nor are what this connection wrote meanwhile: the rows being read beside the
            // run are not taken.
            reader?.stop()
            reader = nil
            writtenSinceReader = nil
            decidedOnRecords = true
            if error.isDamage { sawDamage = true }
            throw error
        }
    }

    func write(_ record: StateRecord) throws(StoreError) {
        try ensureOpen()
        guard let upsert else { throw .sqlite(code: SQLITE_READONLY, message: "the state store is open read-only") }
        // Every column not bound below is NULL: the bindings are cleared after each use.
        defer { upsert.reset() }
        upsert.bind(.dest, record.dest)
        upsert.bind(.url, record.url)
        upsert.bind(.complete, record.complete != nil)
        if let complete = record.complete {
            upsert.bind(.etag, complete.validators.etag)
            upsert.bind(.lastModified, complete.validators.lastModified)
            upsert.bind(.size, complete.validators.size)
            upsert.bind(.sha256, complete.sha256)
            upsert.bind(.localSize, complete.local.size)
            upsert.bind(.localModifiedNanoseconds, complete.local.modifiedNanoseconds)
            upsert.bind(.localInode, Int64(bitPattern: complete.local.inode))
        }
        upsert.bind(.partial, record.partial != nil)
        if let partial = record.partial {
            upsert.bind(.partialEtag, partial.etag)
            upsert.bind(.partialLastModified, partial.lastModified)
            upsert.bind(.partialSize, partial.size)
        }
        let step = upsert.step()
        guard step == SQLITE_DONE else { throw failure(step) }
        records?[DestKey(record.dest)] = record
        writtenSinceReader?.updateValue(record, forKey: DestKey(record.dest))
    }

    private func failure(_ code: Int32) -> StoreError {
        let error = StoreError.sqlite(code: code, message: String(cString: sqlite3_errmsg(db)))
        if error.isDamage { sawDamage = true }
        return error
    }

    /// `PRAGMA quick_check`, its answer read: SQLite reports most damage it finds as rows (and
    /// `SQLITE_OK`), raising an error only for damage that stops the check itself. Anything but a
    /// single `ok` is damage (`SQLITE_CORRUPT`), named by its first row.
    private static func quickCheck(_ db: OpaquePointer) throws(StoreError) {
        let statement = try prepare(db, "PRAGMA quick_check")
        defer { sqlite3_finalize(statement) }
        var rows: [String] = []
        while true {
            let code = sqlite3_step(statement)
            if code == SQLITE_DONE { break }
            guard code == SQLITE_ROW else { throw .sqlite(code: code, message: String(cString: sqlite3_errmsg(db))) }
            rows.append(sqlite3_column_text(statement, 0).map { String(cString: $0) } ?? "")
        }
        if rows != ["ok"] {
            throw .sqlite(code: SQLITE_CORRUPT, message: "quick_check: " + (rows.first ?? "no answer"))
        }
    }

    private static func execute(_ db: OpaquePointer, _ sql: String) throws(StoreError) {
        var message: UnsafeMutablePointer<CChar>?
        let code = sqlite3_exec(db, sql, nil, nil, &message)
        if code != SQLITE_OK {
            let text = message.map { String(cString: $0) } ?? String(cString: sqlite3_errmsg(db))
            sqlite3_free(message)
            throw .sqlite(code: code, message: text)
        }
    }

    private static func prepare(_ db: OpaquePointer, _ sql: String) throws(StoreError) -> OpaquePointer {
        var statement: OpaquePointer?
        let code = sqlite3_prepare_v2(db, sql, -1, &statement, nil)
        guard code == SQLITE_OK, let statement else {
            throw .sqlite(code: code, message: String(cString: sqlite3_errmsg(db)))
        }
        return statement
    }

    private static func userVersion(_ db: OpaquePointer) throws(StoreError) -> Int32 {
        try integerPragma(db, "user_version")
    }

    /// The connection's `PRAGMA synchronous` (1: NORMAL).
    func synchronousLevel() throws(StoreError) -> Int32 {
        try Self.integerPragma(db, "synchronous")
    }

    private static func integerPragma(_ db: OpaquePointer, _ name: String) throws(StoreError) -> Int32 {
        let statement = try prepare(db, "PRAGMA \(name)")
        defer { sqlite3_finalize(statement) }
        let step = sqlite3_step(statement)
        guard step == SQLITE_ROW else { throw .sqlite(code: step, message: String(cString: sqlite3_errmsg(db))) }
        return sqlite3_column_int(statement, 0)
    }

    /// Percent-encodes what a SQLite URI would misread: `%`, `?`, `#` and non-ASCII bytes.
    private static func uriEscaped(_ path: String) -> String {
        let digits = Array("0123456789ABCDEF")
        var escaped = ""
        for byte in path.utf8 {
            if byte >= 0x80 || byte == UInt8(ascii: "%") || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#") {
                escaped += "%" + String(digits[Int(byte >> 4)]) + String(digits[Int(byte & 0x0f)])
            } else {
                escaped.unicodeScalars.append(Unicode.Scalar(byte))
            }
        }
        return escaped
    }
}

/// Reads every row of a store on a thread and an SQLite connection of its own, beside the
/// run that asked (`Connection.expect`): a run's first entries are answered a row at a time
/// meanwhile, and the engine's thread, which asks for each entry's record, never reads the
/// whole table itself (2,000 rows are about 15 million instructions).
private final class RecordsReader: Sendable {
    enum Rows: Sendable {
        case read([DestKey: StateRecord])
        /// Many more rows than the run's entries, or the table could not be read.
        case none
    }

    private final class Shared: Sendable {
        /// nil while reading; taken once.
        let rows = Mutex<Rows?>(nil)
        let stopping = Atomic<Bool>(false)
    }

    private let shared = Shared()
    private let thread: JoinableThread

    init(name: String, flags: Int32, expected: Int) {
        let shared = self.shared
        thread = JoinableThread {
            let read = Connection.readEverything(name: name, flags: flags, expected: expected, stopping: { shared.stopping.load(ordering: .relaxed) })
            shared.rows.withLock { $0 = read.map(Rows.read) ?? Rows.none }
        }
    }

    /// The rows once read (`waiting`: waits for them), taken out; nil while they are not.
    func take(waiting: Bool) -> Rows? {
        if waiting { thread.join() }
        return shared.rows.withLock { rows in
            guard let read = rows else { return nil }
            rows = Rows.none
            return read
        }
    }

    /// Ends the reading (at its next thousand rows) and waits for its thread.
    func stop() {
        shared.stopping.store(true, ordering: .relaxed)
        thread.join()
    }

    deinit { stop() }
}

/// A connection that only folds the store's log into the database (`PRAGMA wal_checkpoint`),
/// beside the store's own connection, which goes on writing meanwhile. Used from one thread at
/// a time (its owner's mutex).
final class LogCheckpointer {
    private var db: OpaquePointer?

    init?(path: String) {
        var handle: OpaquePointer?
        let opened = sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, DescriptorVFS.name)
        // Until it reads the database, a connection does not know the store keeps a log, and
        // a checkpoint through it does nothing.
        guard opened == SQLITE_OK, let handle, sqlite3_exec(handle, "PRAGMA journal_mode=WAL", nil, nil, nil) == SQLITE_OK else {
            sqlite3_close_v2(handle)
            return nil
        }
        db = handle
    }

    deinit { close() }

    /// Folds in what the log holds that no reader still needs, without waiting for the writer:
    /// the next commit starts the log from its beginning again once all of it is folded in.
    func checkpoint() {
        guard let db else { return }
        sqlite3_wal_checkpoint_v2(db, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
    }

    func close() {
        guard let db else { return }
        sqlite3_close_v2(db)
        self.db = nil
    }
}

/// The pages in a store's log after its last commit (`sqlite3_wal_hook`).
final class LogFrameCount {
    var count = 0
}
