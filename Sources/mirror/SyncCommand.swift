import ArgumentParser
import Foundation
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

            On a terminal, live progress goes to stderr. Otherwise one line per finished entry \
            goes to stdout and failures to stderr; with --quiet only failures are printed.
            """
    )

    @OptionGroup var options: CommonOptions

    func run() async throws {
        let console = Console(mode: options.json ? .json : options.quiet ? .quiet : .normal)
        let manifest = try options.loadManifest(console: console)
        let progress = SyncProgress()
        let runner = ManifestRunner(manifest: manifest, options: options.runOptions(for: manifest, console: console, progress: progress))
        let display = console.stderrIsTerminal && !options.quiet ? ProgressDisplay(progress: progress, console: console) : nil

        let started = ContinuousClock.now
        display?.start()
        let reports = await runner.sync()
        await display?.stop()
        let elapsed = ContinuousClock.now - started

        if options.json {
            console.json(try SyncJSON.encode(reports))
        } else {
            console.line(SyncSummary(reports).text(elapsed: elapsed))
        }
        if reports.contains(where: \.failed) {
            if options.quiet {
                console.error(SyncSummary(reports).text(elapsed: elapsed))
            }
            throw ExitWith(status: .entriesFailed)
        }
    }
}

/// Totals of a finished sync.
struct SyncSummary {
    var transferred = 0
    var skipped = 0
    var failed = 0
    var bytes: Int64 = 0

    init(_ reports: [EntryReport]) {
        for report in reports {
            bytes += report.bytesTransferred
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
        return parts.joined(separator: ", ") + " in \(DurationText.format(elapsed))"
    }
}

/// `mirror sync --json`: one object on stdout with a result per entry.
enum SyncJSON {
    struct Document: Encodable {
        var entries: [Row]
        var summary: Summary
    }

    struct Row: Encodable {
        var report: EntryReport

        enum Keys: String, CodingKey {
            case dest, url, action, status, bytesTransferred = "bytes_transferred", size, attempts, sha256, error
        }

        func encode(to encoder: Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(report.dest, forKey: .dest)
            try container.encode(report.url, forKey: .url)
            try container.encode(report.action.name, forKey: .action)
            let status: String
            var error: String?
            switch report.outcome {
            case .transferred: status = "transferred"
            case .skipped: status = "skipped"
            case .failed(let failure):
                status = "failed"
                error = failure.description
            }
            try container.encode(status, forKey: .status)
            try container.encode(report.bytesTransferred, forKey: .bytesTransferred)
            try container.encode(report.size, forKey: .size)
            try container.encode(report.attempts, forKey: .attempts)
            try container.encode(report.sha256, forKey: .sha256)
            try container.encode(error, forKey: .error)
        }
    }

    struct Summary: Encodable {
        var transferred: Int
        var skipped: Int
        var failed: Int
        var bytesTransferred: Int64

        enum CodingKeys: String, CodingKey {
            case transferred, skipped, failed, bytesTransferred = "bytes_transferred"
        }
    }

    static func encode(_ reports: [EntryReport]) throws -> String {
        let totals = SyncSummary(reports)
        let document = Document(
            entries: reports.map(Row.init),
            summary: Summary(transferred: totals.transferred, skipped: totals.skipped, failed: totals.failed, bytesTransferred: totals.bytes)
        )
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return String(decoding: try encoder.encode(document), as: UTF8.self)
    }
}
