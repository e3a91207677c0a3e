import Foundation
import Testing
@testable import MirrorCore

/// The built binary's exit codes and output contract.
@Suite(.serialized)
struct CLITests {
    static let payload = randomData(count: 200_000, seed: 40)

    /// A served `a.bin`, a manifest listing it (and optionally a 404), in a temp directory.
    static func setUp(withMissingEntry: Bool = false) throws -> SyncScenario {
        let scenario = try SyncScenario(.nginx(site: ["a.bin": payload]))
        var entries: [ManifestText.Entry] = [.url(scenario.url("/a.bin"), dest: "a.bin")]
        if withMissingEntry { entries.append(.url(scenario.url("/nope.bin"), dest: "nope.bin")) }
        try scenario.write(ManifestText(entries: entries), to: "mirror.yaml")
        return scenario
    }

    @Test func syncThenQuietSyncPrintsNothingAndExitsZero() throws {
        let scenario = try Self.setUp()
        let first = try scenario.run(["sync", "mirror.yaml"])
        #expect(first.status == 0, "\(first)")
        #expect(first.stdout.contains("downloaded   a.bin"))
        #expect(scenario.local("a.bin")?.fingerprint == Self.payload.fingerprint)

        let second = try scenario.run(["sync", "--quiet", "mirror.yaml"])
        #expect(second.status == 0, "\(second)")
        #expect(second.stdout.isEmpty && second.stderr.isEmpty, "\(second)")
    }

    /// Dates from outside may lie past what nanoseconds since 1970 can count (2262): a server's
    /// Last-Modified becomes the file's mtime, and a file may have been touched to any date.
    @Test func datesPast2262TrapNeitherSyncNorPlanNorVerify() throws {
        let scenario = try SyncScenario(.faultServer)
        let server = scenario.server
        defer { server.stop() }
        server.route("/far.bin", reply: .file(Self.payload, etag: "\"far\"", lastModified: "Fri, 31 Dec 2600 23:59:59 GMT"))
        try scenario.write(.files(.url(server.url("/far.bin")), .url(server.url("/far.bin"), dest: "touched.bin")))
        for command in ["sync", "sync", "plan", "verify"] {
            let result = try scenario.run([command, "m.yaml"])
            #expect(result.status == 0, "\(command): \(result)")
        }
        #expect(scenario.local("far.bin") == Self.payload)
        // A file touched far into the future by hand, checked offline.
        var times = [timespec(tv_sec: 10_413_792_000, tv_nsec: 0), timespec(tv_sec: 10_413_792_000, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, scenario.rootPath("touched.bin"), &times, 0) == 0)
        let verify = try scenario.run(["verify", "m.yaml"])
        #expect(verify.status == 0, "touched, same bytes: \(verify)")
    }

