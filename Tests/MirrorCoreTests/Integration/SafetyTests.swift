import Foundation
import Testing
@testable import MirrorCore

/// One named regression test per safety rule: what must never happen to the machine mirror
/// runs on.
@Suite(.serialized)
struct SafetyTests {
    static let small = randomData(count: 10_000, seed: 70)
    static let large = randomData(count: 3_000_000, seed: 71)

    /// A 1 MiB tmpfs at `path`, for full-disk tests; records an issue (the test fails) where
    /// mounting is not allowed.
    static func mountTinyDisk(at path: String) throws -> Bool {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        guard mount("tmpfs", path, "tmpfs", 0, "size=1m") == 0 else {
            Issue.record("mounting a 1 MiB tmpfs needs root (CAP_SYS_ADMIN): \(String(cString: strerror(errno)))")
            return false
        }
        return true
    }

    @Test func diskFullFailsThatEntryOnlyAndIsNotRetried() throws {
        let scenario = try SyncScenario(.nginx(site: ["large.bin": Self.large, "small.bin": Self.small]))
        let root = scenario.directory.path("tiny")
        guard try Self.mountTinyDisk(at: root) else { return }
        defer { umount2(root, Int32(MNT_DETACH)) }
        try scenario.write(ManifestText(root: "tiny", top: ["concurrency: 1"], entries: [
            .url(scenario.url("/large.bin"), dest: "large.bin"), .url(scenario.url("/small.bin"), dest: "small.bin"),
        ]), to: "full.yaml")

        let result = try scenario.run(["sync", "full.yaml"])
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("FAILED large.bin: write"), "\(result)")
        #expect(result.stderr.contains("No space left on device"))
        #expect(result.stderr.contains("1 attempt)"), "a full disk is not retried like a network error")
        #expect(scenario.directory.contents(of: "tiny/small.bin")?.fingerprint == Self.small.fingerprint)
        #expect(scenario.directory.files("tiny") == ["small.bin"], "the failed partial gave its space back")
    }

    @Test func aFullDiskWhileCopyingAShortDestLeavesNoPartialCopy() throws {
        let scenario = try SyncScenario(.nginx(site: ["seed.bin": Self.large]))
        let root = scenario.directory.path("tiny")
        guard try Self.mountTinyDisk(at: root) else { return }
        defer { umount2(root, Int32(MNT_DETACH)) }
        // 700 KB on a 1 MiB disk: its copy into seed.bin.part cannot fit.
        try Self.large.prefix(700_000).write(to: URL(fileURLWithPath: root + "/seed.bin"))
        try scenario.write(ManifestText(root: "tiny", entries: [.url(scenario.url("/seed.bin"), dest: "seed.bin")]), to: "seed.yaml")

        let result = try scenario.run(["sync", "seed.yaml"])
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("No space left on device"), "\(result)")
        #expect(scenario.directory.files("tiny") == ["seed.bin"], "no partial copy left behind")
        #expect(scenario.directory.contents(of: "tiny/seed.bin")?.fingerprint == Self.large.prefix(700_000).fingerprint, "DEST untouched")
    }

    /// A new file's partial file is made while its GET travels: when it cannot be made, that
    /// GET stops, the entry fails at once with the reason, and the other entries go on.
    @Test func aPartialFileThatCannotBeMadeFailsItsEntryOnly() throws {
        let scenario = try SyncScenario(.nginx(site: ["a.bin": Self.small, "b.bin": Self.large]))
        let full = scenario.rootPath("full")
        try FileManager.default.createDirectory(atPath: full, withIntermediateDirectories: true)
        // A file system with room for its own directory and nothing else.
        guard mount("tmpfs", full, "tmpfs", 0, "size=1m,nr_inodes=1") == 0 else {
            Issue.record("mounting a tmpfs needs root (CAP_SYS_ADMIN): \(String(cString: strerror(errno)))")
            return
        }
        defer { umount2(full, Int32(MNT_DETACH)) }
        try scenario.write(.files(.url(scenario.url("/b.bin"), dest: "full/b.bin"), .url(scenario.url("/a.bin"), dest: "a.bin")))

        let result = try scenario.run(["sync", "m.yaml"])
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("FAILED full/b.bin: open"), "\(result)")
        #expect(result.stderr.contains("No space left on device"), "\(result)")
        #expect(result.stderr.contains("1 attempt)"), "a full disk is not retried like a network error")
        #expect(scenario.directory.files("root/full").isEmpty)
        #expect(scenario.directory.contents(of: "root/a.bin")?.fingerprint == Self.small.fingerprint)
    }

    /// New files' GETs that fail at once, before the turn in which their partial files would
    /// be made is over: no partial file is made for them, and the entries they belonged to are
    /// gone by then without harm (a deferred step once read a finished entry and crashed).
    @Test func newFilesWhoseRequestsFailAtOnceLeaveNoPartialFiles() throws {
        let scenario = try SyncScenario(.nginx(site: ["a.bin": Self.small]))
        let present = try scenario.directory.write(Self.small, to: "source/present.bin")
        // Alone after a file that comes at once, and many at a time beside a server's.
        let alone: [ManifestText.Entry] = [.url("file://" + present, dest: "p.bin"), .url("file://" + scenario.directory.path("source/gone"), dest: "g.bin")]
        var many: [ManifestText.Entry] = (0..<12).map { .url("file://" + scenario.directory.path("source/missing-\($0)"), dest: "m\($0).bin") }
        many.append(.url(scenario.url("/a.bin"), dest: "a.bin"))
        for (entries, came) in [(alone, ["p.bin"]), (many, ["a.bin", "p.bin"])] {
            try scenario.write(ManifestText(top: ["concurrency: 4", "allow_file: true"], entries: entries), to: "m.yaml")
            let result = try scenario.run(["sync", "m.yaml"])
            #expect(result.status == 1, "\(result)")
            #expect(result.stderr.components(separatedBy: "No such file or directory").count == entries.count, "\(result)")
            #expect(scenario.files() == came, "only the files that came, and no partial file")
        }
    }

    @Test func aSymlinkedDirectoryLeadingOutOfTheRootIsRefused() throws {
        let scenario = try SyncScenario(.nginx(site: ["a.bin": Self.small]))
        let outside = scenario.directory.path("outside")
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: scenario.rootPath("escape"), withDestinationPath: outside)
        try scenario.write(.files(.url(scenario.url("/a.bin"), dest: "escape/a.bin")))

        let result = try scenario.run(["sync", "m.yaml"])
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("root/escape is a symbolic link"), "\(result)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside).isEmpty)
    }

    @Test func aSymlinkAtDestOrItsPartialIsNeverFollowed() throws {
        let scenario = try SyncScenario(.nginx(site: ["a.bin": Self.small, "b.bin": Self.small]))
        let victim = scenario.directory.path("victim.txt")
        try Data("precious".utf8).write(to: URL(fileURLWithPath: victim))
        try FileManager.default.createSymbolicLink(atPath: scenario.rootPath("a.bin"), withDestinationPath: victim)
        try FileManager.default.createSymbolicLink(atPath: scenario.rootPath("b.bin.part"), withDestinationPath: victim)
        try scenario.write(.files(.url(scenario.url("/a.bin"), dest: "a.bin"), .url(scenario.url("/b.bin"), dest: "b.bin")))

        let result = try scenario.run(["sync", "m.yaml"])
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("FAILED a.bin: the destination is a symbolic link"))
        #expect(result.stderr.contains("FAILED b.bin: the partial file's path is a symbolic link"))
        #expect(String(decoding: try Data(contentsOf: URL(fileURLWithPath: victim)), as: UTF8.self) == "precious")
    }

    @Test func newFilesGetNoMoreThanTheUmaskAllows() throws {
        let scenario = try SyncScenario(.nginx(site: ["a.bin": Self.small]))
        try scenario.write(.files(.url(scenario.url("/a.bin"), dest: "sub/a.bin")))
        let result = try scenario.run(["sync", "m.yaml"], umask: 0o027)
        #expect(result.status == 0, "\(result)")
        let file = try FileManager.default.attributesOfItem(atPath: scenario.rootPath("sub/a.bin"))
        let directory = try FileManager.default.attributesOfItem(atPath: scenario.rootPath("sub"))
        #expect((file[.posixPermissions] as? Int) == 0o640)
        #expect((directory[.posixPermissions] as? Int) == 0o750)
    }

    @Test func aNameTooLongForThePartSuffixStillSyncs() async throws {
        let name = String(repeating: "n", count: 252) + ".gz"
        let scenario = try SyncScenario(.nginx(site: [name: Self.small]))
        let manifest = try scenario.load(.files(.url(scenario.url("/" + name), dest: name)))
        let reports = try await scenario.sync(manifest)
        #expect(reports[0].outcome == .transferred)
        #expect(scenario.local(name)?.fingerprint == Self.small.fingerprint)
        #expect(scenario.files() == [name])
    }

    @Test func aFileNameTakenFromAVariableMustBeGivenAsDest() throws {
        #expect {
            _ = try ManifestLoader.parse(text: "version: 1\nfiles:\n  - url: http://h/dl/${TOKEN}\n", path: "m.yaml",
                                         baseDirectory: "/", environment: ["TOKEN": "s3cr3t"])
        } throws: { error in
            let text = "\(error)"
            return text.contains("m.yaml:3:10") && text.contains("set dest") && !text.contains("s3cr3t")
        }
    }

    @Test func secretsNeverReachOutputJSONOrTheStateStore() throws {
        let scenario = try SyncScenario(.nginx(site: ["a.bin": Self.small]))
        let base = scenario.nginx.baseURL.replacingOccurrences(of: "http://", with: "http://deploy:pw-9f3k2@")
        let closed = try ClosedPort()
        defer { withExtendedLifetime(closed) {} }
        let closedPort = closed.port
        let text = """
            version: 1
            root: root
            connectivity:
              wait: 1s
            files:
              - url: \(base)/a.bin
                headers: &token
                  Authorization: "Bearer ${ASSET_TOKEN}"
              - url: \(scenario.nginx.baseURL)/missing.bin?key=${ASSET_TOKEN}
                dest: missing.bin
                headers: *token
              - url: http://${PRIVATE_HOST}:\(closedPort)/c.bin
                headers: *token
                retries: 0
              - url: \(scenario.nginx.baseURL)/netrc-only.bin
            """
        try scenario.write(text: text)
        let netrc = try scenario.write(text: "machine 127.0.0.1 login deploy password nrc-5d1a77\n", to: "netrc")
        let environment = ["ASSET_TOKEN": "tok-7c1e0b5a", "PRIVATE_HOST": "localhost", "NETRC": netrc]
        var everything = ""
        for arguments in [["plan", "-v", "m.yaml"], ["plan", "--json", "m.yaml"], ["sync", "-v", "m.yaml"],
                          ["sync", "--json", "m.yaml"], ["verify", "--json", "m.yaml"]] {
            let result = try scenario.run(arguments, environment: environment)
            everything += result.stdout + result.stderr
        }
        #expect(scenario.local("a.bin")?.fingerprint == Self.small.fingerprint, "the secrets were used")
        #expect(try scenario.nginxRequests().contains { $0.authorization == "Bearer tok-7c1e0b5a" })
        #expect(everything.contains("${ASSET_TOKEN}") && everything.contains("***@"))
        #expect(!everything.contains("tok-7c1e0b5a"))
        #expect(!everything.contains("pw-9f3k2"))
        let netrcLogin = "Basic " + Data("deploy:nrc-5d1a77".utf8).base64EncodedString()
        #expect(try scenario.nginxRequests().contains { $0.authorization == netrcLogin }, "the netrc login was used")
        #expect(!everything.contains("nrc-5d1a77") && !everything.contains(netrcLogin.dropFirst(6)))
        #expect(everything.contains("<host> port \(closedPort)"), "the failures are still reported")
        #expect(!everything.contains("localhost"), "a host written as ${VAR} is not printed either")
        var store = Data()
        for suffix in ["", "-wal"] {
            store += (try? Data(contentsOf: URL(fileURLWithPath: scenario.rootPath(".mirror/state.sqlite" + suffix)))) ?? Data()
        }
        #expect(!store.isEmpty)
        #expect(store.range(of: Data("tok-7c1e0b5a".utf8)) == nil && store.range(of: Data("pw-9f3k2".utf8)) == nil)
        #expect(store.range(of: Data("nrc-5d1a77".utf8)) == nil)
    }
}
