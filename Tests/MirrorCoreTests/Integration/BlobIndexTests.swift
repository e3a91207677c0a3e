import Foundation
import Glibc
import Testing
@testable import MirrorCore

/// The cache's index against nginx: a `sha512` pin reaches the blob its bytes were put in by,
/// a blob whose stat is its row's is placed without being hashed again and one whose stat
/// moved on is hashed, and the index follows the blobs through quarantine, eviction, `verify`
/// and `add`.
@Suite(.serialized)
struct BlobIndexTests {
    static let a = Data((0..<80_000).map { UInt8(truncatingIfNeeded: $0 &* 11 &+ 5) })
    static let b = Data((0..<6_000).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 9) })

    let scenario: SyncScenario
    let cache: BlobCache

    init() throws {
        scenario = try SyncScenario(.nginx(site: ["a.bin": Self.a, "b.bin": Self.b]))
        cache = BlobCache(path: scenario.directory.path("cache"))
    }

    static func sha256(_ data: Data) -> String { DigestHasher.hex(of: data) }

    static func sha512(_ data: Data) -> String {
        let hasher = DigestHasher(.sha512)
        data.withUnsafeBytes { hasher.update($0) }
        return hasher.finalize()
    }

    /// a.bin and b.bin into `root`, pinned by `algorithm`.
    func sync(root: String, pinnedBy algorithm: DigestAlgorithm, cache: BlobCache? = nil) async throws -> [EntryReport] {
        func pin(_ data: Data) -> String { algorithm == .sha256 ? "sha256: \(Self.sha256(data))" : "sha512: \(Self.sha512(data))" }
        let manifest = try scenario.load(ManifestText(root: root, entries: [
            .init(scenario.url("/a.bin"), pin(Self.a)), .init(scenario.url("/b.bin"), pin(Self.b)),
        ]))
        return try await scenario.runner(manifest, SyncScenario.Settings(cache: cache ?? self.cache)).sync()
    }

    func contents(_ path: String) -> Data? {
        FileManager.default.contents(atPath: scenario.directory.path(path))
    }

    @Test func aSHA512PinReachesTheBlobThatASHA256PinOrASHA512PinPutIn() async throws {
        #expect(try await sync(root: "one", pinnedBy: .sha256).map(\.action) == [.download, .download])
        scenario.nginx.clearLog()
        let byOther = try await sync(root: "two", pinnedBy: .sha512)
        #expect(byOther.map(\.action) == [.cached, .cached] && byOther.allSatisfy { $0.outcome == .transferred })
        #expect(byOther.map(\.sha256) == [Self.sha512(Self.a), Self.sha512(Self.b)], "checked against the SHA-512 pins")
        #expect(contents("two/a.bin") == Self.a && contents("two/b.bin") == Self.b)
        #expect(try scenario.nginxRequests().isEmpty, "no request for a file the cache holds under another digest")

        // A cache filled by SHA-512 pins alone: the blob is named by the SHA-256 computed as it went in.
        let other = BlobCache(path: scenario.directory.path("cache512"))
        #expect(try await sync(root: "three", pinnedBy: .sha512, cache: other).map(\.action) == [.download, .download])
        #expect(FileManager.default.contents(atPath: try #require(other.blobPath(sha256: Self.sha256(Self.a)))) == Self.a)
        #expect(other.blobName(forPin: Self.sha512(Self.a)) == Self.sha256(Self.a))
        scenario.nginx.clearLog()
        #expect(try await sync(root: "four", pinnedBy: .sha512, cache: other).map(\.action) == [.cached, .cached])
        #expect(try await sync(root: "five", pinnedBy: .sha256, cache: other).map(\.action) == [.cached, .cached])
        #expect(try scenario.nginxRequests().isEmpty)
    }

    @Test func theBlobsRowDecidesWhetherAPlacementHashesIt() async throws {
        _ = try await sync(root: "one", pinnedBy: .sha256)
        let name = Self.sha256(Self.a)
        let blob = try #require(cache.blobPath(sha256: name))
        #expect(cache.indexRow(sha256: name)?.file == nil, "a fill (not synced) vouches for no file state")
        #expect(cache.blobName(forPin: Self.sha512(Self.a)) == name, "but its SHA-512 pointer")
        #expect(try await sync(root: "zero", pinnedBy: .sha256).map(\.action) == [.cached, .cached])
        var info = stat()
        #expect(lstat(blob, &info) == 0)
        let row = try #require(cache.indexRow(sha256: name), "the first placement hashed the blob and wrote its row")
        #expect(row.describes(info) && row.sha512 == Self.sha512(Self.a))

        // Bytes changed behind the index's back, and a row written for them as if they had been
        // hashed: while the stat is the row's, a placement takes the blob for its name without
        // reading it back. (mirror writes a row only for bytes it hashed itself.)
        chmod(blob, 0o644)
        var damaged = Self.a
        damaged[7] ^= 0xFF
        try damaged.write(to: URL(fileURLWithPath: blob))
        chmod(blob, 0o444)
        #expect(lstat(blob, &info) == 0)
        cache.writeIndex(BlobCache.IndexRow(sha256: name, sha512: row.sha512, stat: info))
        let trusted = try await sync(root: "two", pinnedBy: .sha256)
        #expect(trusted.first?.action == .cached)
        #expect(contents("two/a.bin") == damaged, "the row vouched for the blob: it was not hashed")

        // Once its stat moves on (here its mtime), the blob is hashed at its next placement,
        // found wanting, quarantined with its row, and the file fetched.
        var times = [timespec(tv_sec: 1_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, blob, &times, 0) == 0)
        scenario.nginx.clearLog()
        let checked = try await sync(root: "three", pinnedBy: .sha256)
        #expect(checked.map(\.action) == [.download, .cached])
        #expect(contents("three/a.bin") == Self.a)
        #expect(try scenario.nginxRequests().map(\.uri) == ["/a.bin"])
        #expect(cache.indexRow(sha256: name)?.file == nil, "the quarantine took the row; the refill's knows the digests only")
        #expect(FileManager.default.contents(atPath: blob) == Self.a, "the download put the blob back")
    }

    @Test func aBlobWithNoRowIsHashedOnceAndThenTrusted() async throws {
        _ = try await sync(root: "one", pinnedBy: .sha256)
        try? FileManager.default.removeItem(atPath: cache.path + "/sha512")
        try? FileManager.default.removeItem(atPath: cache.path + "/index")
        #expect(cache.indexRow(sha256: Self.sha256(Self.b)) == nil)
        #expect(try await sync(root: "two", pinnedBy: .sha256).map(\.action) == [.cached, .cached])
        let blob = try #require(cache.blobPath(sha256: Self.sha256(Self.b)))
        var info = stat()
        #expect(lstat(blob, &info) == 0)
        let row = try #require(cache.indexRow(sha256: Self.sha256(Self.b)), "a placement that hashed the blob wrote its row")
        #expect(row.describes(info) && row.sha512 == nil, "its SHA-512 is not known from a SHA-256 pin's placement")
        // `cache verify` hashes every blob by both digests and writes each one's row and pointer.
        #expect(try cache.verify(try #require(cache.blobs().first { $0.sha256 == Self.sha256(Self.b) })) == nil)
        #expect(cache.indexRow(sha256: Self.sha256(Self.b))?.sha512 == Self.sha512(Self.b))
        #expect(cache.blobName(forPin: Self.sha512(Self.b)) == Self.sha256(Self.b))
    }

    @Test func theIndexFollowsItsBlobsOutOfTheCache() async throws {
        _ = try await sync(root: "one", pinnedBy: .sha256)
        _ = try await sync(root: "two", pinnedBy: .sha256)
        #expect(cache.indexRow(sha256: Self.sha256(Self.a)) != nil && cache.indexRow(sha256: Self.sha256(Self.b)) != nil)
        let a = Self.sha256(Self.a)
        let b = Self.sha256(Self.b)
        #expect(cache.quarantine(sha256: a) != nil)
        #expect(cache.indexRow(sha256: a) == nil, "a quarantined blob has no row")
        #expect(cache.blobName(forPin: Self.sha512(Self.a)) == a, "its pointer stays: a fact about bytes, not about that file")
        let eviction = try cache.evict(BlobCache.Limits(maxSize: 0), now: Int64(time(nil)), wait: true)
        #expect(eviction.evicted == [b])
        #expect(cache.indexRow(sha256: b) == nil && cache.blobName(forPin: Self.sha512(Self.b)) == nil, "an evicted blob leaves no row or pointer")

        // `cache add` indexes what it puts in by both digests.
        let file = try scenario.directory.write(Self.b, to: "usb/b.bin")
        #expect(try cache.add(file: file) == (b, true))
        #expect(cache.indexRow(sha256: b)?.sha512 == Self.sha512(Self.b) && cache.blobName(forPin: Self.sha512(Self.b)) == b)
    }

    @Test func aRowIsReadOnlyWhole() throws {
        var info = stat()
        info.st_size = 42
        info.st_ino = 7
        info.st_mtim = timespec(tv_sec: 1_700_000_000, tv_nsec: 123)
        info.st_ctim = timespec(tv_sec: 1_700_000_001, tv_nsec: 456)
        let row = BlobCache.IndexRow(sha256: Self.sha256(Self.a), sha512: Self.sha512(Self.a), stat: info)
        #expect(BlobCache.IndexRow(text: row.text) == row)
        #expect(row.describes(info))
        var later = info
        later.st_ctim.tv_nsec += 1
        #expect(!row.describes(later), "a ctime moved on is another file")
        for cut in [0, 10, row.text.utf8.count / 2, row.text.utf8.count - 5, row.text.utf8.count - 1] {
            #expect(BlobCache.IndexRow(text: String(row.text.prefix(cut))) == nil, "cut at \(cut)")
        }
        #expect(BlobCache.IndexRow(text: row.text.replacingOccurrences(of: "size 42", with: "size x")) == nil)
        #expect(BlobCache.IndexRow(text: row.text.replacingOccurrences(of: "inode 7\n", with: "")) == nil, "a file's state whole or not at all")
        let digestsOnly = BlobCache.IndexRow(sha256: Self.sha256(Self.a), sha512: Self.sha512(Self.a), stat: nil)
        #expect(BlobCache.IndexRow(text: digestsOnly.text) == digestsOnly && !digestsOnly.describes(info), "a fill's row vouches for nothing")
    }
}
