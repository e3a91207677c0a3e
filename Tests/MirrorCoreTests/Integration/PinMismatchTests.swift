import Foundation
import Testing
@testable import MirrorCore

/// A download that fails its pin is fetched again only when the server's version moved during
/// the attempt: a pinned file that upstream re-published is fetched once and the entry fails,
/// instead of once per retry (`TransferFailure.pinMismatch`).
@Suite(.serialized)
struct PinMismatchTests {
    static let v1 = randomData(count: 1 << 20, seed: 71)
    static let v2 = randomData(count: 1 << 20, seed: 72)

    /// nginx names a version by its file's mtime and size: two dates, two ETags.
    static func publish(_ data: Data, at path: String, in scenario: SyncScenario, modified: TimeInterval) throws {
        let file = try scenario.directory.write(data, to: "site/" + path)
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: modified)], ofItemAtPath: file)
    }

    /// A manifest pinned (by `mirror lock`) when upstream had v1 provisions a new machine after
    /// upstream re-published the name as v2: each cron run fetched the whole file once per
    /// attempt (6 MiB served for a 1 MiB file with the default 5 retries). Also for a file of
    /// 32 KiB, whose body is held in memory, never written: dropped, not left as a `.part`.
    @Test(arguments: [1 << 20, 32 << 10])
    func aRepublishedPinnedFileIsFetchedOnceNotOncePerRetry(size: Int) async throws {
        let scenario = try SyncScenario(.nginx(site: [:]))
        let (v1, v2) = size == Self.v1.count ? (Self.v1, Self.v2) : (randomData(count: size, seed: 81), randomData(count: size, seed: 82))
        let pin = DigestHasher.hex(of: v1)
        try Self.publish(v2, at: "image.bin", in: scenario, modified: 1_700_086_400)
        let manifest = ManifestText(entries: [.url(scenario.url("/image.bin"), "retries: 5", "sha256: \(pin)")])

        for run in 1...2 {
            scenario.nginx.clearLog()
            let reports = try await scenario.sync(manifest)

            let gets = try scenario.nginxRequests().filter { $0.method == "GET" && $0.uri == "/image.bin" }
            #expect(gets.count == 1, "run \(run): one download, not one per retry: \(gets)")
            #expect(gets.map(\.bodyBytesSent).reduce(0, +) == v2.count, "run \(run)")
            #expect(reports[0].attempts == 1, "run \(run)")
            guard case .failed(let failure) = reports[0].outcome else {
                Issue.record("run \(run): expected a failure, got \(reports[0].outcome)")
                return
            }
            #expect(!failure.isRetryable)
            let message = failure.description
            let got = DigestHasher.hex(of: v2)
            #expect(message.contains("expected \(pin)") && message.contains(got), "\(message)")
            #expect(message.contains("ETag \"") && message.contains("Last-Modified ") && message.contains("\(v2.count) bytes"), "\(message)")
            #expect(scenario.files().isEmpty, "run \(run): nothing under DEST, no partial file")
        }
    }

    /// A file already on disk (of another version) makes the entry probe: a re-published file
    /// is fetched once there too.
    @Test func aRepublishedPinnedFileReplacingAnOlderOneIsFetchedOnce() async throws {
        let scenario = try SyncScenario(.nginx(site: [:]), before: ["image.bin": Self.v1])
        try Self.publish(Self.v2, at: "image.bin", in: scenario, modified: 1_700_086_400)
        let pin = DigestHasher.hex(of: randomData(count: 1 << 20, seed: 79))
        let reports = try await scenario.sync(ManifestText(entries: [.url(scenario.url("/image.bin"), "retries: 5", "sha256: \(pin)")]))

        let requests = try scenario.nginxRequests().filter { $0.uri == "/image.bin" }
        #expect(requests.map(\.method) == ["HEAD", "GET"], "\(requests)")
        #expect(reports[0].attempts == 1)
        #expect(reports[0].outcome.isUnchangedPinMismatch(expected: pin, actual: DigestHasher.hex(of: Self.v2)), "\(reports[0].outcome)")
        #expect(scenario.local("image.bin") == Self.v1, "DEST untouched")
        #expect(scenario.files() == ["image.bin"], "the download that failed its pin was discarded")
    }

    @Test func aPinMismatchIsRetriedWhenTheFileMovedDuringTheAttempt() async throws {
        let old = randomData(count: 100_000, seed: 73)
        let torn = randomData(count: 100_000, seed: 74)
        let good = randomData(count: 100_000, seed: 75)
        // A file on disk makes each attempt probe first: the probe names the version the
        // attempt starts from, and the GET's reply the one whose bytes came.
        let scenario = try SyncScenario(.faultServer, before: ["m.bin": old])
        let server = scenario.server
        server.route("/m.bin", method: "HEAD", replies: [.file(old, etag: "\"v1\""), .file(good, etag: "\"v2\"")])
        server.route("/m.bin", method: "GET", replies: [.file(torn, etag: "\"v2\""), .file(good, etag: "\"v2\"")])
        // Pinned by a checksum file: the retry does not fetch it again.
        server.route("/SHA256SUMS", reply: .file(Data("\(DigestHasher.hex(of: good))  m.bin\n".utf8)))
        let reports = try await scenario.sync(.files(.url(server.url("/m.bin"), "retries: 5", "checksums: \(server.url("/SHA256SUMS"))")))

        #expect(reports[0].outcome == .transferred, "\(reports[0].outcome)")
        #expect(reports[0].attempts == 2)
        #expect(server.requests(for: "/m.bin").map(\.method) == ["HEAD", "GET", "HEAD", "GET"])
        #expect(server.requests(for: "/SHA256SUMS").count == 1)
        #expect(scenario.local("m.bin") == good)
    }

    /// The same version twice after a move: the second reply names what the first did, and
    /// the entry fails then, with the server's validators.
    @Test func aPinMismatchAfterTheMoveSettlesFailsWithoutAThirdDownload() async throws {
        let old = randomData(count: 100_000, seed: 76)
        let other = randomData(count: 100_000, seed: 77)
        let scenario = try SyncScenario(.faultServer, before: ["s.bin": old])
        let server = scenario.server
        server.route("/s.bin", method: "HEAD", replies: [.file(old, etag: "\"v1\""), .file(other, etag: "\"v2\"")])
        server.route("/s.bin", method: "GET", reply: .file(other, etag: "\"v2\""))
        let pin = DigestHasher.hex(of: randomData(count: 100_000, seed: 78))
        let reports = try await scenario.sync(.files(.url(server.url("/s.bin"), "retries: 5", "sha256: \(pin)")))

        #expect(reports[0].attempts == 2)
        #expect(server.requests(for: "/s.bin").filter { $0.method == "GET" }.count == 2)
        guard case .failed(let failure) = reports[0].outcome else {
            Issue.record("expected a failure, got \(reports[0].outcome)")
            return
        }
        #expect(!failure.isRetryable)
        #expect(failure.description.contains("ETag \"v2\"") && failure.description.contains("100000 bytes"), "\(failure)")
        #expect(scenario.local("s.bin") == old)
    }
}

extension EntryReport.Outcome {
    /// A failure for a download whose digest is not the pin `expected` (it is `actual`) from a
    /// server whose version did not move: not retried.
    func isUnchangedPinMismatch(expected: String, actual: String) -> Bool {
        guard case .failed(.checksumMismatchUnchanged(let pinned, let got, _)) = self else { return false }
        return pinned == expected && got == actual
    }
}
