import Foundation
import Testing
@testable import MirrorCore

/// `mirror report` over the reports of real runs: reports of one run only, and a manifest of the
/// failed entries that a retry can use.
@Suite(.serialized)
struct ReportRunTests {
    /// A manifest of `file://` entries `names`, from `source/` in the scenario's directory.
    static func manifest(_ names: [String], in scenario: SyncScenario) -> String {
        "version: 1\nallow_file: true\nroot: ./root\nfiles:\n"
            + names.map { "  - url: \"file://\(scenario.directory.path("source/" + $0))\"\n" }.joined()
    }

    /// Shard 0 of one manifest and shard 1 of another (one root), or shard 0 and shard 1 of one
    /// manifest changed in between, are not one complete run: `mirror report` refuses to merge
    /// them (exit 2), naming both files, where it used to count `2 reports (2 of 2 shards)` and
    /// exit 0 although one manifest's shard 1 never ran.
    @Test func reportsOfDifferentManifestsOrVersionsOfOneAreAConflict() throws {
        let scenario = try SyncScenario()
        let names = (0..<8).map { "f\($0).txt" }
        for name in names + ["extra.txt"] { try scenario.directory.write(Data(name.utf8), to: "source/" + name) }
        try scenario.write(text: Self.manifest(names, in: scenario), to: "one.yaml")
        try scenario.write(text: Self.manifest(names, in: scenario), to: "two.yaml")

        for (shard, manifest) in [(0, "one.yaml"), (1, "two.yaml")] {
            let run = try scenario.run(["sync", "--quiet", manifest, "--shard", "\(shard)/2", "--report", "r\(shard).json"])
            #expect(run.status == 0, "\(run)")
        }
        let mixed = try scenario.run(["report", "r0.json", "r1.json"])
        #expect(mixed.status == 2, "\(mixed)")
        #expect(mixed.stderr.contains("r0.json and r1.json are reports of different manifests (\(scenario.directory.path("one.yaml")) and \(scenario.directory.path("two.yaml")))"), "\(mixed)")

        // One manifest, edited between its shards' runs.
        let first = try scenario.run(["sync", "--quiet", "one.yaml", "--shard", "0/2", "--report", "r0.json"])
        #expect(first.status == 0, "\(first)")
        // The report names the version it read by the SHA-256 of the manifest's bytes.
        let version = DigestHasher.hex(of: Array(Self.manifest(names, in: scenario).utf8))
        #expect(scenario.text(of: "r0.json").contains("\"manifest_sha256\":\"\(version)\""), "\(scenario.text(of: "r0.json"))")
        try scenario.write(text: Self.manifest(names + ["extra.txt"], in: scenario), to: "one.yaml")
        let second = try scenario.run(["sync", "--quiet", "one.yaml", "--shard", "1/2", "--report", "r1.json"])
        #expect(second.status == 0, "\(second)")
        let changed = try scenario.run(["report", "--json", "r0.json", "r1.json"])
        #expect(changed.status == 2, "\(changed)")
        #expect(changed.stderr.contains("r0.json and r1.json are reports of runs that read different versions of \(scenario.directory.path("one.yaml"))"), "\(changed)")

        // The same manifest through another relative path, and another root.
        let again = try scenario.run(["sync", "--quiet", "./one.yaml", "--shard", "0/2", "--report", "r0.json"])
        #expect(again.status == 0, "\(again)")
        let whole = try scenario.run(["report", "r0.json", "r1.json"])
        #expect(whole.status == 0, "the same manifest, root and version: \(whole)")
        let elsewhere = try scenario.run(["sync", "--quiet", "one.yaml", "--shard", "1/2", "--root", "other", "--report", "r1.json"])
        #expect(elsewhere.status == 0, "\(elsewhere)")
        let roots = try scenario.run(["report", "r0.json", "r1.json"])
        #expect(roots.status == 2, "\(roots)")
        #expect(roots.stderr.contains("r0.json and r1.json are reports of runs into different roots"), "\(roots)")
    }

