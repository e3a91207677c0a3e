import Foundation
import Testing
@testable import MirrorCore

/// plan and sync end to end against a real nginx on loopback.
@Suite(.serialized)
struct SyncAgainstNginxTests {
    static let complete = randomData(count: 300_000, seed: 1)
    static let half = randomData(count: 1_000_000, seed: 2)
    static let shrunk = randomData(count: 50_000, seed: 3)
    static let missing = randomData(count: 123_457, seed: 4)

    /// The issue's five-way setup: a complete file, a half file, a too-large file, a missing
    /// file (in a directory that does not exist yet) and a 404.
    static func fiveWay() throws -> (SyncFixture, Manifest) {
        let fixture = try SyncFixture(files: [
            "complete.bin": complete, "half.bin": half, "shrunk.bin": shrunk, "missing.bin": missing,
        ])
        try fixture.putLocalCopy(of: "complete.bin", at: "complete.bin")
        try fixture.putLocal(half.prefix(500_000), at: "half.bin")
        try fixture.putLocal(randomData(count: 60_000, seed: 9), at: "shrunk.bin")
        let manifest = try fixture.load(fixture.manifest([
            ("/complete.bin", "complete.bin"), ("/half.bin", "half.bin"), ("/shrunk.bin", "shrunk.bin"),
            ("/missing.bin", "new/dir/missing.bin"), ("/gone.bin", "gone.bin"),
        ]))
        return (fixture, manifest)
    }

    @Test func planShowsFiveActionsAndWritesNothing() async throws {
        let (fixture, manifest) = try Self.fiveWay()
        let before = fixture.rootSnapshot()
        let plan = await fixture.runner(manifest).plan()

        #expect(plan.map(\.action.name) == ["skip", "resume", "restart", "download", "fail"])
        #expect(plan[1].action == .resume(from: 500_000, source: .destination))
        #expect(plan[1].remoteSize == 1_000_000 && plan[1].localSize == 500_000)
        #expect(plan[2].action.reason?.contains("larger than the remote file") == true)
        #expect(plan[4].action == .fail(.httpStatus(404)))
        #expect(fixture.rootSnapshot() == before)
        #expect(!FileManager.default.fileExists(atPath: fixture.rootPath("new")))
        let methods = Set(try fixture.settledRequests().map(\.method))
        #expect(methods == ["HEAD"])
    }

    @Test func syncCarriesOutThePlan() async throws {
        let (fixture, manifest) = try Self.fiveWay()
        let reports = try await fixture.runner(manifest).sync()

        #expect(reports.map(\.dest) == ["complete.bin", "half.bin", "shrunk.bin", "new/dir/missing.bin", "gone.bin"])
        #expect(reports[0].outcome == .skipped)
        #expect(reports[1].outcome == .transferred && reports[1].bytesTransferred == 500_000)
        #expect(reports[2].outcome == .transferred)
        #expect(reports[3].outcome == .transferred)
        #expect(reports[4].outcome == .failed(.httpStatus(404)))
        #expect(fixture.local("complete.bin")?.fingerprint == Self.complete.fingerprint)
        #expect(fixture.local("half.bin")?.fingerprint == Self.half.fingerprint)
        #expect(fixture.local("shrunk.bin")?.fingerprint == Self.shrunk.fingerprint)
        #expect(fixture.local("new/dir/missing.bin")?.fingerprint == Self.missing.fingerprint)
        #expect(fixture.local("gone.bin") == nil)
        #expect(fixture.directory.files("root").filter { $0.hasSuffix(".part") }.isEmpty)

        let requests = try fixture.settledRequests()
        let gets = requests.filter { $0.method == "GET" }
        #expect(!gets.contains { $0.uri == "/complete.bin" }, "a complete file is not downloaded again")
        // No record of where half.bin came from: its last 64 KiB are fetched again and compared.
        #expect(gets.filter { $0.uri == "/half.bin" }.map(\.range) == ["bytes=\(500_000 - 65_536)-"])
        #expect(gets.filter { $0.uri == "/shrunk.bin" }.map(\.range) == [nil])
        #expect(gets.filter { $0.uri == "/missing.bin" }.map(\.range) == [nil])
        // Nothing was on disk for missing.bin: its GET's own headers were the probe.
        #expect(!requests.contains { $0.method == "HEAD" && $0.uri == "/missing.bin" })
    }

    @Test func secondSyncTransfersNothing() async throws {
        let (fixture, manifest) = try Self.fiveWay()
        _ = try await fixture.runner(manifest).sync()
        fixture.nginx.clearLog()
        let again = try await fixture.runner(manifest).sync()

        #expect(again.prefix(4).allSatisfy { $0.outcome == .skipped })
        #expect(again.map(\.bytesTransferred).reduce(0, +) == 0)
        // Only the entry that is still missing (the 404) is asked for again.
        #expect(try fixture.settledRequests().filter { $0.method == "GET" }.map(\.uri) == ["/gone.bin"])
    }

