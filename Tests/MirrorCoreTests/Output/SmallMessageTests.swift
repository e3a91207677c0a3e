import Foundation
import Testing
@testable import MirrorCore
@testable import mirror

/// Messages that must say what is true, and manifest values that must not fail later than
/// the manifest check.
@Suite(.serialized)
struct SmallMessageTests {
    static func diagnostics(_ text: String, environment: [String: String] = [:]) -> [ManifestDiagnostic] {
        do {
            _ = try ManifestLoader.parse(text: text, path: "m.yaml", baseDirectory: "/srv/m", environment: environment)
            return []
        } catch {
            return error.diagnostics
        }
    }

    @Test func aSchemeRelativeURLGetsAHintWithTwoSlashes() {
        let found = Self.diagnostics("version: 1\nfiles:\n  - url: //example.org/a.bin\n")
        #expect(found.count == 1)
        #expect(found.first?.message.contains("like `https://example.org/a.bin`") == true, "\(found)")
        #expect(found.first?.message.contains("https:////") == false)
    }

    @Test(arguments: [
        ("  - url: https://example.org/$TOKEN/a.bin\n", "m.yaml:3:10", "files[0].url"),
        ("  - url: https://example.org/a.bin\n    headers:\n      Authorization: Bearer $TOKEN\n", "m.yaml:5:22", "files[0].headers.Authorization"),
    ])
    func aDollarVariableWithoutBracesIsAManifestError(_ entry: String, _ location: String, _ key: String) throws {
        let found = Self.diagnostics("version: 1\nfiles:\n" + entry, environment: ["TOKEN": "secret"])
        #expect(found.count == 1, "\(found)")
        let diagnostic = try #require(found.first)
        #expect(diagnostic.location?.description == location)
        #expect(diagnostic.key == key)
        #expect(diagnostic.message.contains("write `${TOKEN}`") && diagnostic.message.contains("`$$TOKEN`"), "\(diagnostic)")
        #expect(!diagnostic.description.contains("secret"))
    }

    @Test func aDoubledDollarStaysALiteralDollar() throws {
        let manifest = try ManifestLoader.parse(
            text: "version: 1\nfiles:\n  - url: https://example.org/$$TOKEN/a.bin\n    dest: a.bin\n",
            path: "m.yaml", baseDirectory: "/srv/m", environment: ["TOKEN": "secret"])
        #expect(manifest.entries.first?.url.string == "https://example.org/$TOKEN/a.bin")
    }

    @Test(arguments: [
        ("~/assets", "/home/ops/assets"),
        ("\"~\"", "/home/ops"),
        ("${HOME}/assets", "/home/ops/assets"),
        ("${DATA}/x", "/data/x"),
        ("./~/x", "/srv/m/~/x"),
    ])
    func aRootWithTildeOrVariableIsExpanded(_ root: String, _ expected: String) throws {
        let manifest = try ManifestLoader.parse(
            text: "version: 1\nroot: \(root)\nfiles:\n  - url: https://example.org/a.bin\n",
            path: "m.yaml", baseDirectory: "/srv/m", environment: ["HOME": "/home/ops", "DATA": "/data"])
        #expect(manifest.root == expected)
    }

    @Test(arguments: [
        ("~bob/assets", ["HOME": "/home/ops"], "another user's home directory"),
        ("~/assets", [String: String](), "HOME is not set"),
        ("${NOPE}/assets", ["HOME": "/home/ops"], "`NOPE` is not set"),
        ("$HOME/assets", ["HOME": "/home/ops"], "write `${HOME}`"),
    ])
    func anUnusableRootExpansionIsRefusedWithAHint(_ root: String, _ environment: [String: String], _ phrase: String) {
        let found = Self.diagnostics("version: 1\nroot: \(root)\nfiles:\n  - url: https://example.org/a.bin\n", environment: environment)
        #expect(found.count == 1, "\(found)")
        #expect(found.first?.location?.description == "m.yaml:2:7")
        #expect(found.first?.key == "root")
        #expect(found.first?.message.contains(phrase) == true, "\(found)")
    }

    @Test func aResumedFileCountsOnlyWhatCompletedIt() {
        // 300 bytes came in an attempt that failed, then the resume from byte 600 fetched 400.
        let report = EntryReport(dest: "a.bin", url: "https://example.org/a.bin", action: .resume(from: 600, source: .partial),
                                 outcome: .transferred, bytesTransferred: 700, size: 1000, attempts: 2, sha256: nil)
        #expect(SyncText.finishedLine(report) == "resumed      a.bin (1000 B, 400 B fetched from byte 600)")
    }

