import CSQLite
import Testing
@testable import MirrorCore

/// Statements bind their parameters and read their result columns by name: whatever order a
/// statement lists the columns in, each value lands in and comes from its own column.
struct NamedStatementTests {
    enum Column: Int, StoreColumn {
        case first, second, third
        var name: String {
            switch self {
            case .first: "first"
            case .second: "second"
            case .third: "third_one"
            }
        }
    }

    /// An in-memory database with table `t` of the three columns, in an order of its own.
    private static func database() throws -> OpaquePointer {
        var db: OpaquePointer?
        #expect(sqlite3_open(":memory:", &db) == SQLITE_OK)
        let handle = try #require(db)
        #expect(sqlite3_exec(handle, "CREATE TABLE t (third_one TEXT, first TEXT, second INTEGER)", nil, nil, nil) == SQLITE_OK)
        return handle
    }

    @Test func namesAndParametersListEveryColumnByItsSchemaName() {
        #expect(Column.names == "first, second, third_one")
        #expect(Column.parameters == ":first, :second, :third_one")
    }

    @Test(arguments: [
        "INSERT INTO t (first, second, third_one) VALUES (:first, :second, :third_one)",
        "INSERT INTO t (third_one, second, first) VALUES (:third_one, :second, :first)",
        "INSERT INTO t (second, third_one, first) VALUES (:second, :third_one, :first)",
    ], [
        "SELECT first, second, third_one FROM t",
        "SELECT third_one, first, second FROM t",
        "SELECT second, third_one, first, rowid FROM t",
    ])
    func valuesGoByNameWhateverTheOrder(insert: String, select: String) throws {
        let db = try Self.database()
        defer { sqlite3_close(db) }
        let write = try NamedStatement<Column>(db, insert)
        write.bind(.first, "one")
        write.bind(.second, 2)
        write.bind(.third, "three")
        #expect(write.step() == SQLITE_DONE)
        write.reset()
        write.bind(.first, "again")
        #expect(write.step() == SQLITE_DONE, "the other parameters were cleared to NULL")
        write.finalize()

        let read = try NamedStatement<Column>(db, select + " ORDER BY rowid")
        defer { read.finalize() }
        #expect(read.step() == SQLITE_ROW)
        #expect(read.text(.first) == "one")
        #expect(read.integer(.second) == 2)
        #expect(read.flag(.second))
        #expect(read.text(.third) == "three")
        #expect(read.step() == SQLITE_ROW)
        #expect(read.text(.first) == "again")
        #expect(read.integer(.second) == nil)
        #expect(!read.flag(.second))
        #expect(read.text(.third) == nil)
        #expect(read.step() == SQLITE_DONE)
    }

    @Test(arguments: [
        "INSERT INTO t (first) VALUES (?1)",
        "INSERT INTO t (first) VALUES (?)",
        "INSERT INTO t (first) VALUES (:fist)",
        "INSERT INTO t (first, second) VALUES (:first, @second)",
    ])
    func aParameterThatNamesNoColumnIsRefusedWhenPrepared(sql: String) throws {
        let db = try Self.database()
        defer { sqlite3_close(db) }
        #expect(throws: StoreError.self) { _ = try NamedStatement<Column>(db, sql) }
    }

    @Test func aStatementThatDoesNotPrepareSaysWhy() throws {
        let db = try Self.database()
        defer { sqlite3_close(db) }
        do {
            _ = try NamedStatement<Column>(db, "SELECT missing FROM t")
            Issue.record("prepared a statement naming a missing column")
        } catch {
            #expect("\(error)".contains("no such column: missing"))
        }
    }
}
