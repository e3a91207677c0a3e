import Testing
@testable import MirrorCore

/// What a run holds for every entry, kept compactly (`PlanOutcome`, `Entry`'s extras,
/// `RemoteURL`'s written form and login, `SourceLocation`'s line and column): each gives back
/// exactly what it was given.
struct CompactEntryTests {
    struct OutcomeRow: CustomTestStringConvertible, Sendable {
        var action: Action
        var localSize: Int64?
        var remoteSize: Int64?
        var testDescription: String { "\(action.name) local \(localSize.map(String.init) ?? "nil") remote \(remoteSize.map(String.init) ?? "nil")" }
    }

    static let sizes: [Int64?] = [nil, 0, 1, 4096, Int64.max, -1, Int64.min]
    static let actions: [Action] = [
        .download, .skip, .resume(from: 10, source: .partial), .resume(from: 0, source: .destination),
        .finish(size: 7), .restart(reason: "the server's file changed"), .replace(reason: "differs"),
        .fail(.httpStatus(404)),
    ]
    static let outcomeRows: [OutcomeRow] = actions.flatMap { action in
        sizes.flatMap { local in sizes.map { remote in OutcomeRow(action: action, localSize: local, remoteSize: remote) } }
    }

    @Test("a plan's outcome gives back its action and both sizes", arguments: outcomeRows)
    func outcome(_ row: OutcomeRow) {
        let outcome = PlanOutcome(action: row.action, localSize: row.localSize, remoteSize: row.remoteSize)
        #expect(outcome.action == row.action)
        #expect(outcome.localSize == row.localSize)
        #expect(outcome.remoteSize == row.remoteSize)
    }

    @Test("a plan's outcome and the entry it belongs to make the planned entry")
    func plannedEntries() {
        let entries = [
            Entry(url: RemoteURL(string: "https://h/a"), dest: "a", location: SourceLocation(file: "m.yaml", line: 4, column: 5)),
            Entry(url: RemoteURL(string: "https://u:p@h/b", written: "https://u:p@h/b"), dest: "d/b", location: SourceLocation(file: "m.yaml", line: 5, column: 5)),
        ]
        let results: [EntryResult?] = [
            .planned(PlanOutcome(action: .download, localSize: nil, remoteSize: 12)),
            .planned(PlanOutcome(action: .restart(reason: "why"), localSize: 3, remoteSize: 12)),
        ]
        let planned = PlannedEntries(entries: entries, results: results)
        #expect(planned.count == 2)
        #expect(planned[0].dest == "a" && planned[0].url == "https://h/a" && planned[0].action == .download)
        #expect(planned[0].localSize == nil && planned[0].remoteSize == 12)
        #expect(planned[1].dest == "d/b" && planned[1].url == "https://***@h/b")
        #expect(planned[1].action == .restart(reason: "why") && planned[1].localSize == 3)
    }

    static let location = SourceLocation(file: "m.yaml", line: 3, column: 5)

    @Test("an entry's rarely set fields are read back as set, one by one and unset again")
    func extras() {
        let plain = Entry(url: RemoteURL(string: "https://h/a"), dest: "a", location: Self.location)
        #expect(plain.mirrors.isEmpty && plain.digest == nil && plain.checksumName == nil && plain.size == nil && plain.repeatLocations.isEmpty)
        var entry = plain
        entry.digest = String(repeating: "a", count: 64)
        entry.size = 9
        entry.checksumName = "a.tar"
        entry.mirrors = [RemoteURL(string: "https://m/a")]
        entry.repeatLocations.append(SourceLocation(file: "m.yaml", line: 9, column: 5))
        #expect(entry.digest == String(repeating: "a", count: 64))
        #expect(entry.size == 9 && entry.checksumName == "a.tar")
        #expect(entry.mirrors == [RemoteURL(string: "https://m/a")])
        #expect(entry.repeatLocations == [SourceLocation(file: "m.yaml", line: 9, column: 5)])
        #expect(plain.digest == nil, "a copy is a value: changing it leaves the original")
        #expect(entry != plain)

        var cleared = entry
        cleared.digest = nil
        cleared.size = nil
        cleared.checksumName = nil
        cleared.mirrors = []
        cleared.repeatLocations = []
        #expect(cleared == plain)
        #expect(entry.size == 9, "clearing a copy leaves the entry it came from")

        let initialised = Entry(url: RemoteURL(string: "https://h/a"), mirrors: [RemoteURL(string: "https://m/a")], dest: "a",
                                digest: String(repeating: "a", count: 64), size: 9, location: Self.location)
        var assigned = plain
        assigned.mirrors = [RemoteURL(string: "https://m/a")]
        assigned.digest = String(repeating: "a", count: 64)
        assigned.size = 9
        #expect(initialised == assigned, "equal fields are equal entries, however they were set")
        assigned.size = 10
        #expect(initialised != assigned)
    }

