import CCrypto

/// The hash functions a pin may name. A digest travels as lowercase hex, whose length names
/// its algorithm (64 digits: SHA-256, 128: SHA-512), so a digest recorded for one algorithm is
/// never taken for the other's.
public enum DigestAlgorithm: String, Sendable, CaseIterable {
    case sha256
    case sha512

    /// Hexadecimal digits in a digest.
    public var hexLength: Int {
        switch self {
        case .sha256: 64
        case .sha512: 128
        }
    }

    /// The algorithm whose digests have as many hex digits as `hexDigest`; nil for any other length.
    public init?(hexDigest: String) {
        guard let algorithm = Self.allCases.first(where: { $0.hexLength == hexDigest.utf8.count }) else { return nil }
        self = algorithm
    }

    /// The manifest key and JSON field of a digest of this algorithm (`sha256`, `sha512`).
    public var key: String { rawValue }

    /// The name checksum files use in their BSD form (`SHA256 (name) = …`).
    var bsdTag: String { rawValue.uppercased() }

    var evp: OpaquePointer {
        switch self {
        case .sha256: mirror_EVP_sha256()
        case .sha512: mirror_EVP_sha512()
        }
    }
}
