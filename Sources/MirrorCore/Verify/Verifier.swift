import Dispatch
import Synchronization

/// The result of checking one entry's local file offline (`mirror verify`).
public struct VerifiedEntry: Sendable, Equatable {
    public enum Status: String, Sendable {
        /// Matches its pins, or what mirror recorded when it wrote it.
        case ok
        /// `DEST` does not exist.
        case missing
        /// Contradicts a pin (size, sha256 or sha512), or is not a regular file.
        case mismatch
        /// Has other bytes than when mirror wrote it, and nothing pins it.
        case modified
        /// Exists, but there is neither a pin nor a record to check it against.
        case unverified
    }

    public var dest: String
    public var status: Status
    public var size: Int64?
    /// The file's digest, lowercase hex: SHA-256, or SHA-512 (128 digits) for an entry pinned
    /// by one (see `DigestAlgorithm`).
    public var sha256: String?
    /// Whether the hash was taken from the state store rather than computed now.
    public var hashFromStore: Bool
    public var detail: String?

    public var isProblem: Bool { status == .missing || status == .mismatch || status == .modified }
}

/// `mirror verify`: checks every entry's local file against its pins and the state store,
/// without any network request and without writing anything. Checksum files (`checksums:`)
/// are not fetched: an entry pinned only by one is checked against the digest mirror recorded
/// after it verified the download against that file. A hash recorded in the store is
/// reused while the file's size, mtime and inode are unchanged, unless `rehash` is set.
public struct Verifier: Sendable {
    public let manifest: Manifest
    let options: RunOptions
    let rootDirectory: RootDirectory
    let stateDirectory: StateDirectory
    /// Hashing blocks in the kernel: on threads of its own, not the cooperative pool.
    let blocking: BlockingPool

    public init(manifest: Manifest, options: RunOptions) {
        self.manifest = manifest
        self.options = options
        rootDirectory = RootDirectory(path: manifest.root)
        stateDirectory = StateDirectory(root: rootDirectory, separate: manifest.stateDirectory)
        // One thread more than the workers: the store's read runs beside all of them.
        blocking = BlockingPool(limit: options.concurrency + 1)
    }

    /// Every entry's verdict, in manifest order.
    public func verify(rehash: Bool) async -> [VerifiedEntry] {
        let collected = Mutex<[VerifiedEntry]>([])
        collected.withLock { $0.reserveCapacity(manifest.entries.count) }
        // The manifest's own entries: no stream, so nothing to throw.
        try? await verify(rehash: rehash, stream: nil) { results in collected.withLock { $0 += results } }
        return collected.withLock { $0 }
    }

