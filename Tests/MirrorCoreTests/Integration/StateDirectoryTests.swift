import Foundation
import Testing
@testable import MirrorCore

/// The state store under a served root, and `state_dir` / `--state-dir`, which keeps it and the
/// locks elsewhere under the same rules.
@Suite(.serialized)
struct StateDirectoryTests {
    /// f.bin and g.bin with ETags only: a run that lost its records fetches them again.
    static func serve(_ server: FaultServer) {
        SymlinkedRootTests.serveWithETagsOnly(server)
    }

    static func manifest(_ scenario: SyncScenario, _ served: [String], top: [String] = []) -> ManifestText {
        ManifestText(top: top, entries: served.map { .init(scenario.url("/" + $0), dest: $0) })
    }

    /// The ways to name a state directory: the manifest's key (relative to the manifest's
    /// directory) and the option (relative to the working directory, or absolute).
    enum Naming: String, CaseIterable, CustomTestStringConvertible {
        case manifestKey, relativeOption, absoluteOption
        var testDescription: String { rawValue }
    }

    @Test(arguments: Naming.allCases)
    func aStateDirKeepsTheLocksAndStoreOutsideTheRoot(_ naming: Naming) throws {
        let scenario = try SyncScenario(.faultServer)
        Self.serve(scenario.server)
        let work = scenario.directory.path("work")
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        let (top, options, state): ([String], [String], String) = switch naming {
        case .manifestKey: (["state_dir: ./state"], [], scenario.directory.path("state"))
        case .relativeOption: ([], ["--state-dir", "state"], work + "/state")
        case .absoluteOption: ([], ["--state-dir", scenario.directory.path("elsewhere/state")], scenario.directory.path("elsewhere/state"))
        }
        let manifest = scenario.directory.path("m.yaml")
        try scenario.write(Self.manifest(scenario, ["f.bin", "g.bin"], top: top))
        func mirror(_ command: [String]) throws -> MirrorBinary.Result {
            try scenario.run(command + options + [manifest], in: work)
        }

        let first = try mirror(["sync"])
        #expect(first.status == 0 && first.stderr.isEmpty, "\(first)")
        #expect(!FileManager.default.fileExists(atPath: scenario.rootPath(".mirror")), "nothing of mirror's in the root")
        #expect(scenario.files() == ["f.bin", "g.bin"])
        let kept = (try? FileManager.default.contentsOfDirectory(atPath: state))?.sorted() ?? []
        #expect(kept == ["lock", "state.sqlite"], "\(kept)")

        scenario.server.clearRequests()
        let second = try mirror(["sync"])
        #expect(second.status == 0 && second.stderr.isEmpty, "\(second)")
        let requests = scenario.server.requests
        #expect(requests.count == 2 && !requests.contains { $0.method == "GET" && $0.headers["If-None-Match"] == nil },
                "the records were found: nothing fetched again: \(requests.map { "\($0.method) \($0.path)" })")
        let verify = try mirror(["verify"])
        #expect(verify.stdout.contains("2 ok, 0 unverified"), "\(verify)")