    @Test func aFailedEntryExitsOneAndTheOthersComplete() throws {
        let scenario = try Self.setUp(withMissingEntry: true)
        let result = try scenario.run(["sync", "--quiet", "mirror.yaml"])
        #expect(result.status == 1, "\(result)")
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.contains("FAILED nope.bin: HTTP 404 Not Found"))
        #expect(scenario.local("a.bin")?.fingerprint == Self.payload.fingerprint)
    }

    @Test func manifestErrorsExitTwoNameTheLineAndTouchNothing() throws {
        let scenario = try Self.setUp()
        try scenario.write(text: "version: 1\nroot: root\nfiles:\n  - url: http://127.0.0.1/a\n    sah256: abc\n", to: "bad.yaml")
        let before = scenario.snapshot()
        let result = try scenario.run(["sync", "bad.yaml"])
        #expect(result.status == 2, "\(result)")
        #expect(result.stderr.contains("bad.yaml:5:5"), "\(result)")
        #expect(result.stderr.contains("sha256"), "did you mean")
        #expect(scenario.snapshot() == before)
        #expect(try scenario.nginxRequests().isEmpty)
    }

    @Test(arguments: [["sync"], ["sync", "m.yaml", "--bogus"], ["plan", "m.yaml", "-j", "0"], ["frobnicate"]])
    func usageErrorsExitTwo(_ arguments: [String]) throws {
        let directory = try TemporaryDirectory()
        let result = try MirrorBinary.run(arguments, in: directory.path)
        #expect(result.status == 2, "\(result)")
        #expect(!result.stderr.isEmpty)
    }

    @Test func planJSONIsOneObjectWithTheDocumentedShape() throws {
        let scenario = try Self.setUp(withMissingEntry: true)
        try scenario.put(Self.payload.prefix(1000), at: "a.bin")
        let result = try scenario.run(["plan", "--json", "mirror.yaml"])
        #expect(result.status == 1, "a failing entry makes plan exit 1: \(result)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        let entries = try #require(object["entries"] as? [[String: Any]])
        #expect(entries.count == 2)
        #expect(entries[0]["action"] as? String == "resume")
        #expect(entries[0]["offset"] as? Int == 1000)
        #expect(entries[0]["local_size"] as? Int == 1000)
        #expect(entries[0]["remote_size"] as? Int == 200_000)
        #expect(entries[0]["reason"] != nil)
        #expect(entries[1]["action"] as? String == "fail")
        #expect(entries[1]["local_size"] is NSNull)
        #expect(entries[1]["reason"] as? String == "HTTP 404 Not Found")
        let summary = try #require(object["summary"] as? [String: Any])
        #expect(summary["resume"] as? Int == 1 && summary["fail"] as? Int == 1 && summary["download"] as? Int == 0)
        #expect(summary["bytes_to_transfer"] as? Int == 199_000)
        #expect(Set(summary.keys) == ["download", "resume", "restart", "replace", "skip", "fail", "bytes_to_transfer"])
        #expect(scenario.local("a.bin")?.count == 1000, "plan changed nothing")
    }

    @Test func planExitCodeReportsPendingChanges() throws {
        let scenario = try Self.setUp()
        let pending = try scenario.run(["plan", "--exit-code", "--quiet", "mirror.yaml"])
        #expect(pending.status == 5, "\(pending)")
        #expect(pending.stdout.isEmpty)
        _ = try scenario.run(["sync", "-q", "mirror.yaml"])
        let clean = try scenario.run(["plan", "--exit-code", "mirror.yaml"])
        #expect(clean.status == 0, "\(clean)")
        #expect(clean.stdout.contains("skip"))
    }

    /// A plan whose entry cannot be planned exits 1, and under --quiet names the entry and why
    /// on stderr (the table, which says it otherwise, is not printed); --exit-code does not
    /// turn that into 5.
    @Test func aPlanWithAFailedEntryExitsOneAndNamesIt() throws {
        let scenario = try Self.setUp(withMissingEntry: true)
        let quiet = try scenario.run(["plan", "--quiet", "--exit-code", "mirror.yaml"])
        #expect(quiet.status == 1, "\(quiet)")
        #expect(quiet.stdout.isEmpty)
        let failed = quiet.stderr.split(separator: "\n").filter { $0.hasPrefix("FAILED ") }
        #expect(failed.count == 1 && failed[0].contains("404"), "\(quiet)")
        let shown = try scenario.run(["plan", "mirror.yaml"])
        #expect(shown.status == 1, "\(shown)")
        #expect(shown.stdout.contains("fail") && shown.stdout.contains("404"), "\(shown)")
    }

    @Test func syncJSONReportsEveryEntry() throws {
        let scenario = try Self.setUp(withMissingEntry: true)
        let result = try scenario.run(["sync", "--json", "mirror.yaml"])
        #expect(result.status == 1)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        let entries = try #require(object["entries"] as? [[String: Any]])
        #expect(entries.map { $0["status"] as? String } == ["transferred", "failed"])
        #expect(entries[0]["bytes_transferred"] as? Int == 200_000)
        #expect(entries[1]["error"] as? String == "HTTP 404 Not Found")
        #expect(result.stderr.contains("FAILED nope.bin"), "human text goes to stderr with --json")
    }

    @Test func rootOptionOverridesTheManifest() throws {
        let scenario = try Self.setUp()
        let result = try scenario.run(["sync", "--root", "elsewhere", "mirror.yaml"])
        #expect(result.status == 0, "\(result)")
        #expect(scenario.directory.contents(of: "elsewhere/a.bin")?.fingerprint == Self.payload.fingerprint)
        #expect(scenario.local("a.bin") == nil)
    }

    /// A command line that starts with a command is parsed with that command as the root
    /// first (`MirrorCommand.parsedCommandLine`); whatever that parse does not yield as the
    /// command is parsed from the root again, so it reads as it always did: the root's
    /// `--version` after a command, the root's name in a usage error and a completion script.
    @Test func whatACommandAloneDoesNotParseIsTheRootsToPrint() throws {
        let directory = try TemporaryDirectory()
        let version = try MirrorBinary.run(["sync", "m.yaml", "--version"], in: directory.path)
        #expect(version.status == 0, "\(version)")
        #expect(version.stdout == MirrorVersion.string + "\n", "\(version)")

        let unknown = try MirrorBinary.run(["sync", "m.yaml", "--bogus"], in: directory.path)
        #expect(unknown.status == 2, "\(unknown)")
        #expect(unknown.stderr.contains("Error: Unknown option '--bogus'"), "\(unknown)")
        #expect(unknown.stderr.contains("See 'mirror sync --help' for more information."), "\(unknown)")

        let completion = try MirrorBinary.run(["plan", "--generate-completion-script", "bash"], in: directory.path)
        #expect(completion.status == 0, "\(completion)")
        #expect(completion.stdout.contains("complete -o filenames -F _mirror mirror"), "\(completion)")
    }

    @Test func helpDocumentsExitStatus() throws {
        let directory = try TemporaryDirectory()
        let result = try MirrorBinary.run(["--help"], in: directory.path)
        #expect(result.status == 0)
        #expect(result.stdout.contains("EXIT STATUS"))
        #expect(result.stdout.contains("plan") && result.stdout.contains("sync"))
    }
}

