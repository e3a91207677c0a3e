import CCrypto
import Glibc

/// Incremental SHA-256 or SHA-512 over OpenSSL's libcrypto.
final class DigestHasher {
    private let context: OpaquePointer
    let algorithm: DigestAlgorithm

    init(_ algorithm: DigestAlgorithm = .sha256) {
        OpenSSLSetup.done
        guard let context = mirror_EVP_MD_CTX_new() else { fatalError("EVP_MD_CTX_new failed: out of memory") }
        self.context = context
        self.algorithm = algorithm
        mirror_EVP_DigestInit_ex(context, algorithm.evp)
    }

    deinit {
        mirror_EVP_MD_CTX_free(context)
    }

    func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        mirror_EVP_DigestUpdate(context, base, bytes.count)
    }

    /// Starts over, as if no bytes had been seen.
    func reset() {
        mirror_EVP_DigestInit_ex(context, algorithm.evp)
    }

    /// The digest as lowercase hex digits (64 or 128). The hasher must not be used afterwards.
    func finalize() -> String {
        var digest = [UInt8](repeating: 0, count: algorithm.hexLength / 2)
        var length: UInt32 = 0
        mirror_EVP_DigestFinal_ex(context, &digest, &length)
        return Self.hex(digest)
    }

    /// The digest of bytes in memory.
    static func hex(of bytes: some Sequence<UInt8>, _ algorithm: DigestAlgorithm = .sha256) -> String {
        let hasher = DigestHasher(algorithm)
        let array = Array(bytes)
        array.withUnsafeBytes { hasher.update($0) }
        return hasher.finalize()
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text = [UInt8]()
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// Feeds the first `length` bytes of the open file `fd` into the hasher.
    func update(fileDescriptor fd: Int32, length: Int64, path: String) throws(TransferFailure) {
        try FileSystem.forEachChunk(of: fd, path: path, length: length) { update($0) }
    }
}
