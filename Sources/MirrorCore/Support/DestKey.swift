/// A dest (or any path) as a dictionary key: its UTF-8 bytes, compared and hashed as bytes (in
/// one call, not one per byte as an array of them would be). Not `String`'s own equality, which
/// is Unicode's canonical equivalence: `café` written precomposed and decomposed are one
/// `String` but two names on Linux, two files, two records.
struct DestKey: Hashable, Sendable {
    let bytes: [UInt8]

    init(_ dest: String) {
        bytes = Array(dest.utf8)
    }

    func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }
}
