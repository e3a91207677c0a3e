import Foundation
import Testing
@testable import MirrorCore

/// Against a real Apache: its weak-then-strong ETags and a `.tar.gz` it labels
/// `Content-Encoding: x-gzip`.
@Suite(.serialized)
struct ApacheTests {
    /// Apache sends a file's ETag weak while the file's modification time is less than a second
    /// old, strong afterwards; waiting this long makes the next response's tag strong.
    static let untilTheTagIsStrong: Duration = .milliseconds(1_500)

    /// Writes `count` bytes as `name` until Apache's answer to `use` shows a weak ETag: that
    /// holds only within a second of the write, which a loaded machine may miss, so it tries
    /// again with a fresh file, up to ten times. Returns the data written.
    static func writeWhileWeak(
        _ site: TemporaryDirectory, _ name: String, count: Int, seed: UInt64, use: () async throws -> String?
    ) async throws -> Data {
        for attempt in 0..<10 {
            let data = randomData(count: count, seed: seed + UInt64(attempt))
            try site.write(data, to: name)
            if let etag = try await use(), EntityTag(etag).isWeak { return data }
        }
        Issue.record("Apache never sent a weak ETag within a second of writing \(name)")
        throw CancellationError()
    }

    @Test func anUnchangedFileIsSkippedWhenItsWeakETagTurnsStrong() async throws {
        let site = try TemporaryDirectory(prefix: "mirror-apache-site")
        let apache = try await ApacheServer.start(serving: site)
        let work = try SyncScenario()
        let manifest = try work.load(.files(.url(apache.url("/w.bin"), dest: "w.bin", "retries: 1")))
        let data = try await Self.writeWhileWeak(site, "w.bin", count: 200_000, seed: 30) {
            _ = try await work.sync(manifest)
            return try work.record("w.bin")?.complete?.validators.etag
        }
        #expect(work.local("w.bin")?.fingerprint == data.fingerprint)
        try await Task.sleep(for: Self.untilTheTagIsStrong)
        let before = try await apache.requests().count

        let again = try await work.sync(manifest)

        #expect(again[0].outcome == .skipped, "\(again[0].action)")
        #expect(again[0].bytesTransferred == 0)
        let requests = try await apache.requests(atLeast: before + 1).dropFirst(before)
        // One GET, conditional on the weak tag recorded: Apache compares it weakly, as RFC 9110
        // says for If-None-Match, and answers 304 under the strong tag.
        #expect(requests.map { "\($0.method) \($0.status)" } == ["GET 304"], "\(requests)")
        #expect(requests.first?.ifNoneMatch.map { EntityTag($0).isWeak } == true, "the condition is the recorded weak tag: \(requests)")
        #expect(requests.first?.etag.map { !EntityTag($0).isWeak } == true, "the second answer's ETag is strong: \(requests)")
    }

    @Test func aPartialStartedUnderAWeakETagIsResumedWhenTheTagTurnsStrong() async throws {
        let site = try TemporaryDirectory(prefix: "mirror-apache-site")
        let apache = try await ApacheServer.start(serving: site)
        let work = try SyncScenario()
        let url = apache.url("/p.bin")
        var validators: (etag: String?, lastModified: String?) = (nil, nil)
        let data = try await Self.writeWhileWeak(site, "p.bin", count: 300_000, seed: 40) {
            validators = try headValidators(url)
            return validators.etag
        }
        // What a run cut off while the tag was weak leaves behind: a third of the file and the
        // record of the version it came from.
        try work.put(data.prefix(100_000), at: "p.bin.part")
        try work.save(StateRecord(dest: "p.bin", url: url, partial: RemoteValidators(
            etag: validators.etag, lastModified: validators.lastModified, size: 300_000)))
        try await Task.sleep(for: Self.untilTheTagIsStrong)
        let before = try await apache.requests().count

        let reports = try await work.sync(.files(.url(url, dest: "p.bin", "retries: 1")))

        #expect(reports[0].outcome == .transferred)
        #expect(reports[0].action == .resume(from: 100_000, source: .partial))
        #expect(reports[0].bytesTransferred == 200_000, "the 100,000 bytes on disk are kept")
        #expect(work.local("p.bin")?.fingerprint == data.fingerprint)
        let gets = try await apache.requests(atLeast: before + 2).dropFirst(before).filter { $0.method == "GET" }
        // The weak tag never goes into If-Range: the server's strong one does, and the bytes
        // before the resume point are compared, since a weak tag promised no bytes.
        let weak = try #require(validators.etag)
        #expect(gets.map(\.range) == ["bytes=\(100_000 - 65_536)-"], "\(gets)")
        #expect(gets.map(\.ifRange) == [String(weak.dropFirst(2))], "\(gets)")
        #expect(gets.map(\.status) == [206], "\(gets)")
    }