    /// Hands every entry's verdict to `deliver`, a batch at a time, in manifest order: the
    /// manifest's entries, or those of `stream` (`ManifestLoader.loadStreaming`), which are read
    /// as the workers go and never held all at once.
    ///
    /// - Throws: `ManifestError` when the stream's file changed since it was checked; the
    ///   entries before were delivered.
    public func verify(
        rehash: Bool, stream: ManifestEntryStream?, deliver: @escaping @Sendable ([VerifiedEntry]) -> Void
    ) async throws(ManifestError) {
        let count = stream?.count ?? manifest.entries.count
        let opening = StateStore.open(in: stateDirectory, mode: .readOnly, shard: manifest.shard)
        if let problem = opening.problem { options.events?(.stateStoreProblem(problem)) }
        let store = opening.store
        let siblings = SiblingStores.open(in: stateDirectory, besides: manifest.shard)
        for problem in siblings.problems { options.events?(.stateStoreProblem(problem)) }
        if stream == nil {
            // Then each store's rows are read whole, beside the workers. Not for a streamed
            // manifest: its records would be as many as the entries the stream does not hold
            // (10,000,000 rows, gigabytes); they are looked up one at a time instead.
            store?.expect(entries: count)
            siblings.expect(entries: count)
        }
        defer { siblings.close() }
        for leftover in PruneTrash.pending(in: rootDirectory, stores: [store].compactMap { $0 } + siblings.stores) {
            options.events?(.pruneLeftover(leftover))
        }
        guard count > 0 else { return }
        // `concurrency` workers on the blocking pool, each taking the next batch of entries
        // until none is left: one hop to the pool per worker, not one per entry (a hop and back
        // cost about six futex calls an entry, most of a no-hash verify's time).
        let workers = min(max(options.concurrency, 1), count)
        let order = VerifyResultOrder(deliver: deliver)
        let feed = stream.map {
            VerifyFeed(stream: $0, batchSize: Self.batchSize, queued: 4 * workers, window: Self.window, order: order)
        } ?? VerifyFeed(entries: manifest.entries, batchSize: min(Self.batchSize, max(1, count / (4 * workers))))
        // The store is read whole (it blocks: on a pool thread) while the workers look at the
        // disk: each looks at the entries it takes until the records are there, then judges
        // those, then looks at and judges each next one. 1,000,000 entries: the two seconds of
        // reading the store were two seconds of the run on their own.
        let records = RecordsLoading()
        blocking.submit { records.finish(Records(store: store, siblings: siblings)) }
        _ = await boundedMap(Array(0..<workers), width: workers) { _ in
            await blocking.run {
                // A streamed manifest's records are looked up a row at a time (above): each
                // worker through connections of its own, not all through one store's lock (16
                // workers meeting on it: 1,000,000 entries in 37 s instead of 8).
                let own = stream == nil ? nil : Records.opened(in: stateDirectory, shard: manifest.shard)
                defer { own?.close() }
                let reader = DirectoryReader(root: rootDirectory)
                func look(_ paths: DestinationPaths) -> Result<LocalFacts, TransferFailure> {
                    Result { () throws(TransferFailure) in try reader.inspectDestinationFirst(paths) }
                }
                // Batches looked at before the records were there, and what was found.
                var looked: [(batch: VerifyFeed.Batch, local: [Result<LocalFacts, TransferFailure>])] = []
                var lookedCount = 0
                func judgeLooked() {
                    let loaded = own ?? records.wait()
                    for (batch, local) in looked {
                        order.finished(batch: batch.number, zip(batch.entries, local).map { entry, local in
                            judge(entry, paths: nil, local: local, records: loaded, rehash: rehash)
                        })
                    }
                    looked = []
                    lookedCount = 0
                }
                while true {
                    // A worker holding looked batches never waits for another: what it holds may
                    // be what the stream waits on to go on.
                    let taken = feed.take(wait: looked.isEmpty)
                    guard case .batch(let batch) = taken else {
                        if case .finished = taken, looked.isEmpty { break }
                        judgeLooked()
                        continue
                    }
                    if !records.isReady, lookedCount < Self.lookAhead {
                        looked.append((batch, batch.entries.map { look(manifest.paths(for: $0)) }))
                        lookedCount += batch.entries.count
                        continue
                    }
                    if !looked.isEmpty { judgeLooked() }
                    let loaded = own ?? records.wait()
                    order.finished(batch: batch.number, batch.entries.map { entry in
                        let paths = manifest.paths(for: entry)
                        return judge(entry, paths: paths, local: look(paths), records: loaded, rehash: rehash)
                    })
                }
                return 0
            }
        }
        if let failure = feed.failure { throw failure }
    }

    /// Entries a worker takes at once: one step of a shared counter, or one semaphore, a batch.
    static let batchSize = 256
    /// Batches the stream may be read ahead of the results delivered.
    static let window = 1024

    /// The stores' records, each store's read whole at the start when it is not much larger
    /// than the manifest (`StateStore.snapshot`), else a row at a time through its lock. A
    /// record that cannot be read counts as none.
    private struct Records: Sendable {
        let store: StateStore?
        let snapshot: RecordSnapshot?
        let siblings: [(store: StateStore, snapshot: RecordSnapshot?)]
        /// The siblings `opened` opened, to close; nil for the run's own.
        private let siblingStores: SiblingStores?

        init(store: StateStore?, siblings: SiblingStores) {
            self.store = store
            snapshot = store?.snapshot()
            self.siblings = siblings.stores.map { ($0, $0.snapshot()) }
            siblingStores = nil
        }

        /// The stores opened again, read-only, for one worker's lookups a row at a time; their
        /// problems were said when the run opened them.
        static func opened(in directory: StateDirectory, shard: ShardSelection?) -> Records {
            Records(store: StateStore.open(in: directory, mode: .readOnly, shard: shard).store,
                    rowByRow: SiblingStores.open(in: directory, besides: shard))
        }

        private init(store: StateStore?, rowByRow siblings: SiblingStores) {
            self.store = store
            snapshot = nil
            self.siblings = siblings.stores.map { ($0, nil) }
            siblingStores = siblings
        }

        /// Closes what `opened` opened.
        func close() {
            guard let siblingStores else { return }
            store?.close()
            siblingStores.close()
        }

