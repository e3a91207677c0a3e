import Testing
@testable import MirrorCore

/// `PrunePlan.decide`, the one place that chooses what `--prune` deletes, row by row.
struct PrunePlanTests {
    struct Row: CustomTestStringConvertible, Sendable {
        var name: String
        var rows: [PrunePlan.Row]
        var manifest: [String]
        var maxDelete: Int? = nil
        /// Paths deleted, in order.
        var deleted: [String]
        /// Paths kept and reported.
        var kept: [String] = []
        var forgotten: [String] = []
        var directories: [String] = []
        var refused = false
        var testDescription: String { name }
    }

    static let identity = LocalIdentity(size: 100, modifiedNanoseconds: 784_111_777_000_000_000, inode: 42)
    static let touched = LocalIdentity(size: 100, modifiedNanoseconds: 784_111_778_000_000_000, inode: 42)
    static let version = CompleteVersion(validators: RemoteValidators(etag: "\"a\"", lastModified: nil, size: 100), sha256: nil, local: identity)
    static let started = RemoteValidators(etag: "\"a\"", lastModified: nil, size: 100)

    static func written(_ dest: String, partial: RemoteValidators? = nil) -> StateRecord {
        StateRecord(dest: dest, url: "http://h/\(dest)", complete: version, partial: partial)
    }

    static func onDisk(_ identity: LocalIdentity? = identity, partial: LocalFacts.FileState = .missing) -> PrunePlan.Local {
        .facts(LocalFacts(destination: identity.map { .file(size: $0.size) } ?? .missing, partial: partial, destinationIdentity: identity))
    }

    static let cases: [Row] = [
        Row(name: "a listed dest is never touched", rows: [.init(record: written("a"), local: onDisk())], manifest: ["a"], deleted: []),
        Row(name: "a dropped dest mirror wrote, unchanged → deleted with its record",
            rows: [.init(record: written("a"), local: onDisk()), .init(record: written("b"), local: onDisk())], manifest: ["b"],
            deleted: ["a"], forgotten: ["a"]),
        Row(name: "a dropped dest changed since mirror wrote it → kept, record kept",
            rows: [.init(record: written("a"), local: onDisk(touched))], manifest: ["b"], deleted: [], kept: ["a"]),
        Row(name: "a file mirror has no finished record of → kept",
            rows: [.init(record: StateRecord(dest: "a", url: "u"), local: onDisk())], manifest: ["b"], deleted: [], kept: ["a"]),
        Row(name: "a dropped dest already gone → only its record goes",
            rows: [.init(record: written("a"), local: onDisk(nil))], manifest: ["b"], deleted: [], forgotten: ["a"]),
        Row(name: "the partial file mirror started of a dropped dest goes too",
            rows: [.init(record: written("d/a", partial: started), local: onDisk(partial: .file(size: 5)))], manifest: ["b"],
            deleted: ["d/a", "d/a.part"], forgotten: ["d/a"], directories: ["d"]),
        Row(name: "a .part mirror has no record of starting → kept",
            rows: [.init(record: written("a"), local: onDisk(nil, partial: .file(size: 5)))], manifest: ["b"],
            deleted: [], kept: ["a.part"]),
        Row(name: "a directory or a symbolic link at the dest → kept",
            rows: [.init(record: written("a"), local: .facts(LocalFacts(destination: .other(kind: "a symbolic link"), partial: .missing)))],
            manifest: ["b"], deleted: [], kept: ["a"]),
        Row(name: "a symbolic link on the way → kept, never followed",
            rows: [.init(record: written("link/a"), local: .unreachable("link is a symbolic link"))], manifest: ["b"],
            deleted: [], kept: ["link/a"]),
        Row(name: "a record under .mirror/ or outside the root is never acted on",
            rows: [.init(record: written(".mirror/state.sqlite"), local: onDisk()), .init(record: written("../x"), local: onDisk()),
                   .init(record: written("/etc/passwd"), local: onDisk())],
            manifest: ["b"], deleted: [], kept: ["../x", ".mirror/state.sqlite", "/etc/passwd"]),
        Row(name: "dests compare by bytes: another spelling of é is another file",
            rows: [.init(record: written("caf\u{E9}"), local: onDisk())], manifest: ["cafe\u{301}"],
            deleted: ["caf\u{E9}"], forgotten: ["caf\u{E9}"]),
        Row(name: "directories deepest first; none that holds a listed dest",
            rows: [.init(record: written("x/y/z/a"), local: onDisk()), .init(record: written("x/b"), local: onDisk())],
            manifest: ["x/y/keep"], deleted: ["x/b", "x/y/z/a"], forgotten: ["x/b", "x/y/z/a"], directories: ["x/y/z"]),
        Row(name: "a .part that is a listed dest is not deleted as a partial",
            rows: [.init(record: written("a", partial: started), local: onDisk(nil, partial: .file(size: 5)))], manifest: ["a.part"],
            deleted: [], kept: ["a.part"]),
        Row(name: "as many as --max-delete → deleted",
            rows: [.init(record: written("a"), local: onDisk()), .init(record: written("b"), local: onDisk())], manifest: ["c"],
            maxDelete: 2, deleted: ["a", "b"], forgotten: ["a", "b"]),
        Row(name: "more than --max-delete → the whole prune refused",
            rows: [.init(record: written("a"), local: onDisk()), .init(record: written("b"), local: onDisk())], manifest: ["c"],
            maxDelete: 1, deleted: ["a", "b"], forgotten: ["a", "b"], refused: true),
        Row(name: "--max-delete 0 refuses any deletion",
            rows: [.init(record: written("a", partial: started), local: onDisk(nil, partial: .file(size: 1)))], manifest: ["c"],
            maxDelete: 0, deleted: ["a.part"], forgotten: ["a"], refused: true),
    ]

    @Test(arguments: cases)
    func pruneDecisionTable(_ row: Row) {
        let plan = PrunePlan.decide(storeRows: row.rows, manifestDests: row.manifest, maxDelete: row.maxDelete)
        #expect(plan.deletions.map(\.path) == row.deleted)
        #expect(plan.kept.map(\.path) == row.kept)
        #expect(plan.forgotten == row.forgotten)
        #expect(plan.directories == row.directories)
        #expect((plan.refusal != nil) == row.refused)
    }
}