    @Test func partialFileIsResumedAndRenamed() async throws {
        let data = randomData(count: 2_000_000, seed: 5)
        let fixture = try SyncFixture(files: ["p.bin": data])
        try fixture.putLocal(data.prefix(750_000), at: "p.bin.part")
        let manifest = try fixture.load(fixture.manifest([("/p.bin", "p.bin")]))

        let plan = await fixture.runner(manifest).plan()
        #expect(plan[0].action == .resume(from: 750_000, source: .partial))
        let reports = try await fixture.runner(manifest).sync()

        #expect(reports[0].outcome == .transferred && reports[0].bytesTransferred == 1_250_000)
        #expect(fixture.local("p.bin")?.fingerprint == data.fingerprint)
        #expect(fixture.directory.files("root") == ["p.bin"])
        #expect(try fixture.settledRequests().filter { $0.method == "GET" }.map(\.range) == ["bytes=\(750_000 - 65_536)-"])
    }

    @Test func completePartialWithoutARecordIsCheckedByItsTailThenRenamed() async throws {
        let data = randomData(count: 200_000, seed: 6)
        let fixture = try SyncFixture(files: ["c.bin": data])
        try fixture.putLocal(data, at: "c.bin.part")
        let manifest = try fixture.load(fixture.manifest([("/c.bin", "c.bin")]))
        let reports = try await fixture.runner(manifest).sync()

        #expect(reports[0].outcome == .transferred && reports[0].bytesTransferred == 0)
        #expect(fixture.local("c.bin")?.fingerprint == data.fingerprint)
        #expect(fixture.directory.files("root") == ["c.bin"])
        // Only the last 64 KiB were asked for, to compare with the local tail.
        #expect(try fixture.settledRequests().filter { $0.method == "GET" }.map(\.range) == ["bytes=\(200_000 - 65_536)-"])
    }

    @Test func headRefusedFallsBackToARangeProbe() async throws {
        let data = randomData(count: 10_000, seed: 7)
        let fixture = try SyncFixture(files: ["h.bin": data])
        try fixture.putLocal(data.prefix(4_000), at: "h.bin")
        let manifest = try fixture.load(fixture.manifest([("/nohead/h.bin", "h.bin")]))

        let plan = await fixture.runner(manifest).plan()
        #expect(plan[0].action == .resume(from: 4_000, source: .destination))
        #expect(plan[0].remoteSize == 10_000)
        let requests = try fixture.settledRequests()
        #expect(requests.map(\.method) == ["HEAD", "GET"])
        #expect(requests.map(\.status) == [405, 206])
        #expect(requests[1].range == "bytes=0-0")
    }

    @Test func ignoredRangeRestartsFromZeroInsteadOfAppending() async throws {
        let data = randomData(count: 500_000, seed: 8)
        let fixture = try SyncFixture(files: ["r.bin": data])
        // A partial whose bytes are wrong: appending to it would splice two files.
        try fixture.putLocal(randomData(count: 100_000, seed: 99), at: "r.bin.part")
        let manifest = try fixture.load(fixture.manifest([("/norange/r.bin", "r.bin")]))
        let reports = try await fixture.runner(manifest).sync()

        #expect(reports[0].outcome == .transferred)
        #expect(fixture.local("r.bin")?.fingerprint == data.fingerprint)
        let get = try #require(try fixture.settledRequests().first { $0.method == "GET" })
        #expect(get.range == "bytes=\(100_000 - 65_536)-" && get.status == 200)
    }

    @Test func sha256PinIsCheckedBeforeTheRename() async throws {
        let data = randomData(count: 70_000, seed: 10)
        let fixture = try SyncFixture(files: ["good.bin": data, "bad.bin": data])
        let goodHash = SHA256Hasher.hex(of: data)
        let wrongHash = String(repeating: "0", count: 64)
        let text = """
            version: 1
            root: root
            defaults:
              retries: 1
            files:
              - url: \(fixture.nginx.url("/good.bin"))
                sha256: \(goodHash)
              - url: \(fixture.nginx.url("/bad.bin"))
                sha256: \(wrongHash)
            """
        let reports = try await fixture.runner(try fixture.load(text)).sync()

        #expect(reports[0].outcome == .transferred && reports[0].sha256 == goodHash)
        #expect(reports[1].outcome == .failed(.checksumMismatch(expected: wrongHash, actual: goodHash)))
        #expect(reports[1].attempts == 2)
        #expect(fixture.directory.files("root") == ["good.bin"])
    }

