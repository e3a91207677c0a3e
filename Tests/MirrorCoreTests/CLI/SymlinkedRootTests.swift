import Foundation
import Testing
@testable import MirrorCore

/// A root reached through symbolic links keeps its state store, in every way a root can be
/// named. SQLite was once given `ROOT/.mirror/state.sqlite` with `SQLITE_OPEN_NOFOLLOW`, which
/// it applies to every component: with `/srv -> /data/srv` the store could not be opened, was
/// deleted, and every run decided by size (exit 0, a message only with -v): an ETag-only server's
/// files were fetched again each run, `verify` found no records and `prune` deleted nothing.
@Suite(.serialized)
struct SymlinkedRootTests {
    /// How the run names its root; each goes through a symbolic link.
    enum Form: String, CaseIterable, CustomTestStringConvertible {
        /// `root:` in the manifest, absolute, below `srv -> data/srv` (a home directory moved to
        /// another disk is the same).
        case manifestRootBelowASymlinkedAncestor
        /// `--root BASE/lnk/root`, where `lnk -> data/lnk`.
        case absoluteRootOptionThroughALink
        /// `--root lnk/root`, relative to the working directory.
        case relativeRootOptionThroughALink
        /// `root: ../lnk/root` in a manifest in `conf/`, relative to the manifest's directory.
        case relativeManifestRootThroughALink
        /// The `ExecStart=` of examples/systemd, its `/srv` a link to `/data/srv`.
        case systemdExample

        var testDescription: String { rawValue }
    }

    /// A form set up in `scenario`'s directory: the command lines for sync and the other
    /// commands, where they run, and the real directory the root is.
    struct Setup {
        /// `sync` and the options the form passes with it.
        var sync: [String]
        /// The options that name the root, for every command.
        var rootOptions: [String]
        var manifest: String
        var workingDirectory: String
        var realRoot: String
    }

    static let data = randomData(count: 120_000, seed: 41)
    static let other = randomData(count: 30_000, seed: 42)

    /// Serves f.bin and g.bin with an ETag and no Last-Modified: without a record, nothing on
    /// disk can be taken for a version, so a lost store means a download on every run.
    static func serveWithETagsOnly(_ server: FaultServer) {
        for method in ["GET", "HEAD"] {
            server.route("/f.bin", method: method, reply: .file(data, etag: "\"f1\""))
            server.route("/g.bin", method: method, reply: .file(other, etag: "\"g1\""))
        }
    }

