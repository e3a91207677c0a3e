/// One `sync` (or `plan`) of a manifest on the transfer engine's thread: fetches the checksum
/// files the entries are pinned by (`ChecksumPins`, each once), then starts an `EntryDriver`
/// for each entry, at most `width` at once and in manifest order, and collects their results.
/// An entry its checksum file cannot pin fails without a request of its own.
///
/// Touched only on the engine's thread (hence `@unchecked Sendable`), apart from `cancel`,
/// which posts there.
final class SyncRun: @unchecked Sendable {
    let runner: ManifestRunner
    let store: StateStore?
    let conditions: HostConditions
    let mode: EntryMachine.Mode
    let groupCommit: GroupCommit
    private var entries: [Entry]
    /// Entries that cannot run: their checksum file did not pin them.
    private var unpinned: [Int: TransferFailure] = [:]
    private let checksumPins: ChecksumPins
    private let width: Int
    private var results: [EntryResult?]
    private var running: [Int: EntryDriver] = [:]
    private var next = 0
    private var remaining: Int
    private var cancelled = false
    private var completion: (@Sendable ([EntryResult]) -> Void)?

    init(runner: ManifestRunner, mode: EntryMachine.Mode, store: StateStore?, conditions: HostConditions, width: Int) {
        self.runner = runner
        self.mode = mode
        groupCommit = GroupCommit(
            rootDirectory: runner.rootDirectory, durable: runner.options.durable, store: store, pool: runner.blocking,
            engine: runner.fetcher.engine, onStoreProblem: { [runner] in runner.emit(.stateStoreProblem($0)) })
        self.store = store
        self.conditions = conditions
        entries = runner.manifest.entries
        checksumPins = ChecksumPins(fetcher: runner.fetcher, retryPolicy: runner.options.retryPolicy, width: runner.options.concurrency)
        self.width = max(1, width)
        results = Array(repeating: nil, count: entries.count)
        remaining = entries.count
    }

    var isCancelled: Bool { cancelled }

    /// Runs every entry; `completion` gets the results in manifest order, on the engine's thread.
    func start(completion: @escaping @Sendable ([EntryResult]) -> Void) {
        runner.fetcher.engine.post { [self] in
            self.completion = completion
            if remaining == 0 { return finishRun() }
            checksumPins.resolve(entries) { [self] resolution in
                for (index, result) in resolution.enumerated() {
                    switch result {
                    case .success(let entry): entries[index] = entry
                    case .failure(let failure): unpinned[index] = failure
                    }
                }
                while running.count < width, next < entries.count { startNext() }
            }
        }
    }

    /// Interrupts the run: no entry starts anything new, and what runs is stopped.
    func cancel() {
        runner.fetcher.engine.post { [self] in
            cancelled = true
            checksumPins.cancel()
            for driver in Array(running.values) { driver.cancel() }
        }
    }

    private func startNext() {
        let index = next
        next += 1
        let entry = entries[index]
        if let failure = unpinned[index] { return entryFinished(index, unpinnedResult(entry, failure)) }
        let driver = EntryDriver(entry: entry, run: self) { [self] result in
            entryFinished(index, result)
        }
        running[index] = driver
        driver.start()
    }

    private func entryFinished(_ index: Int, _ result: EntryResult) {
        running[index] = nil
        results[index] = result
        if case .synced(let report) = result {
            runner.options.progress?.entryFinished(dest: report.dest)
            runner.emit(.finished(report))
        }
        remaining -= 1
        if remaining == 0 { return finishRun() }
        // Not from inside the finishing driver's own step: the next one starts on a clean stack.
        if next < entries.count {
            runner.fetcher.engine.post { [self] in
                if running.count < width, next < entries.count { startNext() }
            }
        }
    }

    /// The result of an entry that fails for want of its checksum file's pin.
    private func unpinnedResult(_ entry: Entry, _ failure: TransferFailure) -> EntryResult {
        let url = entry.url.display
        guard mode == .sync else {
            return .planned(PlannedEntry(dest: entry.dest, url: url, action: .fail(failure), localSize: nil, remoteSize: nil))
        }
        runner.emit(.started(dest: entry.dest, url: url))
        return .synced(EntryReport(
            dest: entry.dest, url: url, action: .fail(failure), outcome: .failed(failure),
            bytesTransferred: 0, size: nil, attempts: 0, sha256: nil))
    }

    private func finishRun() {
        guard let completion else { return }
        self.completion = nil
        completion(results.map { $0! })
    }
}
