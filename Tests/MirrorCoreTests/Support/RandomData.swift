import Foundation

/// SplitMix64: a tiny, fast, deterministic generator. Same seed, same sequence, on every machine
/// and Swift version, which `SystemRandomNumberGenerator` cannot promise.
struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var mixed = state
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        return mixed ^ (mixed >> 31)
    }
}

/// `count` pseudo-random bytes that depend only on `seed`: test files whose content differs at
/// every offset (so a misplaced range shows up) and that two tests can regenerate independently.
func randomData(count: Int, seed: UInt64 = 0) -> Data {
    precondition(count >= 0, "randomData(count:) needs a non-negative count")
    var generator = SeededGenerator(seed: seed)
    var data = Data(count: count)
    data.withUnsafeMutableBytes { (bytes: UnsafeMutableRawBufferPointer) in
        var offset = 0
        while offset < count {
            // Little-endian so that the bytes do not depend on the host's byte order.
            let word = generator.next().littleEndian
            let take = min(8, count - offset)
            withUnsafeBytes(of: word) { wordBytes in
                bytes.baseAddress!.advanced(by: offset).copyMemory(from: wordBytes.baseAddress!, byteCount: take)
            }
            offset += take
        }
    }
    return data
}
