import Foundation
import Glibc
import Testing
@testable import MirrorCore

/// Eviction: the least recently used blobs go first, down to a size; those unused past an age
/// go; nothing is taken while a run holds the cache; a half-done eviction is finished by the next.
@Suite(.serialized)
struct CacheEvictionTests {
    static let blobs: [Data] = (1...4).map { index in Data((0..<(index * 10_000)).map { UInt8(truncatingIfNeeded: $0 &* index &+ 1) }) }

    /// A cache holding the four blobs, put in and last used 4, 3, 2 and 1 hours before `now`.
    static func filled(_ directory: TemporaryDirectory, now: Int64) throws -> BlobCache {
        let cache = BlobCache(path: directory.path("cache"))
        for (index, data) in blobs.enumerated() {
            let file = try directory.write(data, to: "in/\(index)")
            _ = try cache.add(file: file)
            let lock = cache.path + "/locks/" + DigestHasher.hex(of: data).prefix(2) + "/" + DigestHasher.hex(of: data)
            // Put in and last used then: the blob's date and its lock file's.
            for path in [lock, cache.blobPath(sha256: DigestHasher.hex(of: data))!] {
                var times = [timespec(tv_sec: Int(now) - (4 - index) * 3600, tv_nsec: 0), timespec(tv_sec: Int(now) - (4 - index) * 3600, tv_nsec: 0)]
                #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
            }
        }
        return cache
    }

    static func held(_ cache: BlobCache) -> [Int] {
        let names = Set(cache.blobs().map(\.sha256))
        return blobs.indices.filter { names.contains(DigestHasher.hex(of: blobs[$0])) }
    }

    @Test func theLeastRecentlyUsedGoFirstDownToTheSize() throws {
        try CryptoLibrary.load()
        let directory = try TemporaryDirectory(prefix: "mirror-evict")
        let now = Int64(time(nil))
        let cache = try Self.filled(directory, now: now)
        // 100,000 bytes in all; at most 75,000: the first two (10,000 + 20,000) go.
        let eviction = try cache.evict(BlobCache.Limits(maxSize: 75_000), now: now, wait: false)
        #expect(eviction.evicted == [DigestHasher.hex(of: Self.blobs[0]), DigestHasher.hex(of: Self.blobs[1])])
        #expect(eviction.bytesFreed == 30_000 && eviction.bytesLeft == 70_000)
        #expect(Self.held(cache) == [2, 3])
        // Unused for more than 90 minutes: the third (2 h); the fourth (1 h) stays.
        let aged = try cache.evict(BlobCache.Limits(maxAge: .seconds(5400)), now: now, wait: false)
        #expect(aged.evicted == [DigestHasher.hex(of: Self.blobs[2])])
        #expect(Self.held(cache) == [3])
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: cache.path + "/trash")) ?? []).isEmpty)
    }

    @Test func nothingIsEvictedWhileARunHoldsTheCacheAndALeftTrashIsEmptiedNextTime() throws {
        try CryptoLibrary.load()
        let directory = try TemporaryDirectory(prefix: "mirror-evict")
        let now = Int64(time(nil))
        let cache = try Self.filled(directory, now: now)
        let inUse = cache.holdInUse()
        #expect(inUse >= 0)
        let busy = try cache.evict(BlobCache.Limits(maxSize: 0), now: now, wait: false)
        #expect(busy.busy && busy.evicted.isEmpty && Self.held(cache) == [0, 1, 2, 3])
        close(inUse)
        // An eviction interrupted between its trash and its deletions left a blob in the trash.
        try FileManager.default.createDirectory(atPath: cache.path + "/trash", withIntermediateDirectories: true)
        try Data("left".utf8).write(to: URL(fileURLWithPath: cache.path + "/trash/leftover"))
        let done = try cache.evict(BlobCache.Limits(maxSize: 100_000), now: now, wait: false)
        #expect(!done.busy && done.evicted.isEmpty)
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: cache.path + "/trash")) ?? []).isEmpty)
    }

    @Test func aPlacementMarksTheBlobUsedSoItOutlivesOlderOnes() async throws {
        let scenario = try SyncScenario(.nginx(site: ["a.bin": Self.blobs[0]]))
        let now = Int64(time(nil))
        let cache = try Self.filled(scenario.directory, now: now)
        // a.bin is the least recently used blob; placing it makes it the most.
        let manifest = try scenario.load(.files(.url(scenario.url("/a.bin"), "sha256: \(DigestHasher.hex(of: Self.blobs[0]))")))
        let reports = try await scenario.runner(manifest, SyncScenario.Settings(cache: cache)).sync()
        #expect(reports.map(\.action) == [.cached])
        _ = try cache.evict(BlobCache.Limits(maxSize: 50_000), now: now + 10, wait: false)
        #expect(Self.held(cache) == [0, 3], "the placed blob stays, the older ones go")
    }

    @Test func aSyncWithCacheLimitsEvictsAfterItAndPruneWaitsForRunsOrSaysSo() throws {
        let site = Dictionary(uniqueKeysWithValues: Self.blobs.enumerated().map { ("f\($0.offset).bin", $0.element) })
        let scenario = try SyncScenario(.nginx(site: site))
        try scenario.write(ManifestText(top: ["cache_max_size: 60000"], entries: Self.blobs.indices.map { .init(scenario.url("/f\($0).bin")) }))
        let synced = try scenario.run(["sync", "-v", "--cache", "c", "--metrics-file", "metrics.prom", "m.yaml"])
        #expect(synced.status == 0 && synced.stderr.contains("cache: evicted"), "\(synced)")
        let cache = BlobCache(path: scenario.directory.path("c"))
        #expect(cache.stats().bytes <= 60_000)
        let metrics = String(decoding: scenario.directory.contents(of: "metrics.prom") ?? Data(), as: UTF8.self)
        #expect(metrics.contains("mirror_cache_evictions{"), "\(metrics)")
        // A run holds the cache: prune --no-wait says so and exits 3; prune alone waits for it.
        let inUse = cache.holdInUse()
        let refused = try scenario.run(["cache", "prune", "--cache", "c", "--max-size", "0", "--no-wait"])
        #expect(refused.status == 3 && refused.stderr.contains("a sync holds"), "\(refused)")
        let waiting = try scenario.start(["cache", "prune", "--cache", "c", "--max-size", "0"])
        Thread.sleep(forTimeInterval: 0.3)
        #expect(waiting.process.isRunning, "prune waits while the cache is held")
        close(inUse)
        let pruned = try waiting.wait()
        #expect(pruned.status == 0 && pruned.stdout.contains("0 B left"), "\(pruned)")
        #expect(cache.stats().blobs == 0)
    }
}