    static func setUp(_ form: Form, in scenario: SyncScenario) throws -> Setup {
        let base = scenario.directory.path
        func link(_ name: String, to target: String) throws {
            try FileManager.default.createDirectory(atPath: base + "/" + target, withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(atPath: base + "/" + name, withDestinationPath: target)
        }
        switch form {
        case .manifestRootBelowASymlinkedAncestor:
            try link("srv", to: "data/srv")
            return Setup(sync: ["sync"], rootOptions: [], manifest: base + "/m.yaml", workingDirectory: "/",
                         realRoot: base + "/data/srv/mirror/assets")
        case .absoluteRootOptionThroughALink:
            try link("lnk", to: "data/lnk")
            return Setup(sync: ["sync"], rootOptions: ["--root", base + "/lnk/root"], manifest: base + "/m.yaml",
                         workingDirectory: "/", realRoot: base + "/data/lnk/root")
        case .relativeRootOptionThroughALink:
            try link("lnk", to: "data/lnk")
            return Setup(sync: ["sync"], rootOptions: ["--root", "lnk/root"], manifest: "m.yaml", workingDirectory: base,
                         realRoot: base + "/data/lnk/root")
        case .relativeManifestRootThroughALink:
            try link("lnk", to: "data/lnk")
            try FileManager.default.createDirectory(atPath: base + "/conf", withIntermediateDirectories: true)
            return Setup(sync: ["sync"], rootOptions: [], manifest: base + "/conf/m.yaml", workingDirectory: "/",
                         realRoot: base + "/data/lnk/root")
        case .systemdExample:
            try link("srv", to: "data/srv")
            try FileManager.default.createDirectory(atPath: base + "/etc/mirror", withIntermediateDirectories: true)
            let command = try SystemdUnitTests.execStart().map {
                $0.replacingOccurrences(of: "%i", with: "assets")
                    .replacingOccurrences(of: "/etc/mirror/", with: base + "/etc/mirror/")
                    .replacingOccurrences(of: "/srv/mirror/", with: base + "/srv/mirror/")
            }
            // [binary, sync, options…, --root, ROOT, MANIFEST]
            let rootAt = try #require(command.firstIndex(of: "--root"))
            return Setup(sync: Array(command[1..<rootAt]), rootOptions: ["--root", command[rootAt + 1]],
                         manifest: try #require(command.last), workingDirectory: "/", realRoot: base + "/data/srv/mirror/assets")
        }
    }

    /// The manifest of the form, listing `served` files.
    static func manifest(_ form: Form, _ scenario: SyncScenario, _ served: [String]) -> String {
        let root: String? = switch form {
        case .manifestRootBelowASymlinkedAncestor: scenario.directory.path + "/srv/mirror/assets"
        case .relativeManifestRootThroughALink: "../lnk/root"
        default: nil
        }
        return ManifestText(root: root, entries: served.map { .init(scenario.url("/" + $0), dest: $0) }).text
    }

    @Test(arguments: Form.allCases)
    func aRootReachedThroughASymlinkKeepsItsStateStore(_ form: Form) throws {
        let scenario = try SyncScenario(.faultServer)
        Self.serveWithETagsOnly(scenario.server)
        let setup = try Self.setUp(form, in: scenario)
        let manifestPath = setup.manifest.hasPrefix("/") ? setup.manifest : setup.workingDirectory + "/" + setup.manifest
        try Data(Self.manifest(form, scenario, ["f.bin", "g.bin"]).utf8).write(to: URL(fileURLWithPath: manifestPath))
        func mirror(_ command: [String], _ extra: [String] = []) throws -> MirrorBinary.Result {
            try scenario.run(command + extra + setup.rootOptions + [setup.manifest], in: setup.workingDirectory)
        }

        let first = try mirror(setup.sync)
        #expect(first.status == 0, "\(first)")
        #expect(first.stderr.isEmpty, "nothing to warn about\n\(first)")
        #expect(FileManager.default.contents(atPath: setup.realRoot + "/f.bin") == Self.data)
        #expect(FileManager.default.fileExists(atPath: setup.realRoot + "/.mirror/state.sqlite"), "the store is where the root really is")

        // The second run asks only whether the versions it recorded changed.
        scenario.server.clearRequests()
        let second = try mirror(setup.sync)
        #expect(second.status == 0 && second.stderr.isEmpty, "\(second)")
        let requests = scenario.server.requests
        #expect(requests.count == 2, "one request per entry: \(requests.map { "\($0.method) \($0.path)" })")
        #expect(!requests.contains { $0.method == "GET" && $0.headers["If-None-Match"] == nil },
                "nothing fetched again: \(requests.map { "\($0.method) \($0.path)" })")
        let record = try #require(try StateStore.open(root: setup.realRoot, mode: .readOnly).store?.record(for: "f.bin"))
        #expect(record.complete?.validators.etag == "\"f1\"")

        // verify finds the records: both files are vouched for, not "unverified".
        let verify = try mirror(["verify"])
        #expect(verify.status == 0, "\(verify)")
        #expect(verify.stdout.contains("2 ok, 0 unverified, 0 with problems"), "\(verify)")

        // prune knows what mirror wrote.
        try Data(Self.manifest(form, scenario, ["f.bin"]).utf8).write(to: URL(fileURLWithPath: manifestPath))
        let prune = try mirror(setup.sync, ["--prune"])
        #expect(prune.status == 0, "\(prune)")
        #expect(!FileManager.default.fileExists(atPath: setup.realRoot + "/g.bin"))
        #expect(FileManager.default.fileExists(atPath: setup.realRoot + "/f.bin"))
    }

    /// A store that cannot be opened (here its file is a symbolic link, which is never followed)
    /// is left as it is, and the run says so on stderr without -v; the store it points to is not
    /// touched. It was once deleted and replaced in silence.
    @Test func aStoreThatCannotBeOpenedIsLeftAloneAndSaidWithoutVerbose() throws {
        let scenario = try SyncScenario(.faultServer)
        Self.serveWithETagsOnly(scenario.server)
        try scenario.write(ManifestText(entries: [.init(scenario.url("/f.bin"), dest: "f.bin")]))
        let outside = try scenario.directory.write(Data(), to: "outside/elsewhere.sqlite")
        try FileManager.default.createDirectory(atPath: scenario.rootPath(".mirror"), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: scenario.rootPath(".mirror/state.sqlite"), withDestinationPath: outside)

        let run = try scenario.run(["sync", "m.yaml"])

        #expect(run.status == 0, "\(run)")
        #expect(run.stderr.contains("mirror: warning: state store \(scenario.rootPath(".mirror/state.sqlite")) cannot be used (it is a symbolic link, which mirror does not follow); it is left as it is"), "\(run)")
        let left = try FileManager.default.destinationOfSymbolicLink(atPath: scenario.rootPath(".mirror/state.sqlite"))
        #expect(left == outside, "the link is still there")
        #expect(FileManager.default.contents(atPath: outside) == Data(), "and what it points to was not written")
        #expect(scenario.local("f.bin") == Self.data)
    }

    /// A store SQLite finds damaged is replaced, and that too is said without -v: the records
    /// it held are gone, and the next runs pay for them.
    @Test func aDamagedStoreIsReplacedAndSaidWithoutVerbose() throws {
        let scenario = try SyncScenario(.faultServer)
        Self.serveWithETagsOnly(scenario.server)
        try scenario.write(ManifestText(entries: [.init(scenario.url("/f.bin"), dest: "f.bin")]))
        #expect(try scenario.run(["sync", "m.yaml"]).status == 0)
        try Data(repeating: 0x5a, count: 8192).write(to: URL(fileURLWithPath: scenario.rootPath(".mirror/state.sqlite")))

        let run = try scenario.run(["sync", "m.yaml"])

        #expect(run.status == 0, "\(run)")
        #expect(run.stderr.contains("mirror: warning: state store \(scenario.rootPath(".mirror/state.sqlite")) was damaged"), "\(run)")
        #expect(run.stderr.contains("replaced it with a new one"), "\(run)")
        let quiet = try scenario.run(["sync", "--quiet", "m.yaml"])
        #expect(quiet.status == 0 && quiet.stderr.isEmpty, "the new store works: nothing to say\n\(quiet)")
    }
}
