import Foundation
import Testing
@testable import MirrorCore

/// Resume against a real lighttpd: its strong ETags go into If-Range, and its answers to the
/// range requests are what the transfer rules expect.
@Suite(.serialized)
struct LighttpdTests {
    @Test func aRecordedPartialIsResumedWithIfRangeAndAnUnrecordedOneByItsOverlap() async throws {
        let site = try TemporaryDirectory(prefix: "mirror-lighttpd-site")
        let data = randomData(count: 1_000_000, seed: 70)
        try site.write(data, to: "r.bin")
        try site.write(data, to: "o.bin")
        let lighttpd = try await LighttpdServer.start(serving: site)
        let recorded = lighttpd.url("/r.bin")
        let validators = try headValidators(recorded)
        let etag = try #require(validators.etag)
        #expect(!EntityTag(etag).isWeak)
        let work = try SyncScenario()
        try work.put(data.prefix(400_000), at: "r.bin.part")
        try work.save(StateRecord(dest: "r.bin", url: recorded, partial: RemoteValidators(
            etag: etag, lastModified: validators.lastModified, size: 1_000_000)))
        try work.put(data.prefix(250_000), at: "o.bin.part")

        let first = try await work.sync(.files(.url(recorded, dest: "r.bin", "retries: 1")))
        let second = try await work.sync(.files(.url(lighttpd.url("/o.bin"), dest: "o.bin", "retries: 1")))

        #expect(first[0].outcome == .transferred && first[0].bytesTransferred == 600_000)
        #expect(second[0].outcome == .transferred && second[0].bytesTransferred == 750_000)
        #expect(work.local("r.bin")?.fingerprint == data.fingerprint)
        #expect(work.local("o.bin")?.fingerprint == data.fingerprint)
        let gets = try await lighttpd.requests(atLeast: 5).filter { $0.method == "GET" }
        #expect(gets.map(\.uri) == ["/r.bin", "/o.bin"], "\(gets)")
        #expect(gets.map(\.range) == ["bytes=400000-", "bytes=\(250_000 - 65_536)-"], "\(gets)")
        #expect(gets.map(\.ifRange) == [etag, nil], "\(gets)")
        #expect(gets.map(\.status) == [206, 206], "\(gets)")
    }

    @Test func aFileChangedUnderARecordedPartialIsFetchedWhole() async throws {
        let site = try TemporaryDirectory(prefix: "mirror-lighttpd-site")
        let old = randomData(count: 500_000, seed: 71)
        let new = randomData(count: 500_000, seed: 72)
        try site.write(old, to: "c.bin")
        let lighttpd = try await LighttpdServer.start(serving: site)
        let url = lighttpd.url("/c.bin")
        let before = try headValidators(url)
        let work = try SyncScenario()
        try work.put(old.prefix(200_000), at: "c.bin.part")
        try work.save(StateRecord(dest: "c.bin", url: url, partial: RemoteValidators(
            etag: before.etag, lastModified: before.lastModified, size: 500_000)))
        // The same size, another modification time: lighttpd's ETag changes with it.
        let path = try site.write(new, to: "c.bin")
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -3_600)], ofItemAtPath: path)
        #expect(try headValidators(url).etag != before.etag)

        let reports = try await work.sync(.files(.url(url, dest: "c.bin", "retries: 1")))

        #expect(reports[0].outcome == .transferred && reports[0].bytesTransferred == 500_000)
        #expect(work.local("c.bin")?.fingerprint == new.fingerprint)
        // Two HEADs of the test's, the probe and the GET: waiting for fewer lines could read
        // the log before lighttpd has written the GET's.
        #expect(try await lighttpd.requests(atLeast: 4).filter { $0.method == "GET" }.map(\.range) == [nil])
    }
}
