import Foundation
import Testing
@testable import MirrorCore

/// `sha512` pins and checksum files (`checksums:`, `checksum_name:`) against a real nginx.
@Suite(.serialized)
struct ChecksumFileTests {
    static let a = randomData(count: 70_000, seed: 61)
    static let b = randomData(count: 5_000, seed: 62)
    static let c = randomData(count: 300_000, seed: 63)

    static func sha256(_ data: Data) -> String { DigestHasher.hex(of: data) }
    static func sha512(_ data: Data) -> String { DigestHasher.hex(of: data, .sha512) }

    /// Larger than `TrailingHasher.threadThreshold`: hashed as written on the hasher's thread.
    static let large = randomData(count: 3_000_000, seed: 64)

    @Test func sha512PinIsCheckedBeforeTheRename() async throws {
        let scenario = try SyncScenario(.nginx(site: ["good.bin": Self.a, "bad.bin": Self.a, "large.bin": Self.large]))
        let wrong = Self.sha512(Self.b)
        let reports = try await scenario.sync(ManifestText(top: ["defaults:", "  retries: 1"], entries: [
            .url(scenario.url("/good.bin"), "sha512: \(Self.sha512(Self.a).uppercased())"),
            .url(scenario.url("/bad.bin"), "sha512: \(wrong)"),
            .url(scenario.url("/large.bin"), "sha512: \(Self.sha512(Self.large))"),
        ]))
        #expect(reports[2].outcome == .transferred && reports[2].sha256 == Self.sha512(Self.large))

        #expect(reports[0].outcome == .transferred && reports[0].sha256 == Self.sha512(Self.a))
        // nginx's version did not move while it came: not fetched again.
        #expect(reports[1].outcome.isUnchangedPinMismatch(expected: wrong, actual: Self.sha512(Self.a)), "\(reports[1].outcome)")
        #expect(reports[1].attempts == 1)
        let failure = TransferFailure.checksumMismatch(expected: wrong, actual: Self.sha512(Self.a))
        #expect(failure.description == "sha512 mismatch: expected \(wrong), download has \(Self.sha512(Self.a))")
        #expect(scenario.files() == ["good.bin", "large.bin"], "the bad download is not under its name, nor its partial file")
        // The store keeps the SHA-512 the entry is pinned by: the next run needs no request.
        #expect(try scenario.record("good.bin")?.complete?.sha256 == Self.sha512(Self.a))
        scenario.nginx.clearLog()
        let again = try await scenario.sync(ManifestText(entries: [.url(scenario.url("/good.bin"), "sha512: \(Self.sha512(Self.a))")]))
        #expect(again[0].outcome == .skipped)
        #expect(try scenario.nginxRequests().isEmpty)
    }

    @Test func aResumedDownloadIsHashedInSHA512FromItsFirstByte() async throws {
        let scenario = try SyncScenario(.nginx(site: ["r.bin": Self.large]), before: ["r.bin.part": Self.large.prefix(1_200_000)])
        let reports = try await scenario.sync(ManifestText(entries: [.url(scenario.url("/r.bin"), "sha512: \(Self.sha512(Self.large))")]))

        #expect(reports[0].outcome == .transferred && reports[0].sha256 == Self.sha512(Self.large))
        let get = try #require(try scenario.nginxRequests().first { $0.method == "GET" })
        #expect(get.range == "bytes=\(1_200_000 - 65_536)-", "the partial file was resumed, its prefix read back for the hash")
    }

