import Foundation

/// A short, comparable stand-in for a byte buffer: its length, a 64-bit FNV-1a hash and its
/// first bytes. Tests compare fingerprints instead of `Data` because a failed `#expect(a == b)`
/// on two collections makes Swift Testing compute their difference, which for megabytes of
/// unequal bytes runs for hours; a fingerprint fails instantly with a readable message.
struct DataFingerprint: Equatable, Sendable, CustomStringConvertible {
    var count: Int
    var hash: UInt64
    var head: String

    init(_ data: Data) {
        count = data.count
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in data {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3
        }
        self.hash = hash
        head = data.prefix(8).map { String(format: "%02x", $0) }.joined()
    }

    var description: String {
        "\(count) bytes, fnv1a \(String(hash, radix: 16)), starting \(head)"
    }
}

extension Data {
    /// See `DataFingerprint`: compare these in expectations, not the bytes.
    var fingerprint: DataFingerprint { DataFingerprint(self) }
}
