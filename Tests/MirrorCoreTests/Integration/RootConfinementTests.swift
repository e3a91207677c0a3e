import Foundation
import Synchronization
import Testing
@testable import MirrorCore

/// Nothing is created, written, renamed or removed outside the root: not through a directory
/// swapped for a symbolic link while an entry is being worked on, and not through a symlinked
/// `ROOT/.mirror`. A watch on the directory outside records what the kernel did there.
@Suite(.serialized)
struct RootConfinementTests {
    let scenario: SyncScenario
    var server: FaultServer { scenario.server }
    var directory: TemporaryDirectory { scenario.directory }
    static let data = randomData(count: 300_000, seed: 120)

    init() throws {
        scenario = try SyncScenario(.faultServer)
        try FileManager.default.createDirectory(atPath: scenario.rootPath("d"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: scenario.directory.path("outside"), withIntermediateDirectories: true)
    }

    func manifest(dest: String) throws -> Manifest {
        try scenario.load(.files(.url(server.url("/a.bin"), dest: dest)))
    }

    /// One transfer at a time, with the library's own backoff.
    static func settings(events: (@Sendable (RunEvent) -> Void)? = nil) -> SyncScenario.Settings {
        SyncScenario.Settings(concurrency: 1, retryPolicy: .standard, events: events)
    }

    /// Moves `root/d` aside (it stays inside the root) and puts a symlink to `outside` in its place.
    func swapDirectoryForLink() {
        precondition(rename(directory.path("root/d"), directory.path("root/d-moved")) == 0)
        precondition(symlink(directory.path("outside"), directory.path("root/d")) == 0)
    }

    @Test func aDirectorySwappedForASymlinkBeforeThePartialFileIsOpenedReceivesNoFile() async throws {
        server.route("/a.bin", reply: .file(Self.data, etag: "\"v1\""))
        let swapped = SwapFlag()
        let settings = Self.settings(events: { [self] event in
            // Emitted after the entry's directory was inspected and before anything is opened.
            if case .decided(dest: "d/a.bin", _) = event, !swapped.value.exchange(true, ordering: .relaxed) {
                swapDirectoryForLink()
            }
        })
        let watch = try WriteWatch(directory.path("outside"))
        let reports = try await scenario.sync(manifest(dest: "d/a.bin"), settings)

        let didSwap = swapped.value.load(ordering: .relaxed)
        #expect(didSwap)
        #expect(watch.changes() == [], "nothing may change outside the root")
        #expect(directory.listing("outside") == [])
        guard case .failed(.localConflict(let reason)) = reports[0].outcome else {
            Issue.record("expected a refusal, got \(reports[0].outcome)")
            return
        }
        #expect(reason.contains(directory.path("root/d") + " is a symbolic link"), "\(reason)")
    }

    @Test func aDirectorySwappedForASymlinkDuringTheDownloadGetsNoRename() async throws {
        // The body stalls long enough for the swap; a decoy waits outside under the partial's name.
        server.route("/a.bin", reply: .file(Self.data, etag: "\"v1\"").stalled(afterBodyBytes: 100_000, for: .seconds(3)))
        try WriteWatch.writeBeforeWatching("decoy", to: directory.path("outside/a.bin.part"))
        let watch = try WriteWatch(directory.path("outside"))
        let runner = scenario.runner(try manifest(dest: "d/a.bin"), Self.settings())
        // With nothing on disk the GET is the first request; its partial file is made at the
        // reply's head (the body is too long to be held in memory). The swap follows the file
        // from a thread of its own, during the body's stall. (Waited for by a task instead, the
        // swap came after the stall when a loaded machine's cooperative threads were all busy,
        // and the file was renamed before it.)
        let swapped = SwapFlag()
        let partial = directory.path("root/d/a.bin.part")
        let swapper = Thread { [self] in
            let deadline = ContinuousClock.now + .seconds(30)
            while (server.requests.isEmpty || !FileManager.default.fileExists(atPath: partial)) && ContinuousClock.now < deadline {
                Thread.sleep(forTimeInterval: 0.002)
            }
            guard !server.requests.isEmpty, FileManager.default.fileExists(atPath: partial) else { return }
            swapDirectoryForLink()
            swapped.value.store(true, ordering: .relaxed)
        }
        swapper.start()
        let reports = try await runner.sync()
        let didSwap = swapped.value.load(ordering: .relaxed)
        #expect(didSwap, "the GET was never seen")
        #expect(server.requests.count == 1)

        #expect(watch.changes() == [], "nothing may change outside the root")
        #expect(directory.listing("outside") == ["a.bin.part"])
        #expect(directory.contents(of: "outside/a.bin.part") == Data("decoy".utf8))
        guard case .failed(.localConflict(let reason)) = reports[0].outcome else {
            Issue.record("expected a refusal, got \(reports[0].outcome)")
            return
        }
        #expect(reason.contains(directory.path("root/d") + " is a symbolic link"), "\(reason)")
        #expect(directory.contents(of: "root/d-moved/a.bin.part")?.count == Self.data.count, "the download stays where it was made")
    }

    @Test func aSymlinkedStateDirectoryIsRefusedAndNothingIsMadeOutside() throws {
        server.route("/a.bin", reply: .file(Self.data))
        try FileManager.default.createDirectory(atPath: directory.path("outside/state"), withIntermediateDirectories: true)
        precondition(symlink(directory.path("outside/state"), directory.path("root/.mirror")) == 0)
        try scenario.write(.files(.url(server.url("/a.bin"))))
        let watch = try WriteWatch(directory.path("outside"))

        let sync = try scenario.run(["sync", "m.yaml"])
        #expect(sync.status == 2, "\(sync)")
        #expect(sync.stderr.contains(directory.path("root/.mirror") + " is a symbolic link"), "\(sync)")
        let plan = try scenario.run(["plan", "-v", "m.yaml"])
        #expect(plan.status == 0, "\(plan)")
        #expect(plan.stderr.contains(".mirror is a symbolic link"), "\(plan)")
        _ = try scenario.run(["verify", "m.yaml"])

        #expect(watch.changes() == [], "nothing may change outside the root")
        #expect(directory.listing("outside") == ["state"])
        #expect(directory.listing("root") == [".mirror", "d"], "nothing was transferred")
    }

    @Test func aSymlinkThatStaysInsideTheRootIsRefusedToo() async throws {
        server.route("/a.bin", reply: .file(Self.data))
        precondition(symlink("d", directory.path("root/alias")) == 0)
        let reports = try await scenario.sync(manifest(dest: "alias/a.bin"), Self.settings())

        #expect(reports[0].outcome == .failed(.localConflict(RootDirectory.refusal(directory.path("root/alias")).description)))
        #expect(directory.listing("root/d") == [])
    }
}

private final class SwapFlag: Sendable {
    let value = Atomic<Bool>(false)
}
