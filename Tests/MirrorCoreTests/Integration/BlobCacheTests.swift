import Foundation
import Glibc
import Synchronization
import Testing
@testable import MirrorCore

/// The blob cache against nginx: what one root downloads provisions the next with no request, a
/// blob that is not what its name says is never placed, and a file gone upstream still
/// provisions a new root from the cache.
@Suite(.serialized)
struct BlobCacheTests {
    static let a = Data((0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 1) })
    static let b = Data((0..<5_000).map { UInt8(truncatingIfNeeded: $0 &* 29 &+ 3) })
    static let c = Data((0..<9_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })

    let scenario: SyncScenario
    let cache: BlobCache

    init() throws {
        scenario = try SyncScenario(.nginx(site: ["a.bin": Self.a, "b.bin": Self.b, "c.bin": Self.c]))
        cache = BlobCache(path: scenario.directory.path("cache"))
    }

    /// a.bin and b.bin pinned, c.bin not, into `root`.
    func manifest(root: String) throws -> Manifest {
        try scenario.load(ManifestText(root: root, entries: [
            .init(scenario.url("/a.bin"), "sha256: \(DigestHasher.hex(of: Self.a))", "size: \(Self.a.count)"),
            .init(scenario.url("/b.bin"), "sha256: \(DigestHasher.hex(of: Self.b))"),
            .init(scenario.url("/c.bin")),
        ]))
    }

    func sync(root: String, events: (@Sendable (RunEvent) -> Void)? = nil) async throws -> [EntryReport] {
        try await scenario.runner(manifest(root: root), SyncScenario.Settings(events: events, cache: cache)).sync()
    }

    func contents(_ root: String, _ name: String) -> Data? {
        FileManager.default.contents(atPath: scenario.directory.path("\(root)/\(name)"))
    }

    @Test func aSecondRootIsProvisionedFromTheCacheWithNoRequestForItsPinnedFiles() async throws {
        let first = try await sync(root: "one")
        #expect(first.map(\.action) == [.download, .download, .download])
        // Every file the run hashed by SHA-256 went in, pinned or not, read-only.
        for data in [Self.a, Self.b, Self.c] {
            let blob = try #require(cache.blobPath(sha256: DigestHasher.hex(of: data)))
            #expect(FileManager.default.contents(atPath: blob) == data)
            let mode = try #require(FileManager.default.attributesOfItem(atPath: blob)[.posixPermissions] as? Int)
            #expect(mode & 0o222 == 0, "a blob is read-only")
        }
        scenario.nginx.clearLog()

        let second = try await sync(root: "two")
        #expect(second.map(\.action) == [.cached, .cached, .download])
        #expect(second.map(\.outcome) == [.transferred, .transferred, .transferred])
        #expect(second.map(\.bytesTransferred) == [0, 0, Int64(Self.c.count)])
        #expect(contents("two", "a.bin") == Self.a && contents("two", "b.bin") == Self.b && contents("two", "c.bin") == Self.c)
        // The unpinned file is asked for (the cache cannot know which bytes its URL names now).
        #expect(try scenario.nginxRequests().map(\.uri) == ["/c.bin"])
        // Each placement is counted against its blob: `mirror cache list` and `stats` show them.
        let blobs = cache.blobs()
        #expect(blobs.map { cache.hits(of: $0) }.reduce(0, +) == 2 && cache.stats().hits == 2)
        #expect(blobs.first { $0.sha256 == DigestHasher.hex(of: Self.c) }.map(cache.hits(of:)) == 0, "the unpinned file was never placed")
        _ = try await sync(root: "again")
        #expect(cache.blobs().first { $0.sha256 == DigestHasher.hex(of: Self.a) }.map(cache.hits(of:)) == 2)
        // The placed files are recorded as verified: the next run needs no request for them.
        scenario.nginx.clearLog()
        let third = try await sync(root: "two")
        #expect(third.map(\.outcome) == [.skipped, .skipped, .skipped])
        #expect(try scenario.nginxRequests().map(\.uri) == ["/c.bin"])
    }

    @Test func aBlobThatIsNotWhatItsNameSaysIsQuarantinedAndTheFileFetched() async throws {
        _ = try await sync(root: "one")
        let blob = try #require(cache.blobPath(sha256: DigestHasher.hex(of: Self.a)))
        // Damaged in place, keeping its size: only hashing can tell.
        chmod(blob, 0o644)
        var damaged = Self.a
        damaged[100] ^= 0xFF
        try damaged.write(to: URL(fileURLWithPath: blob))
        scenario.nginx.clearLog()

        let problems = Said()
        let reports = try await sync(root: "two") { event in
            if case .cacheProblem(let text) = event { problems.lines.withLock { $0.append(text) } }
        }
        #expect(reports.map(\.action) == [.download, .cached, .download])
        #expect(contents("two", "a.bin") == Self.a, "the damaged bytes never land under DEST")
        #expect(try scenario.nginxRequests().map(\.uri).sorted() == ["/a.bin", "/c.bin"])
        let said = problems.lines.withLock { $0 }
        #expect(said.count == 1 && said[0].contains(blob) && said[0].contains("did not hash to its name"), "\(said)")
        let quarantined = try FileManager.default.contentsOfDirectory(atPath: cache.path + "/quarantine")
        #expect(quarantined.count == 1 && quarantined[0].hasPrefix(DigestHasher.hex(of: Self.a)))
        // The download put the right bytes back.
        #expect(FileManager.default.contents(atPath: blob) == Self.a)
    }

    @Test func aFileGoneUpstreamStillProvisionsANewRootFromTheCache() async throws {
        _ = try await sync(root: "one")
        try FileManager.default.removeItem(atPath: scenario.directory.path("site/a.bin"))
        try FileManager.default.removeItem(atPath: scenario.directory.path("site/b.bin"))
        scenario.nginx.clearLog()
        let reports = try await sync(root: "two")
        #expect(reports.map(\.outcome) == [.transferred, .transferred, .transferred])
        #expect(contents("two", "a.bin") == Self.a && contents("two", "b.bin") == Self.b)
        #expect(try scenario.nginxRequests().map(\.uri) == ["/c.bin"])
    }

    @Test func aBlobDeletedFromOutsideIsAMissNeverAnError() async throws {
        _ = try await sync(root: "one")
        let blob = try #require(cache.blobPath(sha256: DigestHasher.hex(of: Self.b)))
        try FileManager.default.removeItem(atPath: blob)
        let reports = try await sync(root: "two")
        #expect(reports.map(\.action) == [.cached, .download, .download])
        #expect(reports.allSatisfy { $0.outcome == .transferred })
        #expect(FileManager.default.contents(atPath: blob) == Self.b, "the download filled it again")
    }

    @Test func filesARootAlreadyHeldGoInOnceHashedThere() async throws {
        // Copies another tool left, with the server's dates: hashed at first sight, recorded, kept.
        for name in ["a.bin", "b.bin", "c.bin"] { try scenario.putCopy(ofServed: name, at: "adopted/" + name) }
        let manifest = try scenario.load(ManifestText(root: "root/adopted", entries: [
            .init(scenario.url("/a.bin")), .init(scenario.url("/b.bin")), .init(scenario.url("/c.bin")),
        ]))
        let reports = try await scenario.runner(manifest, SyncScenario.Settings(cache: cache)).sync()
        #expect(reports.map(\.outcome) == [.skipped, .skipped, .skipped])
        for data in [Self.a, Self.b, Self.c] {
            #expect(FileManager.default.contents(atPath: try #require(cache.blobPath(sha256: DigestHasher.hex(of: data)))) == data)
        }
    }

    @Test func planShowsCachedAndMakesNoRequest() async throws {
        _ = try await sync(root: "one")
        scenario.nginx.clearLog()
        let runner = scenario.runner(try manifest(root: "two"), SyncScenario.Settings(cache: cache))
        let plan = await runner.plan()
        #expect(Array(plan.indices.map { plan.action(at: $0) }.prefix(2)) == [.cached, .cached])
        #expect(try scenario.nginxRequests().map(\.uri) == ["/c.bin"], "only the unpinned entry is probed")
        #expect(!FileManager.default.fileExists(atPath: scenario.directory.path("two")), "plan writes nothing")
    }

    @Test func theCacheIsChosenByFlagThenVariableThenManifestAndNeverInsideTheRoot() throws {
        var manifest = try manifest(root: "one")
        manifest.cache = "/srv/from-manifest"
        func chosen(_ flag: String?, disabled: Bool = false, _ variable: String?) throws -> String? {
            try BlobCache.chosen(flag: flag, disabled: disabled, variable: variable, manifest: manifest, currentDirectory: "/work")?.path
        }
        #expect(try chosen("flag", "/srv/variable") == "/work/flag")
        #expect(try chosen(nil, "/srv/variable") == "/srv/variable")
        #expect(try chosen(nil, "") == "/srv/from-manifest", "an empty MIRROR_CACHE is unset")
        #expect(try chosen(nil, nil) == "/srv/from-manifest")
        #expect(try chosen("flag", disabled: true, "/srv/variable") == nil)
        manifest.cache = nil
        #expect(try chosen(nil, nil) == nil)
        #expect(throws: BlobCache.Refusal.self) { try chosen(manifest.root + "/blobs", nil) }
    }
}

/// What a run said, as its events reached it.
private final class Said: Sendable {
    let lines = Mutex<[String]>([])
}