    @Test("repeats appended one by one are kept in order, and a copy taken between keeps its own")
    func repeatsAppended() {
        var entry = Entry(url: RemoteURL(string: "https://h/a"), dest: "a", location: Self.location)
        var copies: [Entry] = []
        for line in 10..<2_010 {
            entry.repeatLocations.append(SourceLocation(file: "m.yaml", line: line, column: 5))
            if line % 500 == 0 { copies.append(entry) }
        }
        #expect(entry.repeatLocations.map(\.line) == Array(10..<2_010))
        #expect(copies.map(\.repeatLocations.count) == [491, 991, 1_491, 1_991])
        entry.repeatLocations = []
        #expect(entry == Entry(url: RemoteURL(string: "https://h/a"), dest: "a", location: Self.location))
        #expect(copies[0].repeatLocations.last?.line == 500)
    }

    @Test("a URL's login is compared, hashed and read back by its value")
    func login() {
        let login = NetrcLogin(user: "u", password: "p")
        var url = RemoteURL(string: "https://h/a", login: login)
        #expect(url.login == login)
        let same = RemoteURL(string: "https://h/a", login: NetrcLogin(user: "u", password: "p"))
        #expect(url == same && url.hashValue == same.hashValue)
        #expect(url != RemoteURL(string: "https://h/a", login: NetrcLogin(user: "u", password: "q")))
        #expect(url != RemoteURL(string: "https://h/a"))
        url.login = nil
        #expect(url == RemoteURL(string: "https://h/a") && url.login == nil)
    }

    @Test("a URL's written form is its string unless made with another, whatever else changes")
    func writtenForm() {
        let plain = RemoteURL(string: "https://h/a")
        #expect(plain.written == "https://h/a")
        #expect(plain == RemoteURL(string: "https://h/a", written: "https://h/a"), "written as sent is no difference")
        var expanded = RemoteURL(string: "https://h/a", written: "https://${HOST}/a")
        #expect(expanded.written == "https://${HOST}/a" && expanded.string == "https://h/a")
        #expect(expanded != plain)
        let login = NetrcLogin(user: "u", password: "p")
        expanded.login = login
        #expect(expanded.written == "https://${HOST}/a" && expanded.login == login, "a login set keeps the written form")
        expanded.login = nil
        #expect(expanded.written == "https://${HOST}/a")
        expanded.written = "https://h/a"
        #expect(expanded == plain && expanded.hashValue == plain.hashValue)
        var logged = RemoteURL(string: "https://h/a", login: login)
        logged.written = "https://${HOST}/a"
        #expect(logged.login == login && logged.written == "https://${HOST}/a")
        #expect(logged == RemoteURL(string: "https://h/a", written: "https://${HOST}/a", login: login))
    }

    @Test("a location gives back its line and column, and clamps what 32 bits cannot hold")
    func location() {
        var location = SourceLocation(file: "m.yaml", line: 4_000_000_000, column: 7)
        #expect(location.line == 4_000_000_000 && location.column == 7 && location.description == "m.yaml:4000000000:7")
        location.column = Int.max
        #expect(location.column == Int(UInt32.max))
        location.line = -1
        #expect(location.line == 0)
        #expect(SourceLocation(file: "m.yaml", line: 3, column: 5) == Self.location)
    }

    /// A run holds one entry for every file of its manifest (or shard) to its end, and (e)'s
    /// peak memory is mostly its entries: what they hold in place is part of that target.
    @Test("an entry, its URL and its location are as small in place as they are meant to be")
    func sizesInPlace() {
        #expect(MemoryLayout<RemoteURL>.size == 24)
        #expect(MemoryLayout<MirrorCore.SourceLocation>.size == 24)
        #expect(MemoryLayout<Entry>.size <= 80, "Entry is \(MemoryLayout<Entry>.size) bytes")
    }
}
