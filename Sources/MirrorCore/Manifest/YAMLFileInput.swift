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
