import CCrypto

/// Which shard an entry belongs to when shards are chosen by hash (`--shard-by count`, the
/// default): the first 8 bytes of the SHA-256 of the entry's `dest`, read as a big-endian
/// unsigned 64-bit number, modulo N.
///
/// `dest` is the destination as the manifest resolves it: relative to the root, normalised
/// (no `.`, `..` or empty components, no leading or trailing `/`), in its UTF-8 bytes exactly
/// as written (no Unicode normalisation). The hash of one entry depends on nothing else, so
/// adding or removing entries never moves another one to a different shard; changing N does.
///
/// This is a published format: scripts may compute it themselves
/// (`printf %s "$dest" | sha256sum`, first 16 hex digits, mod N). Never change it.
public enum ShardHash {
    /// The shard of `dest` among `count` shards (0 ..< count).
    public static func shard(ofDest dest: String, count: Int) -> Int {
        precondition(count >= 1, "a shard count is at least 1")
        return Int(key(ofDest: dest) % UInt64(count))
    }

    /// The first 8 bytes of SHA-256(dest), big-endian.
    public static func key(ofDest dest: String) -> UInt64 {
        OpenSSLSetup.done
        var text = dest
        // On the stack: one of these a manifest entry for every shard of every run.
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 64) { digest in
            var length: UInt32 = 0
            text.withUTF8 { input in
                _ = mirror_EVP_Digest(input.baseAddress, input.count, digest.baseAddress, &length, mirror_EVP_sha256())
            }
            var key: UInt64 = 0
            for byte in digest.prefix(8) { key = key << 8 | UInt64(byte) }
            return key
        }
    }
}
