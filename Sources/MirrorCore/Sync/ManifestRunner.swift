import Glibc

/// Carries out `plan` and `sync` for a manifest: probes, decides and transfers each entry,
/// with at most `concurrency` requests in flight, over one shared transfer engine.
///
/// Never prints: everything a user sees comes from the returned reports and `RunEvent`s.
public final class ManifestRunner: Sendable {
    public let manifest: Manifest
    let options: RunOptions
    let fetcher: Fetcher
    let probe: RemoteProbe
    /// Every destination is reached through it, without following a symbolic link.
    let rootDirectory: RootDirectory
    /// Where finished files are hashed to the end, fsync'd and renamed.
    let blocking: BlockingPool
    /// `concurrency` permits for the requests of `sync`.
    let slots: TransferSlots
    /// Entries `sync` works on at once. `concurrency` of them hold a transfer slot; the others
    /// wait for one, or are being hashed to the end, fsync'd and renamed, so that the disk
    /// commits many files together and the network does not wait for the disk.
    let entryWidth: Int
    static let entriesPerTransfer = 4
    let directorySync: DirectorySync

    public init(manifest: Manifest, options: RunOptions) {
        self.manifest = manifest
        self.options = options
        fetcher = Fetcher(engine: TransferEngine(), proxies: options.proxies)
        probe = RemoteProbe(fetcher: fetcher)
        entryWidth = options.concurrency * Self.entriesPerTransfer
        blocking = BlockingPool(limit: entryWidth)
        slots = TransferSlots(options.concurrency)
        let rootDirectory = RootDirectory(path: manifest.root)
        self.rootDirectory = rootDirectory
        directorySync = DirectorySync { rootDirectory.syncDirectory($0) }
    }

    /// Decides every entry without changing anything on disk: no files, no directories, not
    /// even the state store (read if present, never written).
    public func plan() async -> [PlannedEntry] {
        let opening = StateStore.open(in: rootDirectory, mode: .readOnly)
        if let problem = opening.problem { emit(.stateStoreProblem(problem)) }
        let store = opening.store
        store?.expect(entries: manifest.entries.count)
        return await Self.boundedMap(manifest.entries, width: options.concurrency) { entry in
            await self.planEntry(entry, store: store)
        }
    }

