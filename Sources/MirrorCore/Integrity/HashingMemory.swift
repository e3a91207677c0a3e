import Synchronization

/// The memory that written bytes may hold while they wait to be hashed, shared by every file
/// a process downloads at once: past `limit`, a `TrailingHasher` keeps no more bytes and reads
/// the rest back from the file instead, so a hasher that falls behind neither stalls the
/// transfer thread nor grows without bound (at `concurrency: 64`, per-file budgets would add
/// up to gigabytes).
final class HashingMemory: Sendable {
    /// The bytes all hashers together may hold.
    let limit: Int
    private let held = Atomic<Int>(0)

    /// 32 MiB: SHA-256 runs at 1.5–2 GB/s here, faster than loopback HTTP delivers; a few
    /// 1 MiB write buffers in flight per file are all a hasher that keeps up needs, and 32 MiB
    /// still covers tens of milliseconds of lag of several large files at once. Beyond that,
    /// reading back from the page cache costs a copy, not a disk read.
    static let shared = HashingMemory(limit: 32 << 20)

    init(limit: Int) {
        self.limit = limit
    }

    /// Bytes held now.
    var inUse: Int { held.load(ordering: .relaxed) }

    /// Takes `bytes` from the budget; false, taking nothing, if that would pass `limit`.
    func reserve(_ bytes: Int) -> Bool {
        let after = held.add(bytes, ordering: .relaxed).newValue
        guard after <= limit else {
            held.subtract(bytes, ordering: .relaxed)
            return false
        }
        return true
    }

    /// Gives `bytes` back.
    func release(_ bytes: Int) {
        held.subtract(bytes, ordering: .relaxed)
    }
}
