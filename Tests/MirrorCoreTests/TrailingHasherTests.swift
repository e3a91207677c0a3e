import Foundation
import Glibc
import Testing
@testable import MirrorCore

/// The hasher beside `PartialFileWriter`: the digest is of the bytes as written (handed over
/// from the write buffer), a resumed file's prefix is read from disk before them, and memory
/// past the budget is read back instead of held.
struct TrailingHasherTests {
    /// An open `.part` file in a fresh directory, holding `prefix`.
    private final class PartFile {
        let directory: TemporaryDirectory
        let path: String
        let fd: Int32

        init(prefix: Data = Data()) throws {
            directory = try TemporaryDirectory()
            path = try directory.write(prefix, to: "file.part")
            fd = open(path, O_RDWR)
            guard fd >= 0 else { throw SystemCallError("open \(path)") }
        }

        deinit { close(fd) }

        /// Overwrites `[offset, offset + count)` on disk behind the writer's back.
        func scribble(at offset: Int, count: Int) {
            let junk = [UInt8](repeating: 0xA5, count: count)
            _ = junk.withUnsafeBytes { pwrite(fd, $0.baseAddress, count, off_t(offset)) }
        }
    }

    /// Sends `body` through a writer the way libcurl hands it over (16 KiB at a time) as the
    /// reply `head` to a request from `offset`.
    private func receive(
        _ body: Data, head: ResponseHead, into file: PartFile, from offset: Int64 = 0, expectedTotal: Int64?,
        hasher: TrailingHasher
    ) throws {
        let writer = PartialFileWriter(
            fd: file.fd, path: file.path, requestedOffset: offset, expectedTotal: expectedTotal, pinnedSize: nil,
            maxSize: nil, hasher: hasher, progress: nil)
        #expect(writer.begin(head) == .write)
        try writer.receive(body)
        try #require(writer.failure == nil)
    }

    private func okay(_ count: Int) -> ResponseHead {
        ResponseHead(status: 200, fields: [("Content-Length", "\(count)")])
    }

