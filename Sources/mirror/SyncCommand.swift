import ArgumentParser
import FoundationEssentials
import Glibc
import MirrorCore

struct SyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Bring every entry's destination up to date.",
        discussion: """
            Plans each entry as `mirror plan` does and carries the plan out, at most \
            --concurrency transfers at a time. Downloads go to DEST.part and are renamed to \
            DEST only when complete and verified (size, and sha256 when pinned); a partial file \
            is resumed with a Range request on the next run. A failed entry does not stop the \
            others. Retryable failures (connection errors, timeouts, cut bodies, 408, 429, 5xx) \
            are retried with exponential backoff and jitter, `retries` times per source; then \
            the entry's mirrors are tried in order.

            One line per finished entry goes to stdout (to stderr with --json) and failures to \
            stderr; on a terminal, live progress is drawn on stderr as well. With --quiet only \
            failures are printed. SIGINT or SIGTERM stops the transfers, keeps every partial \
            file for the next run to resume, and exits 130 or 143.

            With --prune (or `prune: true` in the manifest), once every entry has succeeded, \
            files that mirror wrote and the manifest no longer lists are deleted: only files \
            the state store records as downloaded by mirror and unchanged since (same size, \
            mtime and inode), with their partial files and records; then the directories that \
            held them, if left empty and not needed by a listed dest. A file changed since, or \
            one mirror did not write, is kept and named; nothing in .mirror/ and nothing behind \
            a symbolic link is touched. If any entry failed, nothing is deleted; with \
            --max-delete N, more than N files to delete means none are. Either ends with exit 1.
            """
    )

    @OptionGroup var options: CommonOptions

    @OptionGroup var lockWait: LockWaitOption

    @OptionGroup var prune: PruneOptions

    @Flag(name: .long, help: "Do not fsync files before renaming them into place: faster on slow disks, but a power loss can leave a renamed file empty or short.")
    var noFsync = false


    func run() async throws {
        let console = options.console()
        let manifest = try options.loadManifest(console: console)
        let progress = SyncProgress()
        var runOptions = options.runOptions(for: manifest, console: console, progress: progress)
        runOptions.lockWait = lockWait.duration
        runOptions.durable = !noFsync
        runOptions.prune = try prune.settings(for: manifest, console: console)
        let runner = ManifestRunner(manifest: manifest, options: runOptions)
        let style = options.quiet ? nil : ProgressDisplay.style(
            stderrIsTerminal: console.stderrIsTerminal, term: ProcessInfo.processInfo.environment["TERM"])
        let display = style.map { ProgressDisplay(progress: progress, console: console, style: $0) }

        let started = ContinuousClock.now
        display?.start()
        let (result, signal) = try await runner.syncInterruptibly(console: console) { await display?.stop() }
        let elapsed = ContinuousClock.now - started
        let reports = result.reports

        let summary = SyncSummary(reports, prune: result.prune)
        if options.json {
            console.json(SyncJSON.encode(reports, prune: result.prune))
        }
        if signal == nil, let outcome = result.prune { PruneText.report(outcome, to: console) }
        if let signal {
            let kept = reports.contains { ($0.partialSize ?? 0) > 0 }
                ? "; partial files are kept and the next sync resumes them" : ""
            console.error("mirror: interrupted by \(signal == SIGINT ? "SIGINT" : "SIGTERM")\(kept)")
            throw ExitWith(status: .forSignal(signal))
        }
        if summary.failed > 0 {
            console.error(summary.text(elapsed: elapsed))
            throw ExitWith(status: ExitStatus.forFailures(reports))
        }
        if let outcome = result.prune, outcome.fellShort {
            console.error(summary.text(elapsed: elapsed))
            throw ExitWith(status: .entriesFailed)
        }
        if !options.json { console.line(summary.text(elapsed: elapsed)) }
    }
}

/// Totals of a finished sync.
struct SyncSummary {
    var transferred = 0
    var skipped = 0
    var failed = 0
    var bytes: Int64 = 0
    /// Files the prune deleted; nil when no prune was asked for.
    var deleted: Int?

    init(_ reports: [EntryReport], prune: PruneOutcome? = nil) {
        deleted = prune?.deleted.count
        for report in reports {
            bytes = bytes.saturatingAdding(report.bytesTransferred)
            switch report.outcome {
            case .transferred: transferred += 1
            case .skipped: skipped += 1
            case .failed: failed += 1
            }
        }
    }

    func text(elapsed: Duration) -> String {
        var parts = ["\(transferred) transferred (\(ByteCount.format(bytes)))", "\(skipped) up to date"]
        if failed > 0 { parts.append("\(failed) failed") }
        if let deleted { parts.append("\(deleted) deleted") }
        return parts.joined(separator: ", ") + " in \(DurationText.format(elapsed))"
    }
}

/// `mirror sync --json`: one object on stdout with a result per entry.
enum SyncJSON {
    static func encode(_ reports: [EntryReport], prune: PruneOutcome? = nil) -> String {
        let entries = reports.map { report -> JSONValue in
            var status = "transferred"
            var error: String?
            switch report.outcome {
            case .transferred: break
            case .skipped: status = "skipped"
            case .failed(let failure):
                status = "failed"
                error = failure.description
            }
            return .object([
                ("dest", .string(report.dest)),
                ("url", .string(report.url)),
                ("action", .string(report.action.name)),
                ("status", .string(status)),
                ("bytes_transferred", .int(report.bytesTransferred)),
                ("size", .int(report.size)),
                ("attempts", .int(report.attempts)),
                ("sha256", .string(report.sha256)),
                ("error", .string(error)),
            ])
        }
        let totals = SyncSummary(reports, prune: prune)
        var summary: [(String, JSONValue)] = [
            ("transferred", .int(totals.transferred)),
            ("skipped", .int(totals.skipped)),
            ("failed", .int(totals.failed)),
            ("bytes_transferred", .int(totals.bytes)),
        ]
        var document: [(String, JSONValue)] = [("entries", .array(entries))]
        if let prune {
            summary.append(("deleted", .int(prune.deleted.count)))
            document.append(("prune", PruneText.json(prune)))
        }
        document.append(("summary", .object(summary)))
        return JSONValue.object(document).text
    }
}
