import CSQLite

/// A column of one of the state store's tables, known by its name in the schema. The raw
/// value only numbers the cases 0, 1, 2…, for a lookup in an array: it is no position in
/// any statement.
protocol StoreColumn: CaseIterable, RawRepresentable where RawValue == Int {
    var name: String { get }
}

extension StoreColumn {
    /// Every column's name: "a, b, c", for a SELECT or INSERT list.
    static var names: String { allCases.map(\.name).joined(separator: ", ") }
    /// Every column as a named parameter: ":a, :b, :c", for the VALUES of an INSERT.
    static var parameters: String { allCases.map { ":" + $0.name }.joined(separator: ", ") }
}

/// A prepared statement whose parameters (`:name`) and result columns are found by their
/// names once, when it is prepared: binds and reads never go by position, so a column added
/// to a table or to a statement shifts no other. Naming a column the statement lacks is a
/// mistake in the code: it asserts (in debug builds) and binds or reads nothing.
struct NamedStatement<Column: StoreColumn> {
    let handle: OpaquePointer
    /// By each column's raw value: its parameter's index, 0 when the statement has none.
    private let parameters: [Int32]
    /// By each column's raw value: its index among the result columns, -1 when not there.
    private let results: [Int32]

    init(_ db: OpaquePointer, _ sql: String) throws(StoreError) {
        var statement: OpaquePointer?
        let code = sqlite3_prepare_v2(db, sql, -1, &statement, nil)
        guard code == SQLITE_OK, let statement else {
            throw .sqlite(code: code, message: String(cString: sqlite3_errmsg(db)))
        }
        let count = Column.allCases.map(\.rawValue).max().map { $0 + 1 } ?? 0
        var parameters = [Int32](repeating: 0, count: count)
        for column in Column.allCases {
            parameters[column.rawValue] = sqlite3_bind_parameter_index(statement, ":" + column.name)
        }
        var results = [Int32](repeating: -1, count: count)
        for index in 0..<sqlite3_column_count(statement) {
            guard let name = sqlite3_column_name(statement, index).map({ String(cString: $0) }) else { continue }
            if let column = Column.allCases.first(where: { $0.name == name }) { results[column.rawValue] = index }
        }
        // Every parameter must name a column: a positional one ("?1") would be bound by no one.
        guard parameters.count(where: { $0 > 0 }) == Int(sqlite3_bind_parameter_count(statement)) else {
            sqlite3_finalize(statement)
            throw .sqlite(code: SQLITE_MISUSE, message: "a parameter of \"\(sql)\" names no column")
        }
        handle = statement
        self.parameters = parameters
        self.results = results
    }

    func finalize() {
        sqlite3_finalize(handle)
    }

    /// Unbinds every parameter (to NULL) and makes the statement ready to run again.
    func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    func step() -> Int32 {
        sqlite3_step(handle)
    }

    private func parameter(_ column: Column) -> Int32 {
        let index = parameters[column.rawValue]
        // Index 0 is out of range: SQLite binds nothing.
        assert(index > 0, "no parameter :\(column.name) in the statement")
        return index
    }

    private func result(_ column: Column) -> Int32? {
        let index = results[column.rawValue]
        guard index >= 0 else {
            assertionFailure("no result column \(column.name) in the statement")
            return nil
        }
        return index
    }

    func bind(_ column: Column, _ value: String?) {
        if let value {
            sqlite3_bind_text(handle, parameter(column), value, -1, mirror_sqlite_transient())
        } else {
            sqlite3_bind_null(handle, parameter(column))
        }
    }

    func bind(_ column: Column, _ value: Int64?) {
        if let value {
            sqlite3_bind_int64(handle, parameter(column), value)
        } else {
            sqlite3_bind_null(handle, parameter(column))
        }
    }

    /// A flag column: 1 or 0.
    func bind(_ column: Column, _ value: Bool) {
        sqlite3_bind_int(handle, parameter(column), value ? 1 : 0)
    }

    /// The current row's text in `column`; nil for NULL.
    func text(_ column: Column) -> String? {
        guard let index = result(column), sqlite3_column_type(handle, index) != SQLITE_NULL,
              let value = sqlite3_column_text(handle, index) else { return nil }
        return String(cString: value)
    }

    /// The current row's integer in `column`; nil for NULL.
    func integer(_ column: Column) -> Int64? {
        guard let index = result(column), sqlite3_column_type(handle, index) != SQLITE_NULL else { return nil }
        return sqlite3_column_int64(handle, index)
    }

    /// The current row's flag in `column`: anything but 0 (and NULL) is set.
    func flag(_ column: Column) -> Bool {
        guard let index = result(column) else { return false }
        return sqlite3_column_int(handle, index) != 0
    }
}