        func own(_ dest: String) -> StateRecord? {
            if let snapshot { return snapshot.record(for: dest) }
            return (try? store?.record(for: dest)) ?? nil
        }

        func siblings(_ dest: String) -> [StateRecord] {
            siblings.compactMap { sibling in
                if let snapshot = sibling.snapshot { return snapshot.record(for: dest) }
                return (try? sibling.store.record(for: dest)) ?? nil
            }
        }
    }

    /// The records, once read, for the workers that wait for them.
    private final class RecordsLoading: @unchecked Sendable {
        private let ready = Atomic<Bool>(false)
        private let loaded = Mutex<Records?>(nil)
        private let arrived = DispatchGroup()

        init() {
            arrived.enter()
        }

        var isReady: Bool { ready.load(ordering: .acquiring) }

        func finish(_ records: Records) {
            loaded.withLock { $0 = records }
            ready.store(true, ordering: .releasing)
            arrived.leave()
        }

        func wait() -> Records {
            arrived.wait()
            return loaded.withLock { $0! }
        }
    }

    /// Entries a worker looks at before the records are there, at most: what it found of each
    /// (about 100 bytes) waits for them, 26 MB for 8 workers. 1,000,000 entries, the store read
    /// on one of the workers' threads: 8.7-9.2 s with this bound, 8.6-9.0 s with none (and 100
    /// MB more), 11.5-11.7 s without looking ahead.
    static let lookAhead = 1 << 15

    /// The verdict on `entry` from what a look at the disk found (the partial file only where
    /// `DEST` is missing, to say that there is one) and the records; `paths` are its paths,
    /// made again when nil and needed.
    private func judge(
        _ entry: Entry, paths known: DestinationPaths?, local looked: Result<LocalFacts, TransferFailure>, records: Records, rehash: Bool
    ) -> VerifiedEntry {
        var result = VerifiedEntry(dest: entry.dest, status: .ok, size: nil, sha256: nil, hashFromStore: false, detail: nil)
        let local: LocalFacts
        switch looked {
        case .success(let facts):
            local = facts
        case .failure(let error):
            result.status = .mismatch
            result.detail = error.description
            return result
        }
        switch local.destination {
        case .missing:
            result.status = .missing
            if let partial = local.partial.size { result.detail = "a partial download of \(partial) bytes exists" }
            return result
        case .other(let kind):
            result.status = .mismatch
            result.detail = "the destination is \(kind)"
            return result
        case .file(let size):
            result.size = size
        }
        let record = StateRecord.chosen(own: records.own(entry.dest), siblings: records.siblings(entry.dest), onDisk: local.destinationIdentity)
        let verified = Planner.verifiedVersion(local: local, state: record)
        // The pin's algorithm; without a pin (an entry pinned by its checksum file at sync
        // time), the one mirror recorded the file's digest in.
        let recordedDigest = record?.complete?.sha256
        let algorithm = entry.digest != nil ? entry.digestAlgorithm : recordedDigest.flatMap(DigestAlgorithm.init(hexDigest:)) ?? .sha256
        let name = algorithm.key
        if !rehash, let cached = verified?.sha256, DigestAlgorithm(hexDigest: cached) == algorithm {
            result.sha256 = cached
            result.hashFromStore = true
        } else {
            do {
                result.sha256 = try rootDirectory.digestOfDestination(known ?? manifest.paths(for: entry), algorithm)
            } catch {
                result.status = .mismatch
                result.detail = error.description
                return result
            }
        }
        if let pinned = entry.size, pinned != result.size {
            result.status = .mismatch
            result.detail = "size is \(result.size ?? 0) bytes; the manifest pins \(pinned)"
            return result
        }
        if let pin = entry.digest {
            if pin != result.sha256 {
                result.status = .mismatch
                result.detail = "\(name) is \(result.sha256 ?? "?"); the manifest pins \(pin)"
            }
            return result
        }
        if let complete = record?.complete {
            if let recorded = complete.sha256, recorded != result.sha256 {
                result.status = .modified
                result.detail = "\(name) is \(result.sha256 ?? "?"); mirror wrote \(recorded)"
            } else if complete.sha256 == nil, verified == nil {
                result.status = .unverified
                result.detail = "changed on disk since mirror recorded it, and no hash was recorded"
            }
            return result
        }
        if entry.size == nil {
            result.status = .unverified
            result.detail = "no sha256, sha512 or size pin and no record in the state store"
        }
        return result
    }
}
