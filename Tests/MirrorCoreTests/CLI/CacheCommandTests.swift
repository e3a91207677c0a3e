import Foundation
import Testing
@testable import MirrorCore

/// `mirror cache add`, `verify`, `list` and `stats` on a cache of the test's own; what `add`
/// seeds provisions a root with no request.
@Suite(.serialized)
struct CacheCommandTests {
    static let one = Data((0..<50_000).map { UInt8(truncatingIfNeeded: $0 &* 11 &+ 2) })
    static let two = Data("a small file\n".utf8)

    @Test func addSeedsTheCacheAndASyncPlacesFromItWithNoRequest() throws {
        let scenario = try SyncScenario(.nginx(site: ["one.bin": Self.one]))
        let file = try scenario.directory.write(Self.one, to: "usb/one.bin")
        let added = try scenario.run(["cache", "add", "--cache", "c", file])
        #expect(added.status == 0 && added.stdout.contains("added") && added.stdout.contains(DigestHasher.hex(of: Self.one)), "\(added)")
        let again = try scenario.run(["cache", "add", "--json", file], environment: ["MIRROR_CACHE": scenario.directory.path("c")])
        #expect(again.stdout.contains(#""added":false"#), "\(again)")
        try scenario.write(ManifestText(entries: [.init(scenario.url("/one.bin"), "sha256: \(DigestHasher.hex(of: Self.one))")]))
        let synced = try scenario.run(["sync", "--cache", "c", "m.yaml"])
        #expect(synced.status == 0 && (synced.stderr.contains("placed") || synced.stdout.contains("placed")), "\(synced)")
        #expect(try scenario.nginxRequests().isEmpty)
        #expect(scenario.local("one.bin") == Self.one)
        let missing = try scenario.run(["cache", "add", "--cache", "c", "no-such-file", file])
        #expect(missing.status == 1 && missing.stderr.contains("no-such-file"), "\(missing)")
    }

    @Test func verifyQuarantinesABlobThatIsNotWhatItsNameSays() throws {
        let directory = try TemporaryDirectory(prefix: "mirror-cache-command")
        let cache = BlobCache(path: directory.path("c"))
        for data in [Self.one, Self.two] {
            let file = try directory.write(data, to: "in-\(data.count)")
            #expect(try MirrorBinary.run(["cache", "add", "--cache", cache.path, file], in: directory.path).status == 0)
        }
        let clean = try MirrorBinary.run(["cache", "verify", "--cache", cache.path], in: directory.path)
        #expect(clean.status == 0 && clean.stdout.contains("2 blobs verified") && clean.stdout.contains("0 quarantined"), "\(clean)")
        let blob = try #require(cache.blobPath(sha256: DigestHasher.hex(of: Self.two)))
        chmod(blob, 0o644)
        try Data("another text\n".utf8).write(to: URL(fileURLWithPath: blob))
        let damaged = try MirrorBinary.run(["cache", "verify", "--cache", cache.path, "--json"], in: directory.path)
        #expect(damaged.status == 1 && damaged.stdout.contains(DigestHasher.hex(of: Self.two)), "\(damaged)")
        #expect(!FileManager.default.fileExists(atPath: blob))
        let stats = try MirrorBinary.run(["cache", "stats", "--cache", cache.path, "--json"], in: directory.path)
        #expect(stats.stdout.contains(#""blobs":1"#) && stats.stdout.contains(#""quarantined":1"#) && stats.stdout.contains(#""bytes":50000"#), "\(stats)")
        let list = try MirrorBinary.run(["cache", "list", "--cache", cache.path], in: directory.path)
        #expect(list.status == 0 && list.stdout.contains(DigestHasher.hex(of: Self.one)) && !list.stdout.contains(DigestHasher.hex(of: Self.two)), "\(list)")
        let unnamed = try MirrorBinary.run(["cache", "stats"], in: directory.path, environment: ["MIRROR_CACHE": ""])
        #expect(unnamed.status == 2 && unnamed.stderr.contains("MIRROR_CACHE"), "\(unnamed)")
    }
}
