import Foundation
import Testing
@testable import MirrorCore

/// Many processes filling one blob cache at once: each pinned file is fetched once in all, no
/// partial blob is left, and every root gets every file.
@Suite(.serialized)
struct SharedCacheTests {
    static let files: [(name: String, data: Data)] = (0..<6).map { index in
        ("f\(index).bin", Data((0..<300_000).map { UInt8(truncatingIfNeeded: ($0 &* (2 * index + 3)) >> 3 &+ index) }))
    }

    @Test func eightProcessesFetchEachPinnedFileOnceAndLeaveNoPartialBlob() throws {
        // Slow enough (1 MB/s a connection) that the processes overlap on every file.
        let scenario = try SyncScenario(.nginx(site: Dictionary(uniqueKeysWithValues: Self.files.map { ($0.name, $0.data) }),
                                               options: NginxOptions(rateLimit: 1_000_000)))
        let entries = Self.files.map { ManifestText.Entry(scenario.url("/\($0.name)"), "sha256: \(DigestHasher.hex(of: $0.data))") }
        for process in 0..<8 {
            try scenario.write(ManifestText(root: "root\(process)", top: ["concurrency: 3"], entries: entries), to: "m\(process).yaml")
        }
        let running = try (0..<8).map { try scenario.start(["sync", "-q", "--cache", "cache", "m\($0).yaml"]) }
        for run in running {
            let result = try run.wait()
            #expect(result.status == 0, "\(result)")
        }
        let gets = try scenario.nginxRequests().filter { $0.method == "GET" && $0.status == 200 }.map(\.uri)
        #expect(gets.sorted() == Self.files.map { "/\($0.name)" }.sorted(), "each pinned file fetched once in all: \(gets.sorted())")
        for process in 0..<8 {
            for file in Self.files {
                #expect(FileManager.default.contents(atPath: scenario.directory.path("root\(process)/\(file.name)")) == file.data)
            }
        }
        // No partial blob: nothing left in tmp/, and every blob is the file its name says.
        let temporary = (try? FileManager.default.contentsOfDirectory(atPath: scenario.directory.path("cache/tmp"))) ?? []
        #expect(temporary.isEmpty, "\(temporary)")
        let cache = BlobCache(path: scenario.directory.path("cache"))
        for file in Self.files {
            let blob = try #require(cache.blobPath(sha256: DigestHasher.hex(of: file.data)))
            #expect(FileManager.default.contents(atPath: blob).map { DigestHasher.hex(of: $0) } == DigestHasher.hex(of: file.data))
        }
    }
}