/// SIGINT and SIGTERM during a sync: exit 130/143, the partial file kept, the next run resumes.
@Suite(.serialized)
struct InterruptionTests {
    @Test(arguments: [(SIGINT, Int32(130)), (SIGTERM, Int32(143))])
    func interruptedSyncKeepsItsPartialAndResumes(_ signal: Int32, _ expected: Int32) throws {
        let payload = randomData(count: 3_000_000, seed: 41)
        // nginx sends the first second's worth at once, then 1 MiB/s: the transfer lasts ~2 s.
        let scenario = try SyncScenario(.nginx(site: ["slow.bin": payload], options: NginxOptions(rateLimit: 1 << 20)))
        try scenario.write(.files(.url(scenario.url("/slow.bin"), dest: "slow.bin")), to: "mirror.yaml")

        let running = try scenario.start(["sync", "mirror.yaml"])
        // Wait until bytes are arriving, then interrupt.
        let deadline = ContinuousClock.now + .seconds(10)
        while (scenario.local("slow.bin.part")?.count ?? 0) < 100_000 && ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.02)
        }
        kill(running.pid, signal)
        let result = try running.wait()

        #expect(result.status == expected, "\(result)")
        #expect(result.stderr.contains("partial files are kept"))
        #expect(scenario.local("slow.bin") == nil, "nothing half-written under the final name")
        let kept = try #require(scenario.local("slow.bin.part")).count
        #expect(kept > 0 && kept < payload.count)

        scenario.nginx.clearLog()
        let resumed = try scenario.run(["sync", "--quiet", "mirror.yaml"])
        #expect(resumed.status == 0, "\(resumed)")
        #expect(scenario.local("slow.bin")?.fingerprint == payload.fingerprint)
        #expect(try scenario.nginxRequests().filter { $0.method == "GET" }.map(\.range) == ["bytes=\(kept)-"])
    }
}

/// The run lock and a hard kill, through the binary.
@Suite(.serialized)
struct RunLockCLITests {
    static let payload = randomData(count: 3_000_000, seed: 42)

    static func slowScenario() throws -> SyncScenario {
        // The first second's worth at once, then 1 MiB/s: a sync of this lasts about 2 s.
        let scenario = try SyncScenario(.nginx(site: ["slow.bin": payload], options: NginxOptions(rateLimit: 1 << 20)))
        try scenario.write(.files(.url(scenario.url("/slow.bin"), dest: "slow.bin")), to: "mirror.yaml")
        return scenario
    }

