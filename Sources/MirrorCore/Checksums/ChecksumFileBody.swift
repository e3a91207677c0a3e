/// Holds a checksum file's body in memory, up to `limit` bytes: a file past that is no
/// checksum list, and the transfer is stopped rather than read on.
final class ChecksumFileBody: ResponseBodySink, @unchecked Sendable {
    /// 16 MiB: Debian's largest SHA256SUMS lists are a few hundred KiB.
    static let limit = 16 << 20

    private(set) var head: ResponseHead?
    private(set) var bytes: [UInt8] = []
    private(set) var tooLarge = false

    func begin(_ head: ResponseHead) -> BodyDisposition {
        self.head = head
        bytes = []
        guard head.isSuccess else { return .discard }
        if let length = head.contentLength, length > Self.limit {
            tooLarge = true
            return .abort
        }
        return .write
    }

    func write(_ chunk: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count + chunk.count <= Self.limit else {
            tooLarge = true
            return false
        }
        bytes.append(contentsOf: chunk)
        return true
    }
}
