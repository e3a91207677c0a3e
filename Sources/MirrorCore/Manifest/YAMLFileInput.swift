import CYAML
import Glibc

/// A regular file that libyaml reads as it needs the text, through `pread` from the file's
/// start, so that the text is never held in memory whole. It refuses to read more than
/// `limit` bytes. Each reading of the file takes a new one.
final class YAMLFileInput {
    enum Failure {
        case system(errno: Int32)
        /// Larger than `limit` bytes.
        case tooLarge(limit: Int)
    }

    let descriptor: Int32
    /// The file's size when it was opened, for estimates; it may change while it is read.
    let size: Int
    let limit: Int
    /// Bytes handed to libyaml so far.
    private(set) var taken = 0
    /// Why the last read failed; libyaml itself reports only "input error".
    private(set) var failure: Failure?
    /// A checksum of the bytes handed to libyaml, so that two readings can tell whether they
    /// read the same text (`ManifestEntryStream`).
    private(set) var checksum = TextChecksum()

    init(descriptor: Int32, size: Int, limit: Int) {
        self.descriptor = descriptor
        self.size = size
        self.limit = limit
    }

    /// libyaml's read handler; `data` is the input, unretained.
    static let readHandler: @convention(c) (
        UnsafeMutableRawPointer?, UnsafeMutablePointer<UInt8>?, Int, UnsafeMutablePointer<Int>?
    ) -> Int32 = { data, buffer, size, sizeRead in
        guard let data, let buffer, let sizeRead else { return 0 }
        let input = Unmanaged<YAMLFileInput>.fromOpaque(data).takeUnretainedValue()
        return input.read(into: buffer, count: size, sizeRead: sizeRead) ? 1 : 0
    }

    private func read(into buffer: UnsafeMutablePointer<UInt8>, count: Int, sizeRead: UnsafeMutablePointer<Int>) -> Bool {
        while true {
            let read = pread(descriptor, buffer, count, off_t(taken))
            if read < 0 {
                if errno == EINTR { continue }
                failure = .system(errno: errno)
                return false
            }
            taken += read
            checksum.add(UnsafeRawBufferPointer(start: buffer, count: read))
            if taken > limit {
                failure = .tooLarge(limit: limit)
                return false
            }
            sizeRead.pointee = read
            return true
        }
    }

    /// The first `count` bytes of the file (fewer if it is shorter now).
    func prefix(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let read = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress! + filled, count - filled, off_t(filled)) }
            if read < 0, errno == EINTR { continue }
            if read <= 0 { break }
            filled += read
        }
        return Array(bytes[..<filled])
    }
}

/// A 64-bit checksum of a text given in pieces, whatever their boundaries: 8 bytes at a time,
/// multiplied and mixed, the bytes left over carried to the next piece. Not a cryptographic
/// digest: it tells two readings of one file apart when the file changed between them.
struct TextChecksum: Equatable {
    private var state: UInt64 = 0x9E37_79B9_7F4A_7C15
    private var carried: UInt64 = 0
    private var carriedCount = 0
    private var length = 0

    mutating func add(_ bytes: UnsafeRawBufferPointer) {
        length += bytes.count
        var index = 0
        while carriedCount > 0, carriedCount < 8, index < bytes.count {
            carried |= UInt64(bytes[index]) << (8 * UInt64(carriedCount))
            carriedCount += 1
            index += 1
        }
        if carriedCount == 8 {
            mix(carried)
            carried = 0
            carriedCount = 0
        }
        while index + 8 <= bytes.count {
            mix(bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self))
            index += 8
        }
        while index < bytes.count {
            carried |= UInt64(bytes[index]) << (8 * UInt64(carriedCount))
            carriedCount += 1
            index += 1
        }
    }

    /// The checksum of everything added.
    var value: UInt64 {
        var copy = self
        copy.mix(carried ^ UInt64(length) << 3)
        return copy.state
    }

    private mutating func mix(_ word: UInt64) {
        state = (state ^ word) &* 0xBF58_476D_1CE4_E5B9
        state ^= state >> 29
    }
}