    /// The two algorithms against FIPS 180-2's "abc" answers.
    @Test func digestHasherKnowsSHA256AndSHA512() {
        #expect(DigestHasher.hex(of: Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(DigestHasher.hex(of: Array("abc".utf8), .sha512) == """
            ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a\
            2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f
            """)
    }

    /// A SHA-512 entry's bytes are hashed as written in SHA-512, on the hasher's thread too.
    @Test(arguments: [20_000, (3 << 20) + 123])
    func sha512DigestIsOfTheBytesWritten(size: Int) throws {
        let file = try PartFile()
        let memory = HashingMemory(limit: 64 << 20)
        let hasher = TrailingHasher(fd: file.fd, path: file.path, algorithm: .sha512, memory: memory)
        let body = randomData(count: size, seed: 42)
        try receive(body, head: okay(size), into: file, expectedTotal: Int64(size), hasher: hasher)
        #expect(try hasher.finish(size: Int64(size)) == DigestHasher.hex(of: body, .sha512))
    }

    /// 20 000 bytes: copied, hashed in `finish`; 3 MiB and a bit: write buffers handed over
    /// and hashed on the hasher's thread.
    @Test(arguments: [20_000, (3 << 20) + 123])
    func digestIsOfTheBytesWrittenEvenWhenTheFileChangesBehindIt(size: Int) throws {
        let file = try PartFile()
        let memory = HashingMemory(limit: 64 << 20)
        let hasher = TrailingHasher(fd: file.fd, path: file.path, memory: memory)
        let body = randomData(count: size, seed: 41)
        try receive(body, head: okay(size), into: file, expectedTotal: Int64(size), hasher: hasher)
        // Whatever the file says now, the bytes written were `body`.
        file.scribble(at: 0, count: size)
        #expect(try hasher.finish(size: Int64(size)) == DigestHasher.hex(of: body))
        #expect(memory.inUse == 0)
    }

    /// The prefix is below and above the size that starts the hasher's thread at once.
    @Test(arguments: [100_000, (5 << 19) + 7])
    func aResumedFilesPrefixIsHashedFromDiskBeforeTheNewBytes(prefixSize: Int) throws {
        let whole = randomData(count: prefixSize + (2 << 20) + 99, seed: 42)
        let prefix = whole.prefix(prefixSize)
        let rest = whole.dropFirst(prefixSize)
        let file = try PartFile(prefix: prefix)
        let memory = HashingMemory(limit: 64 << 20)
        let hasher = TrailingHasher(fd: file.fd, path: file.path, memory: memory)
        hasher.advance(to: Int64(prefixSize))
        let head = ResponseHead(status: 206, fields: [
            ("Content-Range", "bytes \(prefixSize)-\(whole.count - 1)/\(whole.count)"),
            ("Content-Length", "\(rest.count)"),
        ])
        try receive(rest, head: head, into: file, from: Int64(prefixSize), expectedTotal: Int64(whole.count), hasher: hasher)
        // The new bytes come from memory, whatever happens to them on disk.
        file.scribble(at: prefixSize, count: rest.count)
        #expect(try hasher.finish(size: Int64(whole.count)) == DigestHasher.hex(of: whole))
        #expect(memory.inUse == 0)
    }

    @Test func aResumeAnsweredWithTheWholeFileIsHashedFromItsFirstByte() throws {
        let old = randomData(count: 2 << 20, seed: 43)
        let new = randomData(count: (3 << 20) + 5, seed: 44)
        let file = try PartFile(prefix: old)
        let hasher = TrailingHasher(fd: file.fd, path: file.path, memory: HashingMemory(limit: 64 << 20))
        hasher.advance(to: Int64(old.count))
        try receive(new, head: okay(new.count), into: file, from: Int64(old.count), expectedTotal: nil, hasher: hasher)
        #expect(try hasher.finish(size: Int64(new.count)) == DigestHasher.hex(of: new))
    }

    /// However far the hash falls behind, a file's writer waits rather than queue more than
    /// `queueLimit` (plus the block being hashed and the one handed back).
    @Test func aWritersQueueForHashingStaysUnderItsLimit() throws {
        let file = try PartFile()
        let memory = HashingMemory(limit: 1 << 30)
        let hasher = TrailingHasher(fd: file.fd, path: file.path, memory: memory)
        let body = randomData(count: 24 << 20, seed: 48)
        let writer = PartialFileWriter(
            fd: file.fd, path: file.path, requestedOffset: 0, expectedTotal: Int64(body.count), pinnedSize: nil,
            maxSize: nil, hasher: hasher, progress: nil)
        #expect(writer.begin(okay(body.count)) == .write)
        var most = 0
        body.withUnsafeBytes { bytes in
            for start in stride(from: 0, to: bytes.count, by: 16384) {
                _ = writer.write(UnsafeRawBufferPointer(rebasing: bytes[start..<min(bytes.count, start + 16384)]))
                most = max(most, memory.inUse)
            }
        }
        writer.end()
        #expect(most <= TrailingHasher.queueLimit + 2 * PartialFileWriter.bufferSize)
        #expect(try hasher.finish(size: Int64(body.count)) == DigestHasher.hex(of: body))
    }

    /// With no memory to spare every chunk is read back; with a little, some are.
    @Test(arguments: [0, (3 << 20) / 2])
    func bytesPastTheMemoryBudgetAreReadBack(limit: Int) throws {
        let file = try PartFile()
        let memory = HashingMemory(limit: limit)
        let hasher = TrailingHasher(fd: file.fd, path: file.path, memory: memory)
        let body = randomData(count: (6 << 20) + 1, seed: 45)
        try receive(body, head: okay(body.count), into: file, expectedTotal: Int64(body.count), hasher: hasher)
        #expect(memory.inUse <= limit)
        #expect(try hasher.finish(size: Int64(body.count)) == DigestHasher.hex(of: body))
        #expect(memory.inUse == 0)
    }

    /// Before the thread starts (a small file) and while it runs (a large one).
    @Test(arguments: [20_000, 4 << 20])
    func abandonStopsHashingAndFreesTheMemory(size: Int) throws {
        let file = try PartFile()
        let memory = HashingMemory(limit: 64 << 20)
        let hasher = TrailingHasher(fd: file.fd, path: file.path, memory: memory)
        try receive(randomData(count: size, seed: 46), head: okay(size), into: file, expectedTotal: Int64(size), hasher: hasher)
        hasher.abandon()
        #expect(memory.inUse == 0)
        // Abandoned: it takes no more bytes, and a second abandon returns at once.
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { buffer.deallocate() }
        #expect(hasher.hash(handingOver: buffer, count: 1 << 20, endingAt: Int64(size + (1 << 20))).baseAddress == buffer.baseAddress)
        hasher.abandon()
        #expect(memory.inUse == 0)
    }

    @Test func aFileShorterThanItsSizeIsAMismatchNotADigest() throws {
        let file = try PartFile(prefix: randomData(count: 1000, seed: 47))
        let hasher = TrailingHasher(fd: file.fd, path: file.path, memory: HashingMemory(limit: 64 << 20))
        #expect(throws: TransferFailure.sizeMismatch(expected: 2000, actual: 1000)) {
            try hasher.finish(size: 2000)
        }
    }
}