    static func waitForPartial(_ scenario: SyncScenario) {
        let deadline = ContinuousClock.now + .seconds(10)
        while (scenario.local("slow.bin.part")?.count ?? 0) < 100_000 && ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.02)
        }
    }

    @Test func aSecondSyncOnTheSameRootExitsThreeAndNamesTheHolder() throws {
        let scenario = try Self.slowScenario()
        let first = try scenario.start(["sync", "--quiet", "mirror.yaml"])
        Self.waitForPartial(scenario)

        let second = try scenario.run(["sync", "mirror.yaml"])
        #expect(second.status == 3, "\(second)")
        #expect(second.stderr.contains("process \(first.pid)"), "\(second)")

        let waiting = try scenario.run(["sync", "--quiet", "--wait-lock", "30s", "mirror.yaml"])
        #expect(waiting.status == 0, "\(waiting)")
        #expect(try first.wait().status == 0)
        #expect(scenario.local("slow.bin")?.fingerprint == Self.payload.fingerprint)
    }

    @Test func aSignalWhileWaitingForTheLockExitsAsInterrupted() throws {
        let scenario = try Self.slowScenario()
        let first = try scenario.start(["sync", "--quiet", "mirror.yaml"])
        Self.waitForPartial(scenario)
        let waiting = try scenario.start(["sync", "--wait-lock", "1m", "mirror.yaml"])
        waiting.waitUntilCatching(SIGINT)
        Thread.sleep(forTimeInterval: 0.5)
        kill(waiting.pid, SIGINT)
        let result = try waiting.wait()
        #expect(result.status == 130, "\(result)")
        #expect(try first.wait().status == 0)
    }

    @Test func killNineMidDownloadThenSyncGivesTheExactFileAndAUsableStore() throws {
        let scenario = try Self.slowScenario()
        let victim = try scenario.start(["sync", "--quiet", "mirror.yaml"])
        Self.waitForPartial(scenario)
        kill(victim.pid, SIGKILL)
        #expect(try victim.wait().status != 0)
        let kept = scenario.local("slow.bin.part")?.count ?? 0
        #expect(kept > 0 && scenario.local("slow.bin") == nil)

        scenario.nginx.clearLog()
        let after = try scenario.run(["sync", "--quiet", "mirror.yaml"])
        #expect(after.status == 0, "\(after)")
        #expect(scenario.local("slow.bin")?.fingerprint == Self.payload.fingerprint)
        // The store recorded the version before the kill: the resume is guarded by If-Range.
        let get = try #require(try scenario.nginxRequests().first { $0.method == "GET" })
        #expect(get.range == "bytes=\(kept)-")
        #expect(get.ifRange != nil)

        let verify = try scenario.run(["plan", "--exit-code", "mirror.yaml"])
        #expect(verify.status == 0, "\(verify)")
    }
}

/// `mirror lock` and `mirror verify` through the binary.
@Suite(.serialized)
struct LockAndVerifyCLITests {
    static let a = randomData(count: 120_000, seed: 50)
    static let b = randomData(count: 7_000, seed: 51)

    static func setUp(extra: [(path: String, dest: String)] = []) throws -> SyncScenario {
        let scenario = try SyncScenario(.nginx(site: ["a.bin": a, "b.bin": b]))
        let entries = ([("/a.bin", "a.bin"), ("/b.bin", "b.bin")] + extra).map { ManifestText.Entry.url(scenario.url($0.path), dest: $0.dest) }
        try scenario.write(text: "# provisioning assets\n" + ManifestText(entries: entries).text, to: "mirror.yaml")
        return scenario
    }

    @Test func lockPinsEveryEntryAndThePinnedManifestPlansOffline() throws {
        let scenario = try Self.setUp()
        let locked = try scenario.run(["lock", "mirror.yaml"])
        #expect(locked.status == 0, "\(locked)")
        let text = scenario.text(of: "mirror.yaml")
        #expect(text.hasPrefix("# provisioning assets\n"), "comments are kept")
        #expect(text.contains("sha256: \(DigestHasher.hex(of: Self.a))") && text.contains("size: 120000"))
        #expect(text.contains("sha256: \(DigestHasher.hex(of: Self.b))") && text.contains("size: 7000"))

        scenario.nginx.stop()
        let plan = try scenario.run(["plan", "--exit-code", "mirror.yaml"])
        #expect(plan.status == 0, "\(plan)")
        #expect(plan.stdout.contains("2 skip"))
        let verify = try scenario.run(["verify", "mirror.yaml"])
        #expect(verify.status == 0, "\(verify)")
        #expect(verify.stdout.contains("2 ok"))
    }

