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
        let siblings = SiblingStores.open(in: stateDirectory, besides: manifest.shard)
        for problem in siblings.problems { options.events?(.stateStoreProblem(problem)) }
        for leftover in PruneTrash.pending(in: rootDirectory, stores: [opening.store].compactMap { $0 } + siblings.stores) {
            options.events?(.pruneLeftover(leftover))
        }
        // The workers open the stores again, each for itself (below); these were for their
        // problems and what a prune left.
        opening.store?.close()
        siblings.close()
        guard count > 0 else { return }
        // `concurrency` workers on the blocking pool, each taking the next batch of entries
        // until none is left: one hop to the pool per worker, not one per entry (a hop and back
        // cost about six futex calls an entry, most of a no-hash verify's time).
        let workers = min(max(options.concurrency, 1), count)
        let order = VerifyResultOrder(deliver: deliver)
        let feed = stream.map {
            VerifyFeed(stream: $0, batchSize: Self.batchSize, queued: 4 * workers, window: Self.window, order: order)
        } ?? VerifyFeed(entries: manifest.entries, batchSize: min(Self.batchSize, max(1, count / (4 * workers))))
        _ = await boundedMap(Array(0..<workers), width: workers) { _ in
            await blocking.run {
                // Each worker looks the records up a row at a time, through read-only
                // connections to the stores of its own. Every store read whole first held
                // 1,030 MiB for 1,000,000 entries (and would hold gigabytes for a streamed
                // manifest of ten million); one connection's lock shared by 16 workers took
                // 37 s. Its own: 315 MiB and 6.3 s for the million (7.6 s read whole).
                let records = Records.opened(in: stateDirectory, shard: manifest.shard)
                defer { records.close() }
                let reader = DirectoryReader(root: rootDirectory)
                while case .batch(let batch) = feed.take() {
                    order.finished(batch: batch.number, batch.entries.map { entry in
                        let paths = manifest.paths(for: entry)
                        let local = Result { () throws(TransferFailure) in try reader.inspectDestinationFirst(paths) }
                        return judge(entry, paths: paths, local: local, records: records, rehash: rehash)
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

    /// One worker's view of the stores' records, read a row at a time through connections of
    /// its own. A store that cannot be opened, and a record that cannot be read, count as none
    /// (the run said so when it opened them).
    private struct Records {
        let store: StateStore?
        let siblings: SiblingStores

        static func opened(in directory: StateDirectory, shard: ShardSelection?) -> Records {
            Records(store: StateStore.open(in: directory, mode: .readOnly, shard: shard).store,
                    siblings: SiblingStores.open(in: directory, besides: shard))
        }

        func own(_ dest: String) -> StateRecord? {
            (try? store?.record(for: dest)) ?? nil
        }

        func siblings(_ dest: String) -> [StateRecord] {
            siblings.stores.compactMap { (try? $0.record(for: dest)) ?? nil }
        }

        func close() {
            store?.close()
            siblings.close()
        }
    }

    /// The verdict on `entry` from what a look at the disk found (the partial file only where
    /// `DEST` is missing, to say that there is one) and the records; `paths` are its paths.
    private func judge(
        _ entry: Entry, paths: DestinationPaths, local looked: Result<LocalFacts, TransferFailure>, records: Records, rehash: Bool
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
                result.sha256 = try rootDirectory.digestOfDestination(paths, algorithm)
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
