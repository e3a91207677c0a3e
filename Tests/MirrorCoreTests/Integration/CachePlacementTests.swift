import Foundation
import Glibc
import Testing
@testable import MirrorCore

/// How a blob reaches a new root: a reflink where the file system shares extents (XFS, on an
/// image the test makes and loop-mounts), a copy where it cannot (ext4); never a hardlink.
@Suite(.serialized)
struct CachePlacementTests {
    static let big = Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 13) })

    /// Syncs the pinned file into `base/one`, then into `base/two` from the cache `base/cache`;
    /// returns the second copy's path and the blob's.
    private static func provisionTwice(under base: String, scenario: SyncScenario) async throws -> (placed: String, blob: String) {
        let cache = BlobCache(path: base + "/cache")
        func sync(_ root: String) async throws -> [EntryReport] {
            let manifest = try scenario.load(ManifestText(root: base + "/" + root, entries: [
                .init(scenario.url("/big.bin"), "sha256: \(DigestHasher.hex(of: big))", "size: \(big.count)"),
            ]))
            return try await scenario.runner(manifest, SyncScenario.Settings(cache: cache)).sync()
        }
        #expect(try await sync("one").map(\.action) == [.download])
        scenario.nginx.clearLog()
        let second = try await sync("two")
        #expect(second.map(\.action) == [.cached] && second.map(\.outcome) == [.transferred])
        #expect(try scenario.nginxRequests().isEmpty, "no request for a cached pinned file")
        let placed = base + "/two/big.bin"
        #expect(FileManager.default.contents(atPath: placed) == big)
        let blob = try #require(cache.blobPath(sha256: DigestHasher.hex(of: big)))
        var placedInfo = stat(), blobInfo = stat()
        #expect(stat(placed, &placedInfo) == 0 && stat(blob, &blobInfo) == 0)
        #expect(placedInfo.st_ino != blobInfo.st_ino && placedInfo.st_nlink == 1, "never a hardlink")
        #expect(placedInfo.st_mode & 0o200 != 0, "DEST is the user's to write, unlike the blob")
        // The fill wrote no row (its blob was not synced); this placement hashed the blob, synced
        // it and wrote one, which the placement after it finds still true: placing from a blob
        // (a reflink too) leaves its stat alone, so the next is trusted and rewrites nothing.
        let name = DigestHasher.hex(of: big)
        let row = try #require(cache.indexRow(sha256: name))
        #expect(row.describes(blobInfo), "\(row)")
        #expect(try await sync("three").map(\.action) == [.cached])
        #expect(cache.indexRow(sha256: name) == row && stat(blob, &blobInfo) == 0 && row.describes(blobInfo))
        return (placed, blob)
    }

    @Test func onXFSThePlacedFileSharesTheBlobsExtents() async throws {
        let xfs = try LoopFileSystem()
        let scenario = try SyncScenario(.nginx(site: ["big.bin": Self.big]))
        let (placed, blob) = try await Self.provisionTwice(under: xfs.mountPoint, scenario: scenario)
        #expect(try LoopFileSystem.sharesExtents(placed), "a reflink: the placed file shares the blob's extents")
        #expect(try LoopFileSystem.sharesExtents(blob))
        // Copy-on-write: a change to the placed file leaves the blob as it was.
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: placed))
        try handle.write(contentsOf: Data(repeating: 0, count: 4096))
        try handle.close()
        #expect(FileManager.default.contents(atPath: blob) == Self.big)

        // A cache on another file system than the root (here ext4 and XFS) is said at the start:
        // every placement from it is a full copy.
        let elsewhere = BlobCache(path: scenario.directory.path("cache"))
        #expect(elsewhere.sharesFileSystem(with: xfs.path("three")) == false)
        #expect(BlobCache(path: xfs.path("cache")).sharesFileSystem(with: xfs.path("three/deeper")) == true)
        try scenario.write(ManifestText(root: xfs.path("three"), entries: [.init(scenario.url("/big.bin"))]))
        let warned = try scenario.run(["plan", "--cache", elsewhere.path, "m.yaml"])
        #expect(warned.status == 0 && warned.stderr.contains("on another file system than the root"), "\(warned)")
        let quiet = try scenario.run(["plan", "--cache", xfs.path("cache"), "m.yaml"])
        #expect(!quiet.stderr.contains("another file system"), "\(quiet)")
    }

    @Test func onExt4ThePlacedFileIsACopy() async throws {
        let scenario = try SyncScenario(.nginx(site: ["big.bin": Self.big]))
        let kind = try ExternalCommand.run(try LoopFileSystem.tool("stat", package: "coreutils"), ["-f", "-c", "%T", scenario.directory.path], in: "/")
        #expect(kind.stdout.hasPrefix("ext2/ext3"), "the scenario's directory is on ext4: \(kind)")
        let (placed, _) = try await Self.provisionTwice(under: scenario.directory.path, scenario: scenario)
        #expect(try !LoopFileSystem.sharesExtents(placed))
    }

    /// `cache_place: hardlink`: a download is linked into the cache, and a placement links the
    /// blob as DEST; both are read-only. Across file systems, a copy after all.
    @Test func withHardlinksDestIsTheBlobReadOnlyAndAcrossFileSystemsACopy() async throws {
        let scenario = try SyncScenario(.nginx(site: ["big.bin": Self.big]))
        let cache = BlobCache(path: scenario.directory.path("cache"), mode: .hardlink)
        func sync(_ root: String, with cache: BlobCache) async throws -> [EntryReport] {
            let manifest = try scenario.load(ManifestText(root: root, top: ["cache_place: hardlink"], entries: [
                .init(scenario.url("/big.bin"), "sha256: \(DigestHasher.hex(of: Self.big))"),
            ]))
            #expect(manifest.cachePlacement == .hardlink)
            return try await scenario.runner(manifest, SyncScenario.Settings(cache: cache)).sync()
        }
        func info(_ path: String) -> stat {
            var info = stat()
            _ = stat(path, &info)
            return info
        }
        #expect(try await sync(scenario.directory.path("one"), with: cache).map(\.action) == [.download])
        let blob = try #require(cache.blobPath(sha256: DigestHasher.hex(of: Self.big)))
        let first = info(scenario.directory.path("one/big.bin")), stored = info(blob)
        #expect(first.st_ino == stored.st_ino && stored.st_nlink == 2, "the download is the blob")
        #expect(stored.st_mode & 0o222 == 0, "read-only, DEST with it")

        #expect(try await sync(scenario.directory.path("two"), with: cache).map(\.action) == [.cached])
        #expect(info(blob).st_nlink == 3)
        let second = info(scenario.directory.path("two/big.bin"))
        #expect(second.st_ino == stored.st_ino)
        #expect(FileManager.default.contents(atPath: scenario.directory.path("two/big.bin")) == Self.big)
        // The store vouches for the linked file: the next run makes no request.
        scenario.nginx.clearLog()
        #expect(try await sync(scenario.directory.path("two"), with: cache).map(\.outcome) == [.skipped])
        #expect(try scenario.nginxRequests().isEmpty)

        // A link is never trusted, nor vouched for: the blob is a root's DEST too, and each link
        // moves its ctime on. The fill's row knows the digests and no file state.
        #expect(cache.indexRow(sha256: DigestHasher.hex(of: Self.big))?.file == nil)
        // Written through (as root can) and its mtime put back: the next placement hashes it and
        // finds it out.
        let blobPath = blob
        chmod(blobPath, 0o644)
        var damaged = Self.big
        damaged[9] ^= 0xFF
        let before = info(blobPath)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: blobPath))
        try handle.write(contentsOf: damaged)
        try handle.close()
        var times = [before.st_atim, before.st_mtim]
        #expect(utimensat(AT_FDCWD, blobPath, &times, 0) == 0)
        chmod(blobPath, 0o444)
        #expect(try await sync(scenario.directory.path("five"), with: cache).map(\.action) == [.download])
        #expect(FileManager.default.contents(atPath: scenario.directory.path("five/big.bin")) == Self.big)

        // A placement a run left linked as DEST.part (stopped before its rename): the next run
        // never writes through it into the blob, whatever it does with the partial file.
        try FileManager.default.createDirectory(atPath: scenario.directory.path("four"), withIntermediateDirectories: true)
        #expect(link(blob, scenario.directory.path("four/big.bin.part")) == 0)
        let plain = try scenario.load(ManifestText(root: scenario.directory.path("four"), entries: [.init(scenario.url("/big.bin"))]))
        #expect(try await scenario.runner(plain).sync().map(\.outcome) == [.transferred])
        #expect(FileManager.default.contents(atPath: blob) == Self.big, "the blob is as it was")
        #expect(info(blob).st_mode & 0o222 == 0)
        #expect(FileManager.default.contents(atPath: scenario.directory.path("four/big.bin")) == Self.big)
        #expect(info(scenario.directory.path("four/big.bin")).st_ino != stored.st_ino)

        // A root on another file system gets a copy of its own, as with `copy`.
        let xfs = try LoopFileSystem()
        #expect(try await sync(xfs.path("three"), with: cache).map(\.action) == [.cached])
        #expect(info(xfs.path("three/big.bin")).st_ino != stored.st_ino || info(xfs.path("three/big.bin")).st_dev != stored.st_dev)
        #expect(FileManager.default.contents(atPath: xfs.path("three/big.bin")) == Self.big)
    }
}