    /// Plans and carries out every entry; a failed entry does not stop the others.
    /// Reports come back in manifest order. Holds the run lock on the root throughout; throws
    /// only when that lock cannot be had.
    public func sync() async throws(RunLockError) -> [EntryReport] {
        let lock = try await RunLock.acquire(in: rootDirectory, wait: options.lockWait)
        let opening = StateStore.open(in: rootDirectory, mode: .readWrite)
        if let problem = opening.problem { emit(.stateStoreProblem(problem)) }
        let store = opening.store
        store?.expect(entries: manifest.entries.count)
        let conditions = HostConditions(
            gate: ConnectivityGate(
                wait: manifest.connectivity.wait,
                interval: options.connectivityCheckInterval,
                onOutage: { target, wait in self.emit(.waitingForNetwork(host: target.description, wait: wait)) }
            ),
            pauses: HostPauses(),
            probe: manifest.connectivity.probe,
            proxies: options.proxies
        )
        options.progress?.expect(manifest.entries.map { ($0.dest, $0.size) })
        let run = SyncRun(runner: self, store: store, conditions: conditions, width: entryWidth)
        let reports = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                run.start { continuation.resume(returning: $0) }
            }
        } onCancel: {
            run.cancel()
        }
        store?.close()
        withExtendedLifetime(lock) {}
        return reports
    }

    func paths(for entry: Entry) -> DestinationPaths {
        DestinationPaths(root: manifest.root, dest: entry.dest)
    }

    func emit(_ event: RunEvent) {
        options.events?(event)
    }

    private func planEntry(_ entry: Entry, store: StateStore?) async -> PlannedEntry {
        let paths = paths(for: entry)
        let local: LocalFacts
        do {
            local = try LocalFacts.inspect(paths, in: rootDirectory)
        } catch {
            return PlannedEntry(dest: entry.dest, url: entry.url.display, action: .fail(error), localSize: nil, remoteSize: nil)
        }
        let localSize = local.destination.size ?? local.partial.size
        let record = record(of: entry, in: store)
        if Planner.isPinnedAndVerified(local: local, state: record, pins: entry.pins) {
            // The store vouches for the pinned hash of this very file: no request needed.
            emit(.decided(dest: entry.dest, .skip))
            return PlannedEntry(dest: entry.dest, url: entry.url.display, action: .skip, localSize: localSize, remoteSize: localSize)
        }
        let decision = await probeAndDecide(entry, source: entry.url, local: local, record: record)
        emit(.decided(dest: entry.dest, decision.action))
        return PlannedEntry(dest: entry.dest, url: entry.url.display, action: decision.action, localSize: localSize,
                            remoteSize: decision.remote?.size)
    }

    /// The store's record for an entry; a store that cannot be read is reported and treated
    /// as having none.
    func record(of entry: Entry, in store: StateStore?) -> StateRecord? {
        readRecord(of: entry, in: store).record
    }

    /// The record, and whether the store failed to say: then a record of any kind may still
    /// be in it.
    func readRecord(of entry: Entry, in store: StateStore?) -> (record: StateRecord?, unreadable: Bool) {
        guard let store else { return (nil, false) }
        do {
            return (try store.record(for: entry.dest), false)
        } catch {
            emit(.stateStoreProblem("reading \(store.path): \(error); deciding \(entry.dest) by size"))
            return (nil, true)
        }
    }

    /// What `plan` and `sync` both do to decide an entry once its local facts are known:
    /// probe the source, hash `DEST` when the decision depends on it, and ask the planner.
    /// A failure to hash becomes a `fail` action.
    func probeAndDecide(_ entry: Entry, source: RemoteURL, local: LocalFacts, record: StateRecord?) async
        -> (remote: RemoteFile?, destinationSHA256: String?, action: Action)
    {
        let facts = await probe.probe(source, settings: entry.settings)
        emit(.probed(dest: entry.dest, url: source.display, facts))
        var remote: RemoteFile?
        if case .available(let file) = facts { remote = file }
        var hash: String?
        if Planner.needsDestinationHash(local: local, remote: facts, pins: entry.pins, state: record) {
            do {
                hash = try hashDestination(paths(for: entry))
            } catch {
                return (remote, nil, .fail(error))
            }
        }
        let action = Planner.decide(local: local, remote: facts, pins: entry.pins, state: record, destinationSHA256: hash)
        return (remote, hash, action)
    }

    /// SHA-256 of a whole `DEST`, opened through the root without following a symbolic link.
    func hashDestination(_ paths: DestinationPaths) throws(TransferFailure) -> String {
        let fd = try rootDirectory.openDestination(paths)
        defer { close(fd) }
        let hasher = SHA256Hasher()
        let path = paths.destination
        try hasher.update(fileDescriptor: fd, length: FileSystem.size(of: fd, path: path), path: path)
        return hasher.finalize()
    }

    /// Runs `body` over `items` with at most `width` running at once; results keep the
    /// items' order.
    static func boundedMap<Item: Sendable, Result: Sendable>(
        _ items: [Item], width: Int, _ body: @escaping @Sendable (Item) async -> Result
    ) async -> [Result] {
        await withTaskGroup(of: (Int, Result).self) { group in
            var results = [Result?](repeating: nil, count: items.count)
            var next = 0
            while next < min(max(width, 1), items.count) {
                let index = next
                group.addTask { (index, await body(items[index])) }
                next += 1
            }
            for await (index, result) in group {
                results[index] = result
                if next < items.count {
                    let index = next
                    group.addTask { (index, await body(items[index])) }
                    next += 1
                }
            }
            return results.map { $0! }
        }
    }
}
