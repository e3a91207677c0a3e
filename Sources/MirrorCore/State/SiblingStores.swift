import Glibc

/// The other state stores of a root that a run reads, never writes, besides its own: what
/// another layout of runs has recorded about the same files.
///
/// - An unsharded run reads every shard's store (`state.shard-K-of-N.sqlite`), so nothing a
///   sharded run fetched is fetched again, and writes only `state.sqlite`.
/// - A shard reads the unsharded `state.sqlite`, so nothing an unsharded run fetched is
///   fetched again, and writes only its own store. It reads no other shard's store: those
///   hold other entries, and are being written while it runs.
struct SiblingStores: Sendable {
    var stores: [StateStore] = []
    var problems: [StateStoreProblem] = []

    static func open(in directory: StateDirectory, besides shard: ShardSelection?) -> SiblingStores {
        var siblings = SiblingStores()
        for name in names(in: directory, besides: shard) {
            let opening = StateStore.open(in: directory, mode: .readOnly, name: name)
            if let store = opening.store { siblings.stores.append(store) }
            if let problem = opening.problem { siblings.problems.append(problem) }
        }
        return siblings
    }

    func expect(entries: Int) {
        for store in stores { store.expect(entries: entries) }
    }

    func close() {
        for store in stores { store.close() }
    }

    /// The names of the stores to read, sorted.
    static func names(in stateDirectory: StateDirectory, besides shard: ShardSelection?) -> [String] {
        if shard != nil { return [StateStore.fileName] }
        let listed = try? stateDirectory.withDescriptor(create: false) { directory throws(TransferFailure) -> [String] in
            // An open file of its own: a dup would share the held descriptor's read position, and
            // every listing after the first would start at the end.
            let copy = openat(directory, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard copy >= 0, let stream = fdopendir(copy) else {
                if copy >= 0 { Glibc.close(copy) }
                return []
            }
            defer { closedir(stream) }
            var names: [String] = []
            while let item = readdir(stream) {
                let name = withUnsafeBytes(of: item.pointee.d_name) { raw in
                    String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
                }
                if isShardStoreName(name) { names.append(name) }
            }
            return names
        }
        return (listed ?? nil)?.sorted() ?? []
    }

    /// `state.shard-K-of-N.sqlite` with decimal K < N.
    static func isShardStoreName(_ name: String) -> Bool {
        guard name.hasPrefix("state.shard-"), name.hasSuffix(".sqlite") else { return false }
        let middle = name.dropFirst("state.shard-".count).dropLast(".sqlite".count)
        let parts = middle.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[1] == "of", let index = ShardSelection.decimal(parts[0]),
              let count = ShardSelection.decimal(parts[2]) else { return false }
        return ShardSelection(index: index, count: count) != nil
    }
}
