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

    /// 8 MiB: room for the queues of four large files at once (`TrailingHasher.queueLimit`
    /// each), and for what arrives while a resumed file's prefix is read back. Past it a
    /// chunk is read back from the page cache, a copy that costs about a tenth of hashing it;
    /// holding more would only grow the resident set (a 1 GiB download stays under 30 MiB).
    static let shared = HashingMemory(limit: 8 << 20)

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
