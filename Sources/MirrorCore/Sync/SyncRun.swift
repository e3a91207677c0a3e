/// One `sync` of a manifest on the transfer engine's thread: starts an `EntryDriver` for each
/// entry, at most `width` at once and in manifest order, and collects their reports.
///
/// Touched only on the engine's thread (hence `@unchecked Sendable`), apart from `cancel`,
/// which posts there.
final class SyncRun: @unchecked Sendable {
    let runner: ManifestRunner
    let store: StateStore?
    let conditions: HostConditions
    private let entries: [Entry]
    private let width: Int
    private var reports: [EntryReport?]
    private var running: [Int: EntryDriver] = [:]
    private var next = 0
    private var remaining: Int
    private var cancelled = false
    private var completion: (@Sendable ([EntryReport]) -> Void)?

    init(runner: ManifestRunner, store: StateStore?, conditions: HostConditions, width: Int) {
        self.runner = runner
        self.store = store
        self.conditions = conditions
        entries = runner.manifest.entries
        self.width = max(1, width)
        reports = Array(repeating: nil, count: entries.count)
        remaining = entries.count
    }

    var isCancelled: Bool { cancelled }

    /// Runs every entry; `completion` gets the reports in manifest order, on the engine's thread.
    func start(completion: @escaping @Sendable ([EntryReport]) -> Void) {
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
        let driver = EntryDriver(entry: entry, run: self) { [self] report in
            entryFinished(index, report)
        }
        running[index] = driver
        driver.start()
    }

    private func entryFinished(_ index: Int, _ report: EntryReport) {
        running[index] = nil
        reports[index] = report
        runner.options.progress?.entryFinished(dest: report.dest)
        runner.emit(.finished(report))
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
        completion(reports.map { $0! })
    }
}