    /// Lock reloads its pinned text to check it: a relative `ca_file` must resolve from the
    /// manifest's directory then too, also when mirror runs from another directory.
    @Test func lockPinsAManifestWithARelativeCAFile() throws {
        let scenario = try Self.setUp()
        let example = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("examples/internal-ca.pem")
        try scenario.directory.write(try Data(contentsOf: example), to: "sub/ca.pem")
        let text = "version: 1\nroot: root\ndefaults:\n  ca_file: ca.pem\nfiles:\n  - url: \(scenario.url("/a.bin"))\n"
        try scenario.write(text: text, to: "sub/m.yaml")

        let locked = try scenario.run(["lock", "sub/m.yaml"])
        #expect(locked.status == 0, "\(locked)")
        #expect(scenario.directory.contents(of: "sub/m.yaml").map { String(decoding: $0, as: UTF8.self) }?
            .contains("sha256: \(DigestHasher.hex(of: Self.a))") == true)
    }

    @Test func lockRefusesAFlowStyleEntryBeforeDownloadingAnything() throws {
        let scenario = try SyncScenario(.nginx(site: ["a.bin": Self.a]))
        let text = "version: 1\nroot: root\nfiles:\n  - {url: \"\(scenario.url("/a.bin"))\"}\n"
        try scenario.write(text: text, to: "mirror.yaml")
        let result = try scenario.run(["lock", "mirror.yaml"])
        #expect(result.status == 2, "\(result)")
        #expect(result.stderr.contains("flow style"))
        #expect(scenario.local("a.bin") == nil)
        #expect(try scenario.nginxRequests().isEmpty)
    }

    /// An aliased entry was refused only after every download, naming a line of text that was
    /// never written.
    @Test func lockRefusesAnAliasedEntryBeforeDownloadingAnything() throws {
        let scenario = try SyncScenario(.nginx(site: ["a.bin": Self.a]))
        let text = "version: 1\nroot: root\nfiles:\n  - &a\n    url: \(scenario.url("/a.bin"))\n  - *a\n"
        try scenario.write(text: text, to: "mirror.yaml")
        let result = try scenario.run(["lock", "mirror.yaml"])
        #expect(result.status == 2, "\(result)")
        #expect(result.stderr.contains("mirror.yaml:6:5: files[1]: this entry is the alias `*a` of the entry at line 4"), "\(result)")
        #expect(scenario.local("a.bin") == nil)
        #expect(try scenario.nginxRequests().isEmpty)
        #expect(scenario.text(of: "mirror.yaml") == text)
    }

    /// A CRLF manifest, with a comment holding U+2028 (a line break to libyaml, not to an
    /// editor), is pinned in the right lines and stays CRLF; the pinned manifest plans offline.
    @Test func lockKeepsLineEndingsAndPinsTheRightLinesPastALineSeparator() throws {
        let scenario = try Self.setUp()
        let text = scenario.text(of: "mirror.yaml").replacing("files:\n", with: "files:  # pinned by\u{2028}# mirror lock\n")
            .replacing("\n", with: "\r\n")
        try scenario.write(text: text, to: "mirror.yaml")
        let locked = try scenario.run(["lock", "mirror.yaml"])
        #expect(locked.status == 0, "\(locked)")
        let pinned = scenario.text(of: "mirror.yaml")
        #expect(pinned.contains("/a.bin\r\n    dest: a.bin\r\n    sha256: \(DigestHasher.hex(of: Self.a))\r\n    size: 120000\r\n"), "\(pinned.debugDescription)")
        #expect(pinned.contains("/b.bin\r\n    dest: b.bin\r\n    sha256: \(DigestHasher.hex(of: Self.b))\r\n    size: 7000\r\n"), "\(pinned.debugDescription)")
        #expect(pinned.replacing("\r\n", with: "").contains("\n") == false)

        scenario.nginx.stop()
        let plan = try scenario.run(["plan", "--exit-code", "mirror.yaml"])
        #expect(plan.status == 0, "\(plan)")
        #expect(plan.stdout.contains("2 skip"))
    }

    @Test func lockThroughASymlinkPinsTheFileItPointsTo() throws {
        let scenario = try Self.setUp()
        try FileManager.default.createSymbolicLink(
            atPath: scenario.directory.path("link.yaml"), withDestinationPath: scenario.directory.path("mirror.yaml"))
        let result = try scenario.run(["lock", "link.yaml"])
        #expect(result.status == 0, "\(result)")
        let link = try FileManager.default.destinationOfSymbolicLink(atPath: scenario.directory.path("link.yaml"))
        #expect(link == scenario.directory.path("mirror.yaml"), "the link is still a link")
        #expect(scenario.text(of: "mirror.yaml").contains("sha256: \(DigestHasher.hex(of: Self.a))"))
    }

    @Test func lockWritesNothingWhenAnEntryFails() throws {
        let scenario = try Self.setUp(extra: [("/missing.bin", "missing.bin")])
        let before = scenario.text(of: "mirror.yaml")
        let locked = try scenario.run(["lock", "mirror.yaml"])
        #expect(locked.status == 1, "\(locked)")
        #expect(scenario.text(of: "mirror.yaml") == before)
        #expect(scenario.directory.listing("").filter { $0.hasSuffix(".tmp") }.isEmpty, "no temporary file left")
    }

    @Test func verifyFindsMissingModifiedAndMismatchedFiles() throws {
        let scenario = try Self.setUp()
        #expect(try scenario.run(["sync", "-q", "mirror.yaml"]).status == 0)
        let clean = try scenario.run(["verify", "--json", "mirror.yaml"])
        #expect(clean.status == 0, "\(clean)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(clean.stdout.utf8)) as? [String: Any])
        let entries = try #require(object["entries"] as? [[String: Any]])
        #expect(entries.map { $0["status"] as? String } == ["ok", "ok"])
        #expect(entries.allSatisfy { $0["hash_from_store"] as? Bool == true })
        let rehashed = try scenario.run(["verify", "--json", "--rehash", "mirror.yaml"])
        let rehashedEntries = try #require(
            (try JSONSerialization.jsonObject(with: Data(rehashed.stdout.utf8)) as? [String: Any])?["entries"] as? [[String: Any]])
        #expect(rehashedEntries.allSatisfy { $0["hash_from_store"] as? Bool == false && $0["status"] as? String == "ok" })

        // Same size, other bytes: the recorded hash no longer matches.
        try randomData(count: 120_000, seed: 99).write(to: URL(fileURLWithPath: scenario.rootPath("a.bin")))
        unlink(scenario.rootPath("b.bin"))
        scenario.nginx.clearLog()
        let broken = try scenario.run(["verify", "mirror.yaml"])
        #expect(broken.status == 1, "\(broken)")
        #expect(broken.stderr.contains("modified    a.bin"))
        #expect(broken.stderr.contains("missing     b.bin"))
        #expect(try scenario.nginxRequests().isEmpty, "verify is offline")
    }
}