    @Test func emptyFileAndModificationTime() async throws {
        let fixture = try SyncFixture(files: ["empty.bin": Data(), "dated.bin": randomData(count: 10, seed: 11)])
        let stamp = Date(timeIntervalSince1970: 1_500_000_000)
        try FileManager.default.setAttributes([.modificationDate: stamp], ofItemAtPath: fixture.directory.path("site/dated.bin"))
        let manifest = try fixture.load(fixture.manifest([("/empty.bin", "empty.bin"), ("/dated.bin", "dated.bin")]))
        let reports = try await fixture.runner(manifest).sync()

        #expect(reports.map(\.outcome) == [.transferred, .transferred])
        #expect(fixture.local("empty.bin") == Data())
        let modified = try FileManager.default.attributesOfItem(atPath: fixture.rootPath("dated.bin"))[.modificationDate] as? Date
        #expect(modified == stamp)
        let second = try await fixture.runner(manifest).sync()
        #expect(second.map(\.outcome) == [.skipped, .skipped])
    }

    @Test func concurrencyBoundsTransfersInFlight() async throws {
        var files: [String: Data] = [:]
        for index in 0..<4 { files["f\(index).bin"] = randomData(count: 300_000, seed: UInt64(20 + index)) }
        // nginx lets the first second's worth through at once, then 128 KiB/s: each file takes
        // over a second, long enough to see transfers overlap.
        let fixture = try SyncFixture(files: files, nginx: NginxOptions(rateLimit: 128 << 10))
        let manifest = try fixture.load(fixture.manifest((0..<4).map { ("/f\($0).bin", "f\($0).bin") }))
        let progress = SyncProgress()
        let runner = fixture.runner(manifest, concurrency: 2, progress: progress)

        let sampler = Task {
            var most = 0
            while !Task.isCancelled {
                most = max(most, progress.snapshot().active.count)
                try? await Task.sleep(for: .milliseconds(5))
            }
            return most
        }
        let reports = try await runner.sync()
        sampler.cancel()
        let most = await sampler.value

        #expect(reports.allSatisfy { $0.outcome == .transferred })
        #expect(most == 2)
        for index in 0..<4 { #expect(fixture.local("f\(index).bin")?.fingerprint == files["f\(index).bin"]?.fingerprint) }
    }

    /// Files past the hasher's thread threshold: the prefix of a resume and a restart after an
    /// ignored range are hashed beside the transfer, and the pin still checks the whole file.
    @Test func largeFilesAreHashedBesideTheTransfer() async throws {
        let data = randomData(count: 20 << 20, seed: 90)
        let fixture = try SyncFixture(files: ["big.bin": data])
        let pin = SHA256Hasher.hex(of: data)
        try fixture.putLocal(data.prefix(12 << 20), at: "resumed.bin.part")
        try fixture.putLocal(randomData(count: 9 << 20, seed: 91), at: "restarted.bin.part")
        let text = """
            version: 1
            root: root
            files:
              - url: \(fixture.nginx.url("/big.bin"))
                dest: resumed.bin
                sha256: \(pin)
              - url: \(fixture.nginx.url("/norange/big.bin"))
                dest: restarted.bin
                sha256: \(pin)
            """
        let reports = try await fixture.runner(try fixture.load(text)).sync()

        #expect(reports.map(\.outcome) == [.transferred, .transferred])
        #expect(reports[0].bytesTransferred == Int64(8 << 20))
        #expect(reports.map(\.sha256) == [pin, pin])
        #expect(fixture.local("resumed.bin")?.fingerprint == data.fingerprint)
        #expect(fixture.local("restarted.bin")?.fingerprint == data.fingerprint)
    }

    /// A redirect to the same scheme, host and port keeps the URL's credentials, as `curl -L`
    /// does: nginx behind basic auth answering `return 302 /private/x` is followed to a 200.
    @Test func aSameOriginRedirectKeepsTheURLCredentials() async throws {
        let data = randomData(count: 40_000, seed: 92)
        let auth = try TemporaryDirectory(prefix: "mirror-auth")
        try auth.write(Data("robot:{PLAIN}hunter2\n".utf8), to: "htpasswd")
        let fixture = try SyncFixture(files: ["private/x": data], nginx: NginxOptions(extraServerConfiguration: """
            location /private/ {
                auth_basic "mirror";
                auth_basic_user_file "\(auth.path("htpasswd"))";
                location = /private/old { return 302 /private/x; }
            }
            """))
        let url = fixture.nginx.url("/private/old").replacingOccurrences(of: "http://", with: "http://robot:hunter2@")
        let reports = try await fixture.runner(try fixture.load("version: 1\nroot: root\nfiles:\n  - url: \(url)\n    dest: x\n")).sync()

        #expect(reports[0].outcome == .transferred, "\(reports[0].outcome)")
        #expect(fixture.local("x")?.fingerprint == data.fingerprint)
        let followed = try fixture.settledRequests().filter { $0.uri == "/private/x" }
        #expect(!followed.isEmpty && followed.allSatisfy { $0.status == 200 && $0.authorization?.hasPrefix("Basic ") == true })
    }
}
