import Foundation
import MirrorCore
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite struct RandomDataTests {
    @Test func isDeterministicPerSeed() {
        #expect(randomData(count: 1000, seed: 1) == randomData(count: 1000, seed: 1))
        #expect(randomData(count: 1000, seed: 1) != randomData(count: 1000, seed: 2))
    }

    @Test(arguments: [0, 1, 7, 8, 9, 4096, 100_003])
    func hasExactlyTheRequestedLength(count: Int) {
        #expect(randomData(count: count, seed: 3).count == count)
    }

    @Test func aShorterRunIsAPrefixOfALongerOne() {
        #expect(randomData(count: 1000, seed: 5) == randomData(count: 5000, seed: 5).prefix(1000))
    }

    @Test func isPinnedSoOtherTestsCanRelyOnIt() {
        // SplitMix64 from seed 0 starts with 0xE220A8397B1DCDAF, written little-endian.
        #expect(Array(randomData(count: 8, seed: 0)) == [0xAF, 0xCD, 0x1D, 0x7B, 0x39, 0xA8, 0x20, 0xE2])
    }
}

@Suite struct TemporaryDirectoryTests {
    @Test func isAPrivateDirectoryUnderTmp() throws {
        let directory = try TemporaryDirectory(prefix: "mirror-selftest")
        #expect(directory.path.hasPrefix("/tmp/mirror-selftest."))
        var info = stat()
        #expect(stat(directory.path, &info) == 0)
        #expect(info.st_mode & S_IFMT == S_IFDIR)
        #expect(info.st_mode & 0o777 == 0o700)
    }

    @Test func writesReadsAndListsNestedFiles() throws {
        let directory = try TemporaryDirectory()
        try directory.write(Data("a".utf8), to: "x/y/a.txt")
        try directory.write(Data("b".utf8), to: "b.txt")
        #expect(directory.contents(of: "x/y/a.txt") == Data("a".utf8))
        #expect(directory.contents(of: "missing") == nil)
        #expect(directory.listing() == ["b.txt", "x", "x/y", "x/y/a.txt"])
        #expect(directory.listing("x") == ["y", "y/a.txt"])
    }

    @Test func isRemovedExplicitlyOrWhenReleased() throws {
        let explicit = try TemporaryDirectory()
        try explicit.write(Data("a".utf8), to: "a/b")
        explicit.remove()
        #expect(!FileManager.default.fileExists(atPath: explicit.path))
        explicit.remove()

        var released: TemporaryDirectory? = try TemporaryDirectory()
        let path = released!.path
        try released!.write(Data(), to: "file")
        released = nil
        #expect(!FileManager.default.fileExists(atPath: path))
    }
}

/// `WholeFile.read` returns a /proc file whole, past its first page: with 300 connections open,
/// /proc/net/tcp holds more than 600 lines, and every one of them is read.
@Test func aProcFileIsReadWhole() throws {
    let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    #expect(listener >= 0)
    defer { close(listener) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) } }
    #expect(listen(listener, 512) == 0)
    _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) } }
    var clients: [Int32] = []
    defer { clients.forEach { close($0) } }
    for _ in 0..<300 {
        let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        clients.append(client)
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(client, $0, length) } }
    }
    let table = String(decoding: try WholeFile.read(path: "/proc/net/tcp"), as: UTF8.self)
    let lines = table.split(separator: "\n").count
    #expect(table.utf8.count > 4096 && lines > 600, "\(lines) lines, \(table.utf8.count) bytes")
    #expect(table.hasSuffix("\n"))
}
