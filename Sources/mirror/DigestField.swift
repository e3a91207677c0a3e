import MirrorCore

extension JSONValue {
    /// A file's digest as a JSON member named for its algorithm: `sha256`, or `sha512` for an
    /// entry pinned by SHA-512 (the hex's length says which); `sha256: null` when there is none.
    static func digestField(_ hex: String?, prefix: String = "") -> (String, JSONValue) {
        let algorithm = hex.flatMap(DigestAlgorithm.init(hexDigest:)) ?? .sha256
        return (prefix + algorithm.key, .string(hex))
    }
}
