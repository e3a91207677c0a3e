import Foundation
import Testing
@testable import MirrorCore

/// What becomes of a file found in a prune's trash, against the identity it was checked at.
@Test(arguments: [
    (PruneTrash.Found.file(LocalIdentity(size: 10, modifiedNanoseconds: 5, inode: 7)), PruneTrash.Decision.delete),
    (.file(LocalIdentity(size: 10, modifiedNanoseconds: 5, inode: 8)), .moveBack),   // another inode: swapped in
    (.file(LocalIdentity(size: 11, modifiedNanoseconds: 5, inode: 7)), .moveBack),   // written to since the check
    (.file(LocalIdentity(size: 10, modifiedNanoseconds: 6, inode: 7)), .moveBack),   // touched since the check
    (.other, .moveBack),                                                               // not a regular file
    (.nothing, .forget),                                                               // never moved, or gone
] as [(PruneTrash.Found, PruneTrash.Decision)])
func pruneTrashDecision(found: PruneTrash.Found, decision: PruneTrash.Decision) {
    #expect(PruneTrash.decide(checked: LocalIdentity(size: 10, modifiedNanoseconds: 5, inode: 7), found: found) == decision)
}

/// `--prune` never deletes a file put at a dest's name after its last check: the file checked
/// goes through a trash beside it and is deleted only if it is what arrived there.
@Suite(.serialized)
struct PruneTrashTests {
    /// nginx serving a.bin and c.bin, synced to a.bin and dir/sub/c.bin, with a partial file of a
    /// dropped entry at old/e.bin.part that the store records mirror started.
    static func synced() async throws -> SyncScenario {
        let scenario = try await PruneTests.synced(["a.bin", "b.bin", "dir/sub/c.bin"])
        try scenario.save(StateRecord(dest: "old/e.bin", url: "http://h/e.bin", partial: RemoteValidators(etag: "\"e\"", lastModified: nil, size: 99)))
        try scenario.put(Data("half".utf8), at: "old/e.bin.part")
        return scenario
    }

    /// Puts `data` at `path` under the root by a rename, as a user's `mv` would: a new inode.
    static func swapIn(_ data: Data, at path: String, in scenario: SyncScenario) {
        let temporary = scenario.directory.path("incoming-\(UUID().uuidString)")
        FileManager.default.createFile(atPath: temporary, contents: data)
        #expect(rename(temporary, scenario.rootPath(path)) == 0)
    }

    @Test func aFileSwappedInAfterTheLastCheckIsNeverDeleted() async throws {
        let scenario = try await Self.synced()
        let manifest = try scenario.load(PruneTests.manifest(scenario, [("a.bin", "a.bin"), ("b.bin", "b.bin")]))
        let store = try #require(StateStore.open(root: scenario.root, mode: .readWrite).store)
        defer { store.close() }
        var pruner = Pruner(rootDirectory: RootDirectory(path: scenario.root), store: store)
        // Between the last check of each file and its removal, a user puts a file of their own
        // at its name: the finished file and the partial file alike.
        let users = ["dir/sub/c.bin": Data("the user's c.bin".utf8), "old/e.bin.part": Data("the user's e.bin.part".utf8)]
        pruner.afterFinalCheck = { path in
            if let data = users[path] { Self.swapIn(data, at: path, in: scenario) }
        }

        let plan = try pruner.plan(manifestDests: manifest.entries.map(\.dest), maxDelete: nil)
        #expect(plan.deletions.map(\.path) == ["dir/sub/c.bin", "old/e.bin.part"])
        let outcome = pruner.carryOut(plan)

        #expect(outcome.deleted.isEmpty, "\(outcome.deleted)")
        #expect(outcome.failures.map(\.path) == ["dir/sub/c.bin", "old/e.bin.part"])
        #expect(outcome.failures.allSatisfy { $0.reason.contains("replaced by another file after its last check") }, "\(outcome.failures)")
        for (path, data) in users {
            #expect(scenario.local(path) == data, "\(path): the user's file is where they put it")
        }
        #expect(!scenario.directory.listing("root").contains { $0.contains(".mirror-trash") }, "no trash left")
        #expect(try store.trashNotes().isEmpty)
        #expect(outcome.fellShort, "the run says the prune fell short")
    }

    /// Without anyone in the way, the file checked is deleted through the trash and nothing of
    /// the trash is left.
    @Test func theFileCheckedIsDeletedAndNoTrashIsLeft() async throws {
        let scenario = try await Self.synced()
        let result = try await scenario.syncAndPrune(PruneTests.manifest(scenario, [("a.bin", "a.bin"), ("b.bin", "b.bin")]))
        let prune = try #require(result.prune)
        #expect(prune.failures.isEmpty && prune.refusal == nil, "\(prune.failures)")
        #expect(prune.deleted == ["dir/sub/c.bin", "old/e.bin.part"])
        #expect(scenario.directory.listing("root").filter { !$0.hasPrefix(".mirror") } == ["a.bin", "b.bin"])
        let store = try #require(StateStore.open(root: scenario.root, mode: .readOnly).store)
        #expect(try store.trashNotes().isEmpty)
    }

