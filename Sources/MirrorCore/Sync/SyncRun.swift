/// One `sync` (or `plan`) of a manifest on the transfer engine's thread: starts an
/// `EntryDriver` for each entry, at most `width` at once and in manifest order, and collects
/// their results.
///
/// Touched only on the engine's thread (hence `@unchecked Sendable`), apart from `cancel`,
/// which posts there.
final class SyncRun: @unchecked Sendable {
    let runner: ManifestRunner
    let store: StateStore?
    /// Other run layouts' stores, read for records the run's own store lacks.
    let siblings: SiblingStores
    let conditions: HostConditions
    let mode: EntryMachine.Mode
    let groupCommit: GroupCommit
    private let entries: [Entry]
    private let width: Int
    private var results: [EntryResult?]
    private var running: [Int: EntryDriver] = [:]
    private var next = 0
    private var remaining: Int
    private var cancelled = false
    private var completion: (@Sendable ([EntryResult]) -> Void)?

    init(runner: ManifestRunner, mode: EntryMachine.Mode, store: StateStore?, siblings: SiblingStores = SiblingStores(), conditions: HostConditions, width: Int) {
        self.runner = runner
        self.mode = mode
        groupCommit = GroupCommit(
            rootDirectory: runner.rootDirectory, durable: runner.options.durable, store: store, pool: runner.blocking,
            engine: runner.fetcher.engine, onStoreProblem: { [runner] in runner.emit(.stateStoreProblem($0)) })
        self.store = store
        self.siblings = siblings
        self.conditions = conditions
        entries = runner.manifest.entries
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
            while running.count < width, next < entries.count { startNext() }
        }
    }

    /// Interrupts the run: no entry starts anything new, and what runs is stopped.
    func cancel() {
        runner.fetcher.engine.post { [self] in
            cancelled = true
            for driver in Array(running.values) { driver.cancel() }
        }
    }

    private func startNext() {
        let index = next
        next += 1
        let entry = entries[index]
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

    private func finishRun() {
        guard let completion else { return }
        self.completion = nil
        completion(results.map { $0! })
    }
}