    /// A report read from a pipe (a FIFO here, `mirror report <(…)` in a shell), which states
    /// no size, is read to its end; it was refused as "cannot be read".
    @Test func aReportIsReadFromAPipe() throws {
        let scenario = try SyncScenario()
        let names = (0..<40).map { "f\($0).txt" }
        for name in names { try scenario.directory.write(Data(name.utf8), to: "source/" + name) }
        try scenario.write(text: Self.manifest(names, in: scenario), to: "m.yaml")
        let run = try scenario.run(["sync", "--quiet", "m.yaml", "--report", "r.json"])
        #expect(run.status == 0, "\(run)")
        let bytes = try #require(FileManager.default.contents(atPath: scenario.directory.path("r.json")))
        let fifo = scenario.directory.path("r.fifo")
        #expect(mkfifo(fifo, 0o600) == 0)
        // The writer waits (bounded) for mirror to open the pipe for reading, writes the report
        // and closes it: mirror then reads to the end.
        let writer = Thread {
            for _ in 0..<3000 {
                let descriptor = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
                if descriptor >= 0 {
                    _ = fcntl(descriptor, F_SETFL, 0)
                    bytes.withUnsafeBytes { buffer in
                        var offset = 0
                        while offset < buffer.count {
                            let written = write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                            if written <= 0 { break }
                            offset += written
                        }
                    }
                    close(descriptor)
                    return
                }
                usleep(10_000)
            }
        }
        writer.start()
        let piped = try scenario.run(["report", "r.fifo"])
        #expect(piped.status == 0, "\(piped)")
        #expect(piped.stdout.contains("1 report: 40 transferred"), "\(piped)")
    }

    /// Shards of one run that reach one manifest by different paths (a symbolic link to it, or
    /// a `..` through a link) record its real path, so `mirror report` merges them; they were
    /// refused as reports of different manifests.
    @Test func oneManifestReachedThroughALinkOrDotDotIsOneManifest() throws {
        let scenario = try SyncScenario()
        let names = (0..<8).map { "f\($0).txt" }
        for name in names { try scenario.directory.write(Data(name.utf8), to: "source/" + name) }
        try scenario.write(text: Self.manifest(names, in: scenario), to: "m.yaml")
        #expect(symlink("m.yaml", scenario.directory.path("link.yaml")) == 0)
        try FileManager.default.createDirectory(atPath: scenario.directory.path("sub"), withIntermediateDirectories: false)
        #expect(symlink("..", scenario.directory.path("sub/up")) == 0)
        let pointer = try #require(realpath(scenario.directory.path("m.yaml"), nil))
        let real = String(cString: pointer)
        free(pointer)
        for (shard, manifest) in [(0, "link.yaml"), (1, "sub/up/m.yaml"), (2, "m.yaml")] {
            // One root for all: a root relative to sub/up/ is recorded as that path (not resolved).
            let run = try scenario.run([
                "sync", "--quiet", manifest, "--root", scenario.directory.path("root"), "--shard", "\(shard)/3", "--report", "r\(shard).json"])
            #expect(run.status == 0, "\(run)")
            #expect(scenario.text(of: "r\(shard).json").contains("\"manifest\":\"\(real)\""), "\(scenario.text(of: "r\(shard).json"))")
        }
        let merged = try scenario.run(["report", "r0.json", "r1.json", "r2.json"])
        #expect(merged.status == 0, "\(merged)")
    }