    @Test func aRunLockStillHeldAfterTheWaitDoesNotSuggestWaiting() async throws {
        let directory = try TemporaryDirectory(prefix: "mirror-lockwait")
        let holder = try await RunLock.acquire(root: directory.path)
        do {
            _ = try await RunLock.acquire(root: directory.path)
            Issue.record("the lock was taken twice")
        } catch {
            #expect(error.description.contains("use --wait-lock"), "\(error)")
        }
        do {
            _ = try await RunLock.acquire(root: directory.path, wait: .milliseconds(200))
            Issue.record("the lock was taken twice")
        } catch {
            #expect(error.description.contains("after waiting 200ms"), "\(error)")
            #expect(!error.description.contains("--wait-lock"), "\(error)")
        }
        withExtendedLifetime(holder) {}
    }

    @Test func aManifestErrorWithJSONPrintsTheErrorObject() throws {
        let directory = try TemporaryDirectory(prefix: "mirror-json-error")
        try directory.write(Data("version: 1\nroot: root\nfiles:\n  - url: http://127.0.0.1/a\n    sah256: abc\n".utf8), to: "bad.yaml")
        for command in ["plan", "sync", "verify", "lock"] {
            let result = try MirrorBinary.run([command, "--json", "bad.yaml"], in: directory.path)
            #expect(result.status == 2, "\(result)")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result)")
            let error = try #require(object["error"] as? [String: Any])
            #expect(error["kind"] as? String == "manifest")
            let diagnostics = try #require(error["diagnostics"] as? [[String: Any]])
            #expect(diagnostics.first?["line"] as? Int == 5 && diagnostics.first?["column"] as? Int == 5)
            #expect(diagnostics.first?["key"] as? String == "files[0].sah256")
            #expect(result.stderr.contains("bad.yaml:5:5"), "the human text still goes to stderr")
        }
    }

    @Test func aNotModifiedReplyIsNotCalledARedirect() throws {
        let scenario = try SyncScenario(.faultServer)
        scenario.server.route("/a.bin", reply: .status(304))
        try scenario.write(.files(.url(scenario.url("/a.bin"))))
        let result = try scenario.run(["plan", "m.yaml"])
        #expect(result.status == 1, "\(result)")
        #expect(result.stdout.contains("HTTP 304 Not Modified"), "\(result)")
    }

    @Test(arguments: [
        (Int64?.none, 0, "interrupted before it started"),
        (Int64?.none, 1, "interrupted; no partial file was kept"),
        (Int64?.some(0), 1, "interrupted; no partial file was kept"),
        (Int64?.some(2048), 1, "interrupted; the partial file (2.00 KiB) is kept for the next run"),
    ])
    func anInterruptedEntrySaysWhatItKeeps(_ partial: Int64?, _ attempts: Int, _ expected: String) {
        var report = EntryReport(dest: "a.bin", url: "u", action: .download, outcome: .failed(.cancelled),
                                 bytesTransferred: 0, size: nil, attempts: attempts, sha256: nil)
        report.partialSize = partial
        #expect(SyncText.interruptedDetail(report) == expected)
    }

    /// SIGINT while the server has not sent a byte yet: no partial file exists, and none is
    /// claimed.
    @Test func anInterruptionBeforeAnyByteClaimsNoPartialFile() throws {
        let scenario = try SyncScenario(.faultServer)
        let server = scenario.server
        server.route("/a.bin", reply: FaultReply.file(Data("hello".utf8)).delayed(by: .seconds(20)))
        try scenario.write(.files(.url(server.url("/a.bin"))))
        let running = try scenario.start(["sync", "m.yaml"])
        _ = server.waitForRequests(1, timeout: .seconds(10))
        kill(running.pid, SIGINT)
        let result = try running.wait()
        #expect(result.status == 130, "\(result)")
        #expect(!FileManager.default.fileExists(atPath: scenario.rootPath("a.bin.part")))
        #expect(!result.stderr.contains("is kept") && !result.stderr.contains("are kept"), "\(result)")
        #expect(result.stderr.contains("a.bin: interrupted; no partial file was kept"), "\(result)")
    }
}