        try scenario.write(Self.manifest(scenario, ["f.bin"], top: top))
        let prune = try mirror(["sync", "--prune"])
        #expect(prune.status == 0, "\(prune)")
        #expect(scenario.files() == ["f.bin"])
        #expect(!FileManager.default.fileExists(atPath: scenario.rootPath(".mirror")))
    }

    /// Shards keep their own locks and stores in the state directory, and an unsharded run reads
    /// them there as it would in ROOT/.mirror.
    @Test func shardsKeepTheirLocksAndStoresInTheStateDir() throws {
        let scenario = try SyncScenario(.faultServer)
        Self.serve(scenario.server)
        try scenario.write(Self.manifest(scenario, ["f.bin", "g.bin"], top: ["state_dir: state"]))
        for shard in ["0/2", "1/2"] {
            let run = try scenario.run(["sync", "--shard", shard, "m.yaml"])
            #expect(run.status == 0, "\(run)")
        }
        let kept = (try? FileManager.default.contentsOfDirectory(atPath: scenario.directory.path("state")))?.sorted() ?? []
        #expect(kept == ["lock", "lock.layout", "lock.layouts", "lock.shard-0-of-2", "lock.shard-1-of-2",
                         "state.shard-0-of-2.sqlite", "state.shard-1-of-2.sqlite"], "\(kept)")
        #expect(!FileManager.default.fileExists(atPath: scenario.rootPath(".mirror")))

        scenario.server.clearRequests()
        let whole = try scenario.run(["sync", "m.yaml"])
        #expect(whole.status == 0, "\(whole)")
        let requests = scenario.server.requests
        #expect(requests.count == 2 && !requests.contains { $0.method == "GET" && $0.headers["If-None-Match"] == nil },
                "the shards' records were read from the state directory: \(requests.map { "\($0.method) \($0.path)" })")
        #expect(!FileManager.default.fileExists(atPath: scenario.rootPath(".mirror")))
    }

    /// A root whose state is in ROOT/.mirror, given a state_dir later: every command refuses
    /// (exit 2) rather than run beside a store and locks that other runs still use.
    @Test func aStateDirBesideAnExistingRootMirrorIsRefused() throws {
        let scenario = try SyncScenario(.faultServer)
        Self.serve(scenario.server)
        try scenario.write(Self.manifest(scenario, ["f.bin"]))
        #expect(try scenario.run(["sync", "m.yaml"]).status == 0)
        try scenario.write(Self.manifest(scenario, ["f.bin"], top: ["state_dir: state"]))

        for command in ["plan", "sync", "verify", "lock"] {
            let run = try scenario.run([command, "m.yaml"])
            #expect(run.status == 2, "\(command): \(run)")
            #expect(run.stderr.contains("mirror: state_dir: state_dir is \(scenario.directory.path("state")), but \(scenario.rootPath(".mirror")) exists too"), "\(command): \(run)")
        }
        let option = try scenario.run(["sync", "--state-dir", scenario.directory.path("other"), "m.yaml"])
        #expect(option.status == 2 && option.stderr.contains("mirror: --state-dir: state_dir is"), "\(option)")
        #expect(!FileManager.default.fileExists(atPath: scenario.directory.path("state")))
        #expect(!FileManager.default.fileExists(atPath: scenario.directory.path("other")))
    }

    /// A state_dir that is inside the root only on the disk (through a link) is refused too: its
    /// text alone does not say so.
    @Test func aStateDirInsideTheRootThroughALinkIsRefused() throws {
        let scenario = try SyncScenario(.faultServer)
        Self.serve(scenario.server)
        try FileManager.default.createSymbolicLink(atPath: scenario.directory.path("lnk"), withDestinationPath: "root")
        try scenario.write(Self.manifest(scenario, ["f.bin"], top: ["state_dir: lnk/state"]))

        let run = try scenario.run(["sync", "m.yaml"])

        #expect(run.status == 2, "\(run)")
        #expect(run.stderr.contains("state_dir \(scenario.directory.path("lnk/state")) is the root \(scenario.root) or inside it"), "\(run)")
        #expect(scenario.files().isEmpty)
        #expect(scenario.server.requests.isEmpty, "nothing was fetched")
    }

    // MARK: Serving a mirror

    /// The `nginx` and `apache` blocks of the README's "Serving a mirror".
    static func readmeSnippet(_ language: String) throws -> String {
        let readme = try String(contentsOfFile: InstallTests.packageRoot + "/README.md", encoding: .utf8)
        let section = try #require(readme.range(of: "### Serving a mirror"), "README has a section on serving a mirror")
        let fence = try #require(readme.range(of: "```\(language)\n", range: section.upperBound..<readme.endIndex))
        let end = try #require(readme.range(of: "```", range: fence.upperBound..<readme.endIndex))
        return String(readme[fence.upperBound..<end.lowerBound])
    }

    static func status(_ url: String) throws -> String {
        try CurlCommand.run(["-s", "-o", "/dev/null", "-w", "%{http_code}", url]).output
    }

    /// A root served as it is serves the state store with its upstream URLs; the README's nginx
    /// line refuses it (and a prune's trash) and still serves the files.
    @Test func theReadmesNginxLineRefusesTheStateStore() async throws {
        let scenario = try SyncScenario(.faultServer)
        Self.serve(scenario.server)
        _ = try await scenario.sync(Self.manifest(scenario, ["f.bin"]))
        try scenario.put(Data("left by a prune".utf8), at: "sub/.mirror-trash/x.bin")

        let open = try NginxServer.start(serving: scenario.root)
        #expect(try Self.status(open.url("/.mirror/state.sqlite")) == "200", "what the README warns of")
        open.stop()

        let line = try Self.readmeSnippet("nginx")
        let guarded = try NginxServer.start(serving: scenario.root, options: NginxOptions(extraServerConfiguration: line))
        #expect(try Self.status(guarded.url("/.mirror/state.sqlite")) == "403")
        #expect(try Self.status(guarded.url("/.mirror/")) == "403")
        #expect(try Self.status(guarded.url("/sub/.mirror-trash/x.bin")) == "403")
        #expect(try Self.status(guarded.url("/f.bin")) == "200")
        guarded.stop()
    }

    @Test func theReadmesApacheLinesRefuseTheStateStore() async throws {
        let scenario = try SyncScenario(.faultServer)
        Self.serve(scenario.server)
        _ = try await scenario.sync(Self.manifest(scenario, ["f.bin"]))
        try scenario.put(Data("left by a prune".utf8), at: "sub/.mirror-trash/x.bin")

        let apache = try await ApacheServer.start(serving: scenario.directory, extraConfiguration: try Self.readmeSnippet("apache"))
        #expect(try Self.status(apache.url("/root/.mirror/state.sqlite")) == "403")
        #expect(try Self.status(apache.url("/root/sub/.mirror-trash/x.bin")) == "403")
        #expect(try Self.status(apache.url("/root/f.bin")) == "200")
        apache.stop()
    }
}