/// A signal stops the whole queue: entries that had not begun never start.
struct InterruptedQueueCLITests {
    @Test func entriesQueuedBehindAnInterruptionNeverStart() throws {
        var files: [String: Data] = [:]
        for index in 0..<40 { files["q\(index).bin"] = randomData(count: 1_500_000, seed: UInt64(500 + index)) }
        // 512 KiB/s per response after the first second's worth: each file takes ~2 s.
        let scenario = try SyncScenario(.nginx(site: files, options: NginxOptions(rateLimit: 512 << 10)))
        try scenario.write(ManifestText(top: ["concurrency: 4"], entries: (0..<40).map { .url(scenario.url("/q\($0).bin"), dest: "q\($0).bin") }))
        let running = try scenario.start(["sync", "m.yaml"])
        let deadline = ContinuousClock.now + .seconds(10)
        while scenario.files().count < 4 && ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.02)
        }
        let signalled = ContinuousClock.now
        kill(running.pid, SIGINT)
        let result = try running.wait()

        #expect(result.status == 130, "\(result)")
        #expect(ContinuousClock.now - signalled < .seconds(5), "stopped promptly")
        #expect(!result.stdout.contains("downloaded"), "no entry ran to completion after the signal")
        #expect(scenario.files().count <= 4, "the queue behind never started: \(scenario.files())")
    }
}