    /// The failed manifest is one to retry with: each failed entry as its manifest wrote it
    /// (its own url, not the mirror tried last; its checksum file, looked up by the url's name;
    /// userinfo and a header as `${VAR}`s, never their values or `***`), written from the
    /// reports alone, so that deleting the manifest after the run changes nothing. Once the
    /// server is back, `mirror sync FAILED` fetches the file, logged in as the first run was.
    @Test func aRetryOfTheFailedManifestSucceedsOnceTheServerRecovers() throws {
        let scenario = try SyncScenario(.faultServer)
        defer { scenario.server.stop() }
        let payload = randomData(count: 50_000, seed: 170)
        let digest = DigestHasher.hex(of: payload)
        scenario.server.route("/SHA256SUMS", reply: .file(Data("\(digest)  a.bin\n".utf8)))
        scenario.server.route("/data/a.bin", reply: .status(503))
        scenario.server.route("/mirror/a-copy.bin", reply: .status(503))
        let base = scenario.server.baseURL.replacingOccurrences(of: "http://", with: "")
        try scenario.write(text: """
            version: 1
            root: ./root
            defaults:
              retries: 0
              headers:
                X-Token: "${TOKEN}"
                X-Site-Key: "k3y-written-in-the-file"
            files:
              - url: "http://${CREDENTIALS}@\(base)/data/a.bin"
                mirrors: ["http://\(base)/mirror/a-copy.bin"]
                checksums: "http://\(base)/SHA256SUMS"
            """)
        let environment = ["CREDENTIALS": "operator:s3cret", "TOKEN": "t0k3n"]
        let failedRun = try scenario.run(["sync", "--quiet", "m.yaml", "--report", "r.json"], environment: environment)
        #expect(failedRun.status == 1, "\(failedRun)")
        #expect(scenario.server.requests.last?.path == "/mirror/a-copy.bin", "the mirror was tried last")
        try FileManager.default.removeItem(atPath: scenario.directory.path("m.yaml"))

        let merged = try scenario.run(["report", "r.json", "--failed-manifest", "failed.yaml"])
        #expect(merged.status == 1, "\(merged)")
        let failed = scenario.text(of: "failed.yaml")
        #expect(failed.contains("""
              - url: "http://${CREDENTIALS}@\(base)/data/a.bin"
                mirrors:
                  - "http://\(base)/mirror/a-copy.bin"
                dest: "a.bin"
                checksums: "http://\(base)/SHA256SUMS"
                headers:
                  "X-Token": "${TOKEN}"

            """), "\(failed)")
        #expect(failed.contains("# The manifest wrote the value of \"X-Site-Key\" in the file"), "\(failed)")
        #expect(merged.stderr.contains("a.bin: the manifest wrote the value of X-Site-Key in the file"), "\(merged)")
        for secret in ["s3cret", "t0k3n", "operator", "k3y-written-in-the-file"] {
            #expect(!failed.contains(secret) && !scenario.text(of: "r.json").contains(secret), "\(secret) is in neither file")
        }
        #expect(!failed.contains("***"), "\(failed)")

        scenario.server.route("/data/a.bin", reply: .file(payload, etag: "\"a\""))
        scenario.server.clearRequests()
        let retry = try scenario.run(["sync", "--quiet", "failed.yaml"], environment: environment)
        #expect(retry.status == 0, "\(retry)")
        #expect(scenario.local("a.bin") == payload)
        let fetched = scenario.server.requests.filter { $0.path == "/data/a.bin" && $0.method == "GET" }
        #expect(fetched.count == 1, "\(scenario.server.requests)")
        let login = "Basic " + Data("operator:s3cret".utf8).base64EncodedString()
        #expect(fetched.first?.headers.values("Authorization") == [login], "logged in as the first run was")
        #expect(fetched.first?.headers.values("X-Token") == ["t0k3n"])
    }

    /// A run that kept its state in a `state_dir` is retried with the same one: a retry that
    /// made `ROOT/.mirror` instead would leave every later run of the manifest refused (a
    /// `state_dir` beside a `ROOT/.mirror` is exit 2).
    @Test func aFailedManifestKeepsTheRunsStateDirectory() throws {
        let scenario = try SyncScenario(.faultServer)
        defer { scenario.server.stop() }
        let payload = randomData(count: 20_000, seed: 171)
        scenario.server.route("/a.bin", reply: .status(503))
        try scenario.write(text: """
            version: 1
            root: ./root
            state_dir: ./state
            defaults:
              retries: 0
            files:
              - url: "\(scenario.server.url("/a.bin"))"
            """)
        let failedRun = try scenario.run(["sync", "--quiet", "m.yaml", "--report", "r.json"])
        #expect(failedRun.status == 1, "\(failedRun)")
        let merged = try scenario.run(["report", "r.json", "--failed-manifest", "failed.yaml"])
        #expect(merged.status == 1, "\(merged)")
        #expect(scenario.text(of: "failed.yaml").contains("state_dir: \"\(scenario.directory.path("state"))\""),
                "\(scenario.text(of: "failed.yaml"))")

        scenario.server.route("/a.bin", reply: .file(payload, etag: "\"a\""))
        let retry = try scenario.run(["sync", "--quiet", "failed.yaml"])
        #expect(retry.status == 0, "\(retry)")
        #expect(!FileManager.default.fileExists(atPath: scenario.directory.path("root/.mirror")), "the retry made ROOT/.mirror")
        let again = try scenario.run(["sync", "--quiet", "m.yaml"])
        #expect(again.status == 0, "the manifest still runs after the retry: \(again)")
    }
}