    /// A real gzip stream, as a `.tar.gz` is.
    static func gzipped(_ data: Data) async throws -> Data {
        let scratch = try TemporaryDirectory(prefix: "mirror-gzip")
        try scratch.write(data, to: "plain")
        let gzip = Process()
        gzip.executableURL = URL(fileURLWithPath: "/bin/gzip")
        gzip.arguments = ["-n", "-6", scratch.path("plain")]
        try gzip.run()
        try await gzip.succeed("gzip")
        return try #require(scratch.contents(of: "plain.gz"))
    }

    @Test func aTarballServedAsContentEncodingGzipIsSavedAsSentAndItsPinChecked() async throws {
        let site = try TemporaryDirectory(prefix: "mirror-apache-site")
        let tarball = try await Self.gzipped(Data(repeating: 0x61, count: 100_000) + randomData(count: 50_000, seed: 50))
        try site.write(tarball, to: "a.tar.gz")
        let apache = try await ApacheServer.start(serving: site, extraConfiguration: "AddEncoding x-gzip .gz")
        let head = try CurlCommand.run(["-sI", apache.url("/a.tar.gz")])
        try #require(head.output.lowercased().contains("content-encoding: x-gzip"), "\(head)")
        let work = try SyncScenario()
        let pin = DigestHasher.hex(of: tarball)

        let reports = try await work.sync(.files(.url(apache.url("/a.tar.gz"), dest: "a.tar.gz", "retries: 1", "sha256: \(pin)")))

        #expect(reports[0].outcome == .transferred, "\(reports[0].outcome)")
        #expect(reports[0].size == Int64(tarball.count) && reports[0].sha256 == pin)
        #expect(work.local("a.tar.gz") == tarball, "the bytes are the file's, not decompressed")

        // A pin of the decompressed bytes is not what was served: refused, nothing lands.
        let other = try SyncScenario()
        let wrongPin = DigestHasher.hex(of: Data(repeating: 0x61, count: 100_000) + randomData(count: 50_000, seed: 50))
        let refused = try await other.sync(.files(.url(apache.url("/a.tar.gz"), dest: "a.tar.gz", "retries: 1", "sha256: \(wrongPin)")))
        #expect(refused[0].outcome.isUnchangedPinMismatch(expected: wrongPin, actual: pin), "\(refused[0].outcome)")
        #expect(other.local("a.tar.gz") == nil)
    }

    @Test func aPartialOfACodedFileIsResumedUnderItsStrongETag() async throws {
        let site = try TemporaryDirectory(prefix: "mirror-apache-site")
        let tarball = try await Self.gzipped(randomData(count: 400_000, seed: 60))
        try site.write(tarball, to: "b.tar.gz")
        let apache = try await ApacheServer.start(serving: site, extraConfiguration: "AddEncoding x-gzip .gz")
        try await Task.sleep(for: Self.untilTheTagIsStrong)
        let url = apache.url("/b.tar.gz")
        let validators = try headValidators(url)
        let work = try SyncScenario()
        try work.put(tarball.prefix(150_000), at: "b.tar.gz.part")
        try work.save(StateRecord(dest: "b.tar.gz", url: url, partial: RemoteValidators(
            etag: validators.etag, lastModified: validators.lastModified, size: Int64(tarball.count))))
        let before = try await apache.requests().count

        let reports = try await work.sync(.files(.url(url, dest: "b.tar.gz", "retries: 1")))

        #expect(reports[0].outcome == .transferred)
        #expect(reports[0].bytesTransferred == Int64(tarball.count - 150_000))
        #expect(work.local("b.tar.gz") == tarball)
        let gets = try await apache.requests(atLeast: before + 2).dropFirst(before).filter { $0.method == "GET" }
        #expect(gets.map(\.ifRange) == [validators.etag], "\(gets)")
        #expect(gets.map(\.status) == [206], "\(gets)")
    }
}
