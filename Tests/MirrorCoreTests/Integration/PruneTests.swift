import Foundation
import Testing
@testable import MirrorCore

/// `--prune` against a real nginx: it deletes exactly the files mirror wrote that the manifest
/// dropped, and nothing else, and only after every entry of the run succeeded.
@Suite(.serialized)
struct PruneTests {
    static let files = ["a.bin": randomData(count: 30_000, seed: 1), "b.bin": randomData(count: 20_000, seed: 2),
                        "c.bin": randomData(count: 10_000, seed: 3)]

    /// nginx serving a.bin, b.bin and c.bin; the first sync puts them at `dests` (same order).
    static func synced(_ dests: [String] = ["a.bin", "b.bin", "dir/sub/c.bin"]) async throws -> SyncScenario {
        let scenario = try SyncScenario(.nginx(site: files))
        let reports = try await scenario.sync(manifest(scenario, Array(zip(["a.bin", "b.bin", "c.bin"], dests))))
        #expect(reports.allSatisfy { $0.outcome == .transferred })
        return scenario
    }

    static func manifest(_ scenario: SyncScenario, _ entries: [(served: String, dest: String)], top: [String] = []) -> ManifestText {
        ManifestText(top: top, entries: entries.map { .init(scenario.url("/" + $0.served), dest: $0.dest) })
    }

    @Test func pruneDeletesExactlyTheDroppedFileItsPartialItsDirectoryAndRecords() async throws {
        let scenario = try await Self.synced()
        // A partial file an earlier run started for an entry since dropped, and a file of the user's.
        try scenario.save(StateRecord(dest: "old/e.bin", url: "http://h/e.bin", partial: RemoteValidators(etag: "\"e\"", lastModified: nil, size: 99)))
        try scenario.put(Data("half".utf8), at: "old/e.bin.part")
        try scenario.put(Data("mine".utf8), at: "mine.txt")
        try scenario.put(Data("mine too".utf8), at: "dir/notes.txt")
        // A record of a dropped dest whose file is already gone.
        try scenario.save(StateRecord(dest: "gone.bin", url: "http://h/gone.bin"))

        let result = try await scenario.syncAndPrune(Self.manifest(scenario, [("a.bin", "a.bin"), ("b.bin", "b.bin")]))

        let prune = try #require(result.prune)
        #expect(prune.refusal == nil && prune.failures.isEmpty)
        #expect(prune.deleted == ["dir/sub/c.bin", "old/e.bin.part"])
        #expect(prune.removedDirectories == ["dir/sub", "old"])
        #expect(scenario.files() == ["a.bin", "b.bin", "dir", "dir/notes.txt", "mine.txt"])
        #expect(try scenario.record("dir/sub/c.bin") == nil)
        #expect(try scenario.record("old/e.bin") == nil)
        #expect(try scenario.record("gone.bin") == nil)
        #expect(try scenario.record("a.bin")?.complete != nil)
        #expect(prune.recordsRemoved == 3)
    }

    @Test func pruneKeepsAFileChangedSinceMirrorWroteIt() async throws {
        let scenario = try await Self.synced()
        // Same size, new content: only the mtime and the data differ.
        let changed = randomData(count: 10_000, seed: 99)
        try scenario.put(changed, at: "dir/sub/c.bin")

        let result = try await scenario.syncAndPrune(Self.manifest(scenario, [("a.bin", "a.bin"), ("b.bin", "b.bin")]))

        let prune = try #require(result.prune)
        #expect(prune.deleted.isEmpty)
        #expect(prune.plan.kept.map { $0.path } == ["dir/sub/c.bin"])
        #expect(prune.plan.kept.first?.reason.contains("changed since mirror wrote it") == true)
        #expect(scenario.local("dir/sub/c.bin") == changed)
    }

    @Test func aFailedEntryBlocksThePrune() async throws {
        let scenario = try await Self.synced()
        let before = scenario.snapshot()

        let result = try await scenario.syncAndPrune(Self.manifest(scenario, [("a.bin", "a.bin"), ("missing.bin", "missing.bin")]))

        #expect(result.reports.map(\.failed) == [false, true])
        let prune = try #require(result.prune)
        #expect(prune.deleted.isEmpty)
        #expect(prune.refusal?.contains("1 of 2 entries failed; nothing was deleted") == true)
        #expect(scenario.snapshot() == before)
        #expect(try scenario.record("b.bin")?.complete != nil)
    }

