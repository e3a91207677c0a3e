import Foundation
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
