import CSQLite

/// Another writer on a state store: holds its write lock (`BEGIN IMMEDIATE`) until released,
/// so mirror can still read records (WAL readers are not blocked) but not write any.
final class StoreWriteLock {
    private var db: OpaquePointer?

    init(path: String) throws {
        guard sqlite3_open(path, &db) == SQLITE_OK else {
            throw SystemCallError("sqlite3_open \(path)")
        }
        guard sqlite3_exec(db, "BEGIN IMMEDIATE", nil, nil, nil) == SQLITE_OK else {
            sqlite3_close(db)
            throw SystemCallError("BEGIN IMMEDIATE on \(path)")
        }
    }

    func release() {
        guard let db else { return }
        sqlite3_exec(db, "ROLLBACK", nil, nil, nil)
        sqlite3_close(db)
        self.db = nil
    }

    deinit { release() }
}