    @Test func gnuChecksumFilePinsEveryEntryAndIsFetchedOnce() async throws {
        let sums = "# release 1\r\n\(Self.sha256(Self.a))  a.bin\r\n\(Self.sha256(Self.b)) *b.bin\r\n\(Self.sha256(Self.c))  c%20d.bin\r\n"
        let scenario = try SyncScenario(.nginx(site: [
            "SHA256SUMS": Data(sums.utf8), "a.bin": Self.a, "b.bin": Self.b, "c%20d.bin": Self.c, "unlisted.bin": Self.b,
        ]))
        let reports = try await scenario.sync(ManifestText(
            top: ["concurrency: 4", "defaults:", "  retries: 0", "  checksums: \(scenario.url("/SHA256SUMS"))"],
            entries: [
                .url(scenario.url("/a.bin")), .url(scenario.url("/b.bin")), .url(scenario.url("/b.bin"), dest: "copy/b.bin"),
                .url(scenario.url("/c%2520d.bin")), .url(scenario.url("/unlisted.bin")),
            ]))

        #expect(reports.map(\.outcome) == [
            .transferred, .transferred, .transferred, .transferred,
            .failed(.checksumNotListed(url: scenario.url("/SHA256SUMS"), name: "unlisted.bin")),
        ])
        #expect(reports[0].sha256 == Self.sha256(Self.a) && reports[3].sha256 == Self.sha256(Self.c))
        #expect("\(reports[4].outcome)".contains("does not list `unlisted.bin`"))
        #expect(scenario.files() == ["a.bin", "b.bin", "c%20d.bin", "copy", "copy/b.bin"])
        let requests = try scenario.nginxRequests()
        #expect(requests.filter { $0.uri == "/SHA256SUMS" }.map(\.method) == ["GET"], "\(requests)")
        #expect(!requests.contains { $0.uri == "/unlisted.bin" }, "an entry its checksum file does not list is not downloaded")
    }

    @Test func severalChecksumFilesAreFetchedOnceEachWithinTheConcurrency() async throws {
        var site: [String: Data] = [:]
        var entries: [ManifestText.Entry] = []
        for release in 1...5 {
            let data = randomData(count: 1_000 * release, seed: UInt64(70 + release))
            site["r\(release)/f.bin"] = data
            site["r\(release)/SHA256SUMS"] = Data("\(Self.sha256(data))  f.bin\n".utf8)
        }
        let scenario = try SyncScenario(.nginx(site: site))
        for release in 1...5 {
            entries.append(.url(scenario.url("/r\(release)/f.bin"), dest: "r\(release).bin", "checksums: \(scenario.url("/r\(release)/SHA256SUMS"))"))
            entries.append(.url(scenario.url("/r\(release)/f.bin"), dest: "copy/r\(release).bin", "checksums: \(scenario.url("/r\(release)/SHA256SUMS"))"))
        }
        let reports = try await scenario.sync(ManifestText(top: ["concurrency: 2"], entries: entries))

        #expect(reports.allSatisfy { $0.outcome == .transferred })
        let sums = try scenario.nginxRequests().filter { $0.uri.hasSuffix("/SHA256SUMS") }.map(\.uri).sorted()
        #expect(sums == (1...5).map { "/r\($0)/SHA256SUMS" })
    }

    @Test func bsdChecksumFileWithSHA512AndChecksumName() async throws {
        let sums = "SHA512 (a.bin) = \(Self.sha512(Self.a))\nSHA512 (release-b.bin) = \(Self.sha512(Self.b))\n"
        let scenario = try SyncScenario(.nginx(site: ["CHECKSUM.SHA512": Data(sums.utf8), "a.bin": Self.a, "latest": Self.b]))
        let checksums = "checksums: \(scenario.url("/CHECKSUM.SHA512"))"
        let reports = try await scenario.sync(ManifestText(entries: [
            .url(scenario.url("/a.bin"), checksums),
            .url(scenario.url("/latest"), dest: "b.bin", checksums, "checksum_name: release-b.bin"),
        ]))

        #expect(reports.map(\.outcome) == [.transferred, .transferred])
        #expect(reports.map(\.sha256) == [Self.sha512(Self.a), Self.sha512(Self.b)])
        #expect(scenario.local("b.bin") == Self.b)
    }

    @Test func corruptedDownloadIsCaughtByItsChecksumFile() async throws {
        let sums = "\(Self.sha256(Self.a))  a.bin\n"
        // The server's copy is not what the checksum file lists: one byte differs.
        var corrupted = Self.a
        corrupted[40_000] ^= 0xFF
        let scenario = try SyncScenario(.nginx(site: ["SHA256SUMS": Data(sums.utf8), "a.bin": corrupted]))
        let reports = try await scenario.sync(ManifestText(entries: [
            .url(scenario.url("/a.bin"), "retries: 1", "checksums: \(scenario.url("/SHA256SUMS"))"),
        ]))

        #expect(reports[0].outcome.isUnchangedPinMismatch(expected: Self.sha256(Self.a), actual: Self.sha256(corrupted)), "\(reports[0].outcome)")
        #expect(reports[0].attempts == 1, "the server's copy did not change: fetching it again would not help")
        #expect(scenario.files().isEmpty)
        let requests = try scenario.nginxRequests()
        #expect(requests.filter { $0.uri == "/SHA256SUMS" }.count == 1)
        #expect(requests.filter { $0.uri == "/a.bin" }.count == 1)
    }

    @Test func theManifestsOwnPinWinsAndItsChecksumFileIsNotFetched() async throws {
        let scenario = try SyncScenario(.nginx(site: ["a.bin": Self.a]))
        let reports = try await scenario.sync(ManifestText(entries: [
            .url(scenario.url("/a.bin"), "sha256: \(Self.sha256(Self.a))", "checksums: \(scenario.url("/SHA256SUMS"))"),
        ]))

        #expect(reports[0].outcome == .transferred)
        #expect(try !scenario.nginxRequests().contains { $0.uri == "/SHA256SUMS" })
    }

    @Test func aChecksumFileThatCannotBeFetchedFailsOnlyItsEntries() async throws {
        let scenario = try SyncScenario(.nginx(site: ["a.bin": Self.a, "b.bin": Self.b, "page.html": Data("<html>gone</html>\n".utf8)]))
        let reports = try await scenario.sync(ManifestText(entries: [
            .url(scenario.url("/a.bin"), "checksums: \(scenario.url("/SHA256SUMS"))"),
            .url(scenario.url("/b.bin")),
            .url(scenario.url("/a.bin"), dest: "html/a.bin", "checksums: \(scenario.url("/page.html"))"),
        ]))

        #expect(reports.map(\.outcome) == [
            .failed(.checksumFileUnavailable(url: scenario.url("/SHA256SUMS"), .httpStatus(404))),
            .transferred,
            .failed(.checksumFileUnusable(
                url: scenario.url("/page.html"),
                reason: "is not a checksum file: line 1: is neither `HASH  name` (sha256sum, sha512sum) nor `SHA256 (name) = HASH`")),
        ])
        #expect(scenario.files() == ["b.bin"])
        #expect(try !scenario.nginxRequests().contains { $0.uri == "/a.bin" })
    }

    @Test func aChecksumFileIsRetriedAfterA503AndFetchedOnceForTheRun() async throws {
        let scenario = try SyncScenario(.faultServer)
        scenario.server.route("/SHA256SUMS", replies: [.status(503), .file(Data("\(Self.sha256(Self.b))  b.bin\n".utf8))])
        scenario.server.route("/b.bin", reply: .file(Self.b, etag: "\"b\""))
        let reports = try await scenario.sync(ManifestText(top: ["defaults:", "  retries: 2", "  checksums: \(scenario.url("/SHA256SUMS"))"], entries: [
            .url(scenario.url("/b.bin")), .url(scenario.url("/b.bin"), dest: "again/b.bin"),
        ]))

        #expect(reports.map(\.outcome) == [.transferred, .transferred])
        #expect(scenario.server.requests.filter { $0.path == "/SHA256SUMS" }.map(\.method) == ["GET", "GET"])
    }

    @Test func aChecksumFileOverTheSizeCapIsRefusedNamingTheCap() async throws {
        let huge = Data(repeating: 0x61, count: ChecksumFileBody.limit + 1)
        let scenario = try SyncScenario(.nginx(site: ["a.bin": Self.a, "SHA256SUMS": huge]))
        let reports = try await scenario.sync(ManifestText(entries: [
            .url(scenario.url("/a.bin"), "checksums: \(scenario.url("/SHA256SUMS"))"),
        ]))

        #expect(reports[0].outcome == .failed(.checksumFileUnusable(
            url: scenario.url("/SHA256SUMS"), reason: "is larger than 16 MiB, too large for a checksum file")))
        #expect(scenario.files().isEmpty)
        let fetched = try scenario.nginxRequests().filter { $0.uri == "/SHA256SUMS" }
        #expect(fetched.count == 1, "not retried: a file too large stays too large")
    }

    @Test func planFetchesTheChecksumFileAndSkipsWhatMatchesIt() async throws {
        let sums = "\(Self.sha256(Self.a))  a.bin\n\(Self.sha256(Self.b))  b.bin\n"
        let scenario = try SyncScenario(.nginx(site: ["SHA256SUMS": Data(sums.utf8), "a.bin": Self.a, "b.bin": Self.b]),
                                        before: ["a.bin": Self.a, "b.bin": Self.c])
        let manifest = try scenario.load(ManifestText(top: ["defaults:", "  checksums: \(scenario.url("/SHA256SUMS"))"], entries: [
            .url(scenario.url("/a.bin")), .url(scenario.url("/b.bin")),
        ]))
        let before = scenario.snapshot()
        let plan = await scenario.runner(manifest).plan()

        #expect(plan.map(\.action) == [.skip, .replace(reason: "local file does not match its sha256 pin")])
        #expect(scenario.snapshot() == before)
        #expect(try scenario.nginxRequests().filter { $0.uri == "/SHA256SUMS" }.map(\.method) == ["GET"])
    }

    @Test func verifyChecksAnEntryOfAChecksumFileOfflineByTheDigestMirrorRecorded() async throws {
        let sums = "SHA512 (a.bin) = \(Self.sha512(Self.a))\n"
        let scenario = try SyncScenario(.nginx(site: ["SUMS": Data(sums.utf8), "a.bin": Self.a]))
        let manifest = try scenario.load(ManifestText(entries: [.url(scenario.url("/a.bin"), "checksums: \(scenario.url("/SUMS"))")]))
        #expect(try await scenario.sync(manifest).map(\.outcome) == [.transferred])
        scenario.nginx.stop()

        let verified = await scenario.verifier(manifest).verify(rehash: true)
        #expect(verified.map(\.status) == [.ok] && verified[0].sha256 == Self.sha512(Self.a))
        var changed = Self.a
        changed[0] ^= 1
        try scenario.put(changed, at: "a.bin")
        let modified = await scenario.verifier(manifest).verify(rehash: false)
        #expect(modified.map(\.status) == [.modified])
        #expect(modified[0].detail == "sha512 is \(Self.sha512(changed)); mirror wrote \(Self.sha512(Self.a))")
    }

    @Test func aPinThatChangesAlgorithmDoesNotFetchTheFileAgain() async throws {
        let scenario = try SyncScenario(.nginx(site: ["a.bin": Self.a]))
        _ = try await scenario.sync(ManifestText(entries: [.url(scenario.url("/a.bin"), "sha256: \(Self.sha256(Self.a))")]))
        scenario.nginx.clearLog()

        // The store holds a SHA-256; the new pin is a SHA-512: DEST is hashed, not downloaded.
        let reports = try await scenario.sync(ManifestText(entries: [.url(scenario.url("/a.bin"), "sha512: \(Self.sha512(Self.a))")]))
        #expect(reports.map(\.outcome) == [.skipped] && reports[0].sha256 == Self.sha512(Self.a))
        #expect(try !scenario.nginxRequests().contains { $0.method == "GET" })
        #expect(try scenario.record("a.bin")?.complete?.sha256 == Self.sha512(Self.a))
    }

    @Test func lockPinsFromTheChecksumFile() throws {
        let sums = "SHA512 (a.bin) = \(Self.sha512(Self.a))\n\(Self.sha256(Self.b))  b.bin\n"
        let scenario = try SyncScenario(.nginx(site: ["SUMS": Data(sums.utf8), "a.bin": Self.a, "b.bin": Self.b]))
        try scenario.write(ManifestText(top: ["defaults:", "  checksums: \(scenario.url("/SUMS"))"], entries: [
            .url(scenario.url("/a.bin"), dest: "a.bin"), .url(scenario.url("/b.bin"), dest: "b.bin"),
        ]))
        let locked = try scenario.run(["lock", "m.yaml"])
        #expect(locked.status == 0, "\(locked)")

        let text = scenario.text(of: "m.yaml")
        #expect(text.contains("dest: a.bin\n    sha512: \(Self.sha512(Self.a))\n    size: 70000\n"), "\(text)")
        #expect(text.contains("dest: b.bin\n    sha256: \(Self.sha256(Self.b))\n    size: 5000\n"), "\(text)")
        // Pinned now: the plan needs neither the checksum file nor the server.
        scenario.nginx.stop()
        let plan = try scenario.run(["plan", "--exit-code", "m.yaml"])
        #expect(plan.status == 0, "\(plan)")
    }

    /// `checksums:` in `defaults` pins every entry, and a release's checksum file and its
    /// signature are files of the release too: the entry whose url is the checksum file's own
    /// is not looked up in itself, and `checksums: none` takes an entry out. Both are mirrored
    /// in the same run as the files the checksum file pins, by the binary as cron runs it.
    @Test func theChecksumFileItselfIsMirroredBesideTheFilesItPins() throws {
        let sums = "\(Self.sha256(Self.a))  a.bin\n\(Self.sha256(Self.b))  b.bin\n"
        let signature = Data("-----BEGIN PGP SIGNATURE-----\nnot listed in SHA256SUMS\n".utf8)
        var corrupted = Self.b
        corrupted[100] ^= 0xFF
        let scenario = try SyncScenario(.nginx(site: [
            "SHA256SUMS": Data(sums.utf8), "SHA256SUMS.gpg": signature, "a.bin": Self.a, "b.bin": corrupted,
        ]))
        try scenario.write(ManifestText(
            top: ["defaults:", "  retries: 0", "  checksums: \(scenario.url("/SHA256SUMS"))"],
            entries: [
                .url(scenario.url("/SHA256SUMS")),
                .url(scenario.url("/SHA256SUMS.gpg"), "checksums: none"),
                .url(scenario.url("/a.bin")),
                .url(scenario.url("/b.bin")),
            ]))

        let result = try scenario.run(["sync", "m.yaml"])
        // b.bin still answers to the checksum file: its corrupted copy fails, and only it.
        #expect(result.status == 1, "\(result)")
        #expect(!result.stderr.contains("does not list"), "\(result)")
        #expect(scenario.local("SHA256SUMS") == Data(sums.utf8))
        #expect(scenario.local("SHA256SUMS.gpg") == signature)
        #expect(scenario.local("a.bin") == Self.a)
        #expect(scenario.local("b.bin") == nil)
        #expect(result.stderr.contains("sha256 mismatch: expected \(Self.sha256(Self.b))"), "\(result)")

        // Both are unpinned entries to `plan` too; nothing else changes.
        let plan = try scenario.run(["plan", "--exit-code", "m.yaml"])
        #expect(plan.status == 5, "b.bin is still to do: \(plan)")
        #expect(!plan.stderr.contains("does not list") && !plan.stdout.contains("does not list"), "\(plan)")
    }
}