    @Test func maxDeleteRefusesTheWholePrune() async throws {
        let scenario = try await Self.synced()
        let before = scenario.snapshot()
        var settings = SyncScenario.Settings()
        settings.prune = PruneSettings(maxDelete: 1)

        let result = try await scenario.syncAndPrune(Self.manifest(scenario, [("a.bin", "a.bin")]), settings)

        let prune = try #require(result.prune)
        #expect(prune.deleted.isEmpty && prune.removedDirectories.isEmpty && prune.recordsRemoved == 0)
        #expect(prune.refusal?.contains("2 files would be deleted, more than --max-delete 1") == true)
        #expect(scenario.snapshot() == before)
        #expect(try scenario.record("b.bin")?.complete != nil)

        settings.prune = PruneSettings(maxDelete: 2)
        let allowed = try await scenario.syncAndPrune(Self.manifest(scenario, [("a.bin", "a.bin")]), settings)
        #expect(allowed.prune?.deleted == ["b.bin", "dir/sub/c.bin"])
    }

    @Test func pruneDoesNotFollowASymlinkedDirectory() async throws {
        let scenario = try await Self.synced()
        // The directory mirror wrote into is moved away and a link to it left in its place:
        // the file behind it is still the very file mirror wrote (same inode, size, mtime).
        let outside = scenario.directory.path("outside")
        try FileManager.default.moveItem(atPath: scenario.rootPath("dir"), toPath: outside)
        try FileManager.default.createSymbolicLink(atPath: scenario.rootPath("dir"), withDestinationPath: outside)

        let result = try await scenario.syncAndPrune(Self.manifest(scenario, [("a.bin", "a.bin"), ("b.bin", "b.bin")]))

        let prune = try #require(result.prune)
        #expect(prune.deleted.isEmpty)
        #expect(prune.plan.kept.map { $0.path } == ["dir/sub/c.bin"])
        #expect(prune.plan.kept.first?.reason.contains("symbolic link") == true)
        #expect(FileManager.default.fileExists(atPath: outside + "/sub/c.bin"))
    }

    @Test func planShowsDeleteRowsAndChangesNothing() async throws {
        let scenario = try await Self.synced()
        try scenario.write(Self.manifest(scenario, [("a.bin", "a.bin"), ("b.bin", "b.bin")], top: ["prune: true"]))
        let before = scenario.snapshot()

        let table = try scenario.run(["plan", "m.yaml"])
        #expect(table.status == 0, "\(table)")
        #expect(table.stdout.contains("delete  9.77 KiB  dir/sub/c.bin  written by mirror, no longer in the manifest\n"), "\(table)")
        #expect(table.stdout.contains("2 skip, 0 fail, 1 delete"), "\(table)")

        let json = try scenario.run(["plan", "m.yaml", "--json", "--exit-code"])
        #expect(json.status == 5, "\(json)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        let entries = try #require(object["entries"] as? [[String: Any]])
        #expect(entries.filter { $0["action"] as? String == "delete" }.compactMap { $0["dest"] as? String } == ["dir/sub/c.bin"])
        #expect((object["summary"] as? [String: Any])?["delete"] as? Int == 1)

        #expect(scenario.snapshot() == before)
        #expect(try scenario.record("dir/sub/c.bin")?.complete != nil)
    }

    @Test func syncPruneThroughTheBinaryReportsDeletionsAndMaxDeleteExitsOne() async throws {
        let scenario = try await Self.synced()
        try scenario.write(Self.manifest(scenario, [("a.bin", "a.bin")]))
        let before = scenario.snapshot()

        let unguarded = try scenario.run(["sync", "m.yaml", "--max-delete", "1"])
        #expect(unguarded.status == 2 && unguarded.stderr.contains("--max-delete needs --prune"), "\(unguarded)")
        #expect(scenario.snapshot() == before)

        let refused = try scenario.run(["sync", "m.yaml", "--prune", "--max-delete", "1"])
        #expect(refused.status == 1, "\(refused)")
        #expect(refused.stderr.contains("more than --max-delete 1"), "\(refused)")
        #expect(scenario.snapshot() == before)

        let pruned = try scenario.run(["sync", "m.yaml", "--prune", "--json"])
        #expect(pruned.status == 0, "\(pruned)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(pruned.stdout.utf8)) as? [String: Any])
        let prune = try #require(object["prune"] as? [String: Any])
        #expect(prune["deleted"] as? [String] == ["b.bin", "dir/sub/c.bin"])
        #expect(prune["deleted_directories"] as? [String] == ["dir/sub", "dir"])
        #expect((object["summary"] as? [String: Any])?["deleted"] as? Int == 2)
        #expect(scenario.files() == ["a.bin"])
    }
}