    /// What a prune interrupted between its moves and its deletions leaves: files in trashes and
    /// the store's notes of them. `plan` and `verify` name them; the next sync deletes the file
    /// that was checked, puts back one that was not, and keeps (and names) one whose name is
    /// taken again.
    @Test func anInterruptedPruneIsFinishedByTheNextSyncAndNamedBeforeIt() async throws {
        let scenario = try await Self.synced()
        let store = try #require(StateStore.open(root: scenario.root, mode: .readWrite).store)
        // dir/sub/c.bin: checked and moved, not yet deleted.
        let checked = try #require(try scenario.record("dir/sub/c.bin")?.complete?.local)
        try FileManager.default.createDirectory(atPath: scenario.rootPath("dir/sub/.mirror-trash"), withIntermediateDirectories: true)
        try store.noteTrash(PruneTrash.Note(path: "dir/sub/c.bin", identity: checked))
        #expect(rename(scenario.rootPath("dir/sub/c.bin"), scenario.rootPath("dir/sub/.mirror-trash/c.bin")) == 0)
        // notes.txt: a user's file swapped in after the check, then moved.
        try scenario.put(Data("mine".utf8), at: ".mirror-trash/notes.txt")
        try store.noteTrash(PruneTrash.Note(path: "notes.txt", identity: LocalIdentity(size: 1, modifiedNanoseconds: 1, inode: 1)))
        // x.txt: the same, and another file has the name again since.
        try scenario.put(Data("older".utf8), at: "old/.mirror-trash/x.txt")
        try scenario.put(Data("newer".utf8), at: "old/x.txt")
        try store.noteTrash(PruneTrash.Note(path: "old/x.txt", identity: LocalIdentity(size: 1, modifiedNanoseconds: 1, inode: 2)))
        store.close()
        try scenario.write(PruneTests.manifest(scenario, [("a.bin", "a.bin"), ("b.bin", "b.bin"), ("c.bin", "dir/sub/c.bin")]))

        for command in ["plan", "verify"] {
            let run = try scenario.run([command, "m.yaml"])
            #expect(run.status == (command == "plan" ? 0 : 1), "\(command): \(run)")
            for (path, trash) in [("dir/sub/c.bin", "dir/sub/.mirror-trash/c.bin"), ("notes.txt", ".mirror-trash/notes.txt"), ("old/x.txt", "old/.mirror-trash/x.txt")] {
                #expect(run.stderr.contains("mirror: \(path): an interrupted prune left it in \(trash); the next unsharded sync"), "\(command): \(run)")
            }
        }
        #expect(FileManager.default.fileExists(atPath: scenario.rootPath("dir/sub/.mirror-trash/c.bin")), "plan and verify change nothing")

        let sync = try scenario.run(["sync", "m.yaml"])

        #expect(sync.status == 0, "\(sync)")
        #expect(sync.stderr.contains("mirror: dir/sub/c.bin: finished an interrupted prune: deleted dir/sub/.mirror-trash/c.bin"), "\(sync)")
        #expect(sync.stderr.contains("mirror: notes.txt: an interrupted prune had moved another file than the one it checked to .mirror-trash/notes.txt; put it back"), "\(sync)")
        #expect(sync.stderr.contains("mirror: warning: old/x.txt: an interrupted prune left another file than the one it checked in old/.mirror-trash/x.txt, and it is kept there: another file has its name now"), "\(sync)")
        #expect(scenario.local("notes.txt") == Data("mine".utf8))
        #expect(scenario.local("old/x.txt") == Data("newer".utf8))
        #expect(scenario.local("old/.mirror-trash/x.txt") == Data("older".utf8))
        #expect(scenario.local("dir/sub/c.bin") == scenario.served("c.bin"), "the entry listed again was fetched again")
        #expect(!FileManager.default.fileExists(atPath: scenario.rootPath("dir/sub/.mirror-trash")))
        #expect(!FileManager.default.fileExists(atPath: scenario.rootPath(".mirror-trash")))
        let notes = try #require(StateStore.open(root: scenario.root, mode: .readOnly).store).trashNotes()
        #expect(notes.map(\.path) == ["old/x.txt"], "only what is still in a trash stays noted")
    }

    /// A directory under the root that is a mount point of another file system: the trash is
    /// made beside the file, on its file system, so the rename into it works (a trash in
    /// ROOT/.mirror would fail with EXDEV there). Run in a private mount namespace of its own.
    @Test func aPruneUnderAMountPointDeletesThroughATrashOnItsFileSystem() throws {
        let scenario = try SyncScenario(.nginx(site: PruneTests.files))
        try FileManager.default.createDirectory(atPath: scenario.rootPath("mnt"), withIntermediateDirectories: true)
        try scenario.write(PruneTests.manifest(scenario, [("a.bin", "a.bin"), ("c.bin", "mnt/c.bin")]), to: "first.yaml")
        try scenario.write(PruneTests.manifest(scenario, [("a.bin", "a.bin")]), to: "second.yaml")
        let script = """
            set -e
            mount -t tmpfs tmpfs root/mnt
            [ "$(stat -c %d root/mnt)" != "$(stat -c %d root)" ]
            "$0" sync --quiet first.yaml
            [ -f root/mnt/c.bin ]
            "$0" sync --prune second.yaml
            echo "left: $(ls -A root/mnt | tr '\\n' ' ')"
            """
        let unshare = try ExternalCommand.executable("unshare", package: "util-linux")
        let run = try ExternalCommand.run(
            unshare, ["--mount", "--propagation", "private", "/bin/sh", "-c", script, try MirrorBinary.path()],
            in: scenario.directory.path, environment: ["no_proxy": "*"])

        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.contains("deleted mnt/c.bin\n"), "\(run)")
        #expect(run.stdout.hasSuffix("left: \n"), "nothing left on the mounted file system\n\(run)")
    }
}
