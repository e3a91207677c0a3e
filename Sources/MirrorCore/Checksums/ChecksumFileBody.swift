/// Holds a checksum file's body in memory, up to `limit` bytes: a file past that is no
/// checksum list, and the transfer is stopped rather than read on.
final class ChecksumFileBody: ResponseBodySink, @unchecked Sendable {
    /// 16 MiB: Debian's largest SHA256SUMS lists are a few hundred KiB.
    static let limit = 16 << 20

    private(set) var head: ResponseHead?
    private(set) var bytes: [UInt8] = []
    private(set) var tooLarge = false
    /// Why the reply was refused before its body (`ResponseHead.contradiction`).
    private(set) var contradiction: String?

    func begin(_ head: ResponseHead) -> BodyDisposition {
        self.head = head
        bytes = []
        contradiction = nil
        guard head.isSuccess else { return .discard }
        if let contradiction = head.contradiction {
            // Its lengths cannot be trusted, so a cut list might pass for a whole one.
            self.contradiction = contradiction
            return .abort
        }
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
