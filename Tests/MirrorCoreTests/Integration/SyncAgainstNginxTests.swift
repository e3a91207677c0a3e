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
    static func fiveWay() throws -> (SyncScenario, Manifest) {
        let scenario = try SyncScenario(
            .nginx(site: ["complete.bin": complete, "half.bin": half, "shrunk.bin": shrunk, "missing.bin": missing]),
            before: ["half.bin": half.prefix(500_000), "shrunk.bin": randomData(count: 60_000, seed: 9)])
        try scenario.putCopy(ofServed: "complete.bin", at: "complete.bin")
        let manifest = try scenario.load(.files(
            .url(scenario.url("/complete.bin"), dest: "complete.bin"), .url(scenario.url("/half.bin"), dest: "half.bin"),
            .url(scenario.url("/shrunk.bin"), dest: "shrunk.bin"), .url(scenario.url("/missing.bin"), dest: "new/dir/missing.bin"),
            .url(scenario.url("/gone.bin"), dest: "gone.bin")))
        return (scenario, manifest)
    }

    @Test func planShowsFiveActionsAndWritesNothing() async throws {
        let (scenario, manifest) = try Self.fiveWay()
        let before = scenario.snapshot()
        let plan = await scenario.runner(manifest).plan()

        #expect(plan.map(\.action.name) == ["skip", "resume", "restart", "download", "fail"])
        #expect(plan[1].action == .resume(from: 500_000, source: .destination))
        #expect(plan[1].remoteSize == 1_000_000 && plan[1].localSize == 500_000)
        #expect(plan[2].action.reason?.contains("larger than the remote file") == true)
        #expect(plan[4].action == .fail(.httpStatus(404)))
        #expect(scenario.snapshot() == before)
        #expect(!FileManager.default.fileExists(atPath: scenario.rootPath("new")))
        let methods = Set(try scenario.nginxRequests().map(\.method))
        #expect(methods == ["HEAD"])
    }

    @Test func syncCarriesOutThePlan() async throws {
        let (scenario, manifest) = try Self.fiveWay()
        let reports = try await scenario.sync(manifest)

        #expect(reports.map(\.dest) == ["complete.bin", "half.bin", "shrunk.bin", "new/dir/missing.bin", "gone.bin"])
        #expect(reports[0].outcome == .skipped)
        #expect(reports[1].outcome == .transferred && reports[1].bytesTransferred == 500_000)
        #expect(reports[2].outcome == .transferred)
        #expect(reports[3].outcome == .transferred)
        #expect(reports[4].outcome == .failed(.httpStatus(404)))
        #expect(scenario.local("complete.bin")?.fingerprint == Self.complete.fingerprint)
        #expect(scenario.local("half.bin")?.fingerprint == Self.half.fingerprint)
        #expect(scenario.local("shrunk.bin")?.fingerprint == Self.shrunk.fingerprint)
        #expect(scenario.local("new/dir/missing.bin")?.fingerprint == Self.missing.fingerprint)
        #expect(scenario.local("gone.bin") == nil)
        #expect(scenario.files().filter { $0.hasSuffix(".part") }.isEmpty)

        let requests = try scenario.nginxRequests()
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
        let (scenario, manifest) = try Self.fiveWay()
        _ = try await scenario.sync(manifest)
        scenario.nginx.clearLog()
        let again = try await scenario.sync(manifest)

        #expect(again.prefix(4).allSatisfy { $0.outcome == .skipped })
        #expect(again.map(\.bytesTransferred).reduce(0, +) == 0)
        // One conditional GET per file the store vouches for, each answered 304, and no HEAD;
        // the entry that is still missing (the 404) is asked for again.
        let requests = try scenario.nginxRequests().sorted { $0.uri < $1.uri }
        #expect(requests.map { "\($0.method) \($0.uri) \($0.status)" } == [
            "GET /complete.bin 304", "GET /gone.bin 404", "GET /half.bin 304", "GET /missing.bin 304", "GET /shrunk.bin 304",
        ])
        #expect(requests.filter { $0.status == 304 }.allSatisfy { $0.ifNoneMatch != nil && $0.ifModifiedSince == nil })
    }

    @Test func partialFileIsResumedAndRenamed() async throws {
        let data = randomData(count: 2_000_000, seed: 5)
        let scenario = try SyncScenario(.nginx(site: ["p.bin": data]), before: ["p.bin.part": data.prefix(750_000)])
        let manifest = try scenario.load(.files(.url(scenario.url("/p.bin"), dest: "p.bin")))

        let plan = await scenario.runner(manifest).plan()
        #expect(plan[0].action == .resume(from: 750_000, source: .partial))
        let reports = try await scenario.sync(manifest)

        #expect(reports[0].outcome == .transferred && reports[0].bytesTransferred == 1_250_000)
        #expect(scenario.local("p.bin")?.fingerprint == data.fingerprint)
        #expect(scenario.files() == ["p.bin"])
        #expect(try scenario.nginxRequests().filter { $0.method == "GET" }.map(\.range) == ["bytes=\(750_000 - 65_536)-"])
    }

    @Test func completePartialWithoutARecordIsCheckedByItsTailThenRenamed() async throws {
        let data = randomData(count: 200_000, seed: 6)
        let scenario = try SyncScenario(.nginx(site: ["c.bin": data]), before: ["c.bin.part": data])
        let manifest = try scenario.load(.files(.url(scenario.url("/c.bin"), dest: "c.bin")))
        let reports = try await scenario.sync(manifest)

        #expect(reports[0].outcome == .transferred && reports[0].bytesTransferred == 0)
        #expect(scenario.local("c.bin")?.fingerprint == data.fingerprint)
        #expect(scenario.files() == ["c.bin"])
        // Only the last 64 KiB were asked for, to compare with the local tail.
        #expect(try scenario.nginxRequests().filter { $0.method == "GET" }.map(\.range) == ["bytes=\(200_000 - 65_536)-"])
    }

    @Test func headRefusedFallsBackToARangeProbe() async throws {
        let data = randomData(count: 10_000, seed: 7)
        let scenario = try SyncScenario(.nginx(site: ["h.bin": data]), before: ["h.bin": data.prefix(4_000)])
        let manifest = try scenario.load(.files(.url(scenario.url("/nohead/h.bin"), dest: "h.bin")))

        let plan = await scenario.runner(manifest).plan()
        #expect(plan[0].action == .resume(from: 4_000, source: .destination))
        #expect(plan[0].remoteSize == 10_000)
        let requests = try scenario.nginxRequests()
        #expect(requests.map(\.method) == ["HEAD", "GET"])
        #expect(requests.map(\.status) == [405, 206])
        #expect(requests[1].range == "bytes=0-0")
    }

    @Test func ignoredRangeRestartsFromZeroInsteadOfAppending() async throws {
        let data = randomData(count: 500_000, seed: 8)
        // A partial whose bytes are wrong: appending to it would splice two files.
        let scenario = try SyncScenario(.nginx(site: ["r.bin": data]), before: ["r.bin.part": randomData(count: 100_000, seed: 99)])
        let manifest = try scenario.load(.files(.url(scenario.url("/norange/r.bin"), dest: "r.bin")))
        let reports = try await scenario.sync(manifest)

        #expect(reports[0].outcome == .transferred)
        #expect(scenario.local("r.bin")?.fingerprint == data.fingerprint)
        let get = try #require(try scenario.nginxRequests().first { $0.method == "GET" })
        #expect(get.range == "bytes=\(100_000 - 65_536)-" && get.status == 200)
    }

    @Test func sha256PinIsCheckedBeforeTheRename() async throws {
        let data = randomData(count: 70_000, seed: 10)
        let scenario = try SyncScenario(.nginx(site: ["good.bin": data, "bad.bin": data]))
        let goodHash = DigestHasher.hex(of: data)
        let wrongHash = String(repeating: "0", count: 64)
        let reports = try await scenario.sync(ManifestText(top: ["defaults:", "  retries: 1"], entries: [
            .url(scenario.url("/good.bin"), "sha256: \(goodHash)"),
            .url(scenario.url("/bad.bin"), "sha256: \(wrongHash)"),
        ]))

        #expect(reports[0].outcome == .transferred && reports[0].sha256 == goodHash)
        #expect(reports[1].outcome.isUnchangedPinMismatch(expected: wrongHash, actual: goodHash), "\(reports[1].outcome)")
        #expect(reports[1].attempts == 1)
        #expect(scenario.files() == ["good.bin"])
    }

    @Test func emptyFileAndModificationTime() async throws {
        let scenario = try SyncScenario(.nginx(site: ["empty.bin": Data(), "dated.bin": randomData(count: 10, seed: 11)]))
        let stamp = Date(timeIntervalSince1970: 1_500_000_000)
        try FileManager.default.setAttributes([.modificationDate: stamp], ofItemAtPath: scenario.directory.path("site/dated.bin"))
        let manifest = try scenario.load(.files(
            .url(scenario.url("/empty.bin"), dest: "empty.bin"), .url(scenario.url("/dated.bin"), dest: "dated.bin")))
        let reports = try await scenario.sync(manifest)

        #expect(reports.map(\.outcome) == [.transferred, .transferred])
        #expect(scenario.local("empty.bin") == Data())
        let modified = try FileManager.default.attributesOfItem(atPath: scenario.rootPath("dated.bin"))[.modificationDate] as? Date
        #expect(modified == stamp)
        let second = try await scenario.sync(manifest)
        #expect(second.map(\.outcome) == [.skipped, .skipped])
    }

    @Test func concurrencyBoundsTransfersInFlight() async throws {
        var files: [String: Data] = [:]
        for index in 0..<4 { files["f\(index).bin"] = randomData(count: 300_000, seed: UInt64(20 + index)) }
        // nginx lets the first second's worth through at once, then 128 KiB/s: each file takes
        // over a second, long enough to see transfers overlap.
        let scenario = try SyncScenario(.nginx(site: files, options: NginxOptions(rateLimit: 128 << 10)))
        let manifest = try scenario.load(ManifestText(entries: (0..<4).map { .url(scenario.url("/f\($0).bin"), dest: "f\($0).bin") }))
        let progress = SyncProgress()
        let runner = scenario.runner(manifest, .init(concurrency: 2, progress: progress))

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
        for index in 0..<4 { #expect(scenario.local("f\(index).bin")?.fingerprint == files["f\(index).bin"]?.fingerprint) }
    }

    /// Files past the hasher's thread threshold: the prefix of a resume and a restart after an
    /// ignored range are hashed beside the transfer, and the pin still checks the whole file.
    @Test func largeFilesAreHashedBesideTheTransfer() async throws {
        let data = randomData(count: 20 << 20, seed: 90)
        let scenario = try SyncScenario(.nginx(site: ["big.bin": data]), before: [
            "resumed.bin.part": data.prefix(12 << 20), "restarted.bin.part": randomData(count: 9 << 20, seed: 91),
        ])
        let pin = DigestHasher.hex(of: data)
        let reports = try await scenario.sync(.files(
            .url(scenario.url("/big.bin"), dest: "resumed.bin", "sha256: \(pin)"),
            .url(scenario.url("/norange/big.bin"), dest: "restarted.bin", "sha256: \(pin)")))

        #expect(reports.map(\.outcome) == [.transferred, .transferred])
        #expect(reports[0].bytesTransferred == Int64(8 << 20))
        #expect(reports.map(\.sha256) == [pin, pin])
        #expect(scenario.local("resumed.bin")?.fingerprint == data.fingerprint)
        #expect(scenario.local("restarted.bin")?.fingerprint == data.fingerprint)
    }

    /// A redirect to the same scheme, host and port keeps the URL's credentials, as `curl -L`
    /// does: nginx behind basic auth answering `return 302 /private/x` is followed to a 200.
    @Test func aSameOriginRedirectKeepsTheURLCredentials() async throws {
        let data = randomData(count: 40_000, seed: 92)
        let auth = try TemporaryDirectory(prefix: "mirror-auth")
        try auth.write(Data("robot:{PLAIN}hunter2\n".utf8), to: "htpasswd")
        let scenario = try SyncScenario(.nginx(site: ["private/x": data], options: NginxOptions(extraServerConfiguration: """
            location /private/ {
                auth_basic "mirror";
                auth_basic_user_file "\(auth.path("htpasswd"))";
                location = /private/old { return 302 /private/x; }
            }
            """)))
        let url = scenario.url("/private/old").replacingOccurrences(of: "http://", with: "http://robot:hunter2@")
        let reports = try await scenario.sync(.files(.url(url, dest: "x")))

        #expect(reports[0].outcome == .transferred, "\(reports[0].outcome)")
        #expect(scenario.local("x")?.fingerprint == data.fingerprint)
        let followed = try scenario.nginxRequests().filter { $0.uri == "/private/x" }
        #expect(!followed.isEmpty && followed.allSatisfy { $0.status == 200 && $0.authorization?.hasPrefix("Basic ") == true })
    }
}
