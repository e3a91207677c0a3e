import MirrorCore

/// One line of `--log-format json`: a JSON object with `time` (RFC 3339, UTC, milliseconds),
/// `level`, `event`, then the event's own fields (`dest` and `url` first where it has them).
struct LogRecord {
    enum Level: String {
        case info, notice, error
    }

    var level: Level
    var event: String
    var fields: [(String, JSONValue)]

    /// The line, without its line feed.
    func text(at time: String) -> String {
        JSONValue.object([("time", .string(time)), ("level", .string(level.rawValue)), ("event", .string(event))] + fields).text
    }

    static func milliseconds(_ duration: Duration) -> JSONValue {
        let (seconds, attoseconds) = duration.components
        return .int(seconds.saturatingMultiplied(by: 1000).saturatingAdding(attoseconds / 1_000_000_000_000_000))
    }

    /// The record of `event`, or nil when it is not logged: what `--verbose` adds to text
    /// (probes, decisions, a state store record that could not be read or written) only with
    /// `--verbose`; with `--quiet`, only failures.
    static func of(_ event: RunEvent, verbose: Bool, quiet: Bool) -> LogRecord? {
        guard let record = record(of: event, verbose: verbose) else { return nil }
        return quiet && record.level != .error ? nil : record
    }

    private static func record(of event: RunEvent, verbose: Bool) -> LogRecord? {
        switch event {
        case .started(let dest, let url):
            return LogRecord(level: .info, event: "started", fields: [("dest", .string(dest)), ("url", .string(url))])
        case .probed(let dest, let url, let facts):
            guard verbose else { return nil }
            var fields: [(String, JSONValue)] = [("dest", .string(dest)), ("url", .string(url))]
            switch facts {
            case .available(let file):
                fields += [("size", .int(file.size)), ("etag", .string(file.etag)), ("last_modified", .string(file.lastModified))]
            case .unavailable(let failure):
                fields.append(("error", .string(failure.description)))
            }
            return LogRecord(level: .info, event: "probed", fields: fields)
        case .decided(let dest, let action):
            guard verbose else { return nil }
            return LogRecord(level: .info, event: "planned", fields: [
                ("dest", .string(dest)), ("action", .string(action.name)), ("offset", .int(action.offset)),
                ("reason", .string(action.reason)),
            ])
        case .retrying(let dest, let url, let failure, let attempt, let delay):
            return LogRecord(level: .notice, event: "retrying", fields: [
                ("dest", .string(dest)), ("url", .string(url)), ("error", .string(failure.description)),
                ("attempt", .int(attempt)), ("next_attempt", .int(attempt.saturatingAdding(1))), ("delay_ms", milliseconds(delay)),
            ])
        case .fallingBack(let dest, let url, let failure):
            return LogRecord(level: .notice, event: "fallback", fields: [
                ("dest", .string(dest)), ("url", .string(url)), ("error", .string(failure.description)),
            ])
        case .pruneLeftover(let leftover):
            return LogRecord(level: .notice, event: "prune_leftover", fields: [
                ("path", .string(leftover.path)), ("trash", .string(leftover.trashPath)), ("state", .string(leftover.stateName)),
                ("message", .string(leftover.description)),
            ])
        case .waitingForNetwork(let host, let wait):
            return LogRecord(level: .notice, event: "waiting_for_network", fields: [
                ("host", .string(host)), ("wait_ms", milliseconds(wait)), ("until", .string(LogTimestamp.after(wait))),
            ])
        case .pausedByServer(let host, let pause):
            return LogRecord(level: .notice, event: "waiting_for_host", fields: [
                ("host", .string(host)), ("pause_ms", milliseconds(pause)), ("reason", .string("Retry-After")),
            ])
        case .stateStoreProblem(let problem):
            guard verbose || problem.concernsTheRun else { return nil }
            return LogRecord(level: .notice, event: "state_store_problem", fields: [("message", .string(problem.text))])
        case .cacheProblem(let text):
            return LogRecord(level: .notice, event: "cache_problem", fields: [("message", .string(text))])
        case .finished(let report):
            // Entries an interruption reached first are counted in one message, as in text.
            guard verbose || !report.interruptedBeforeStart else { return nil }
            return finished(report)
        }
    }

    private static func finished(_ report: EntryReport) -> LogRecord {
        var fields: [(String, JSONValue)] = [
            ("dest", .string(report.dest)), ("url", .string(report.url)), ("action", .string(report.action.name)),
        ]
        switch report.outcome {
        case .transferred, .skipped:
            fields += [
                ("result", .string(report.outcome == .skipped ? "skipped" : "transferred")),
                ("bytes_transferred", .int(report.bytesTransferred)), ("size", .int(report.size)),
                ("attempts", .int(report.attempts)), JSONValue.digestField(report.sha256),
            ]
            return LogRecord(level: .info, event: "finished", fields: fields)
        case .failed(.cancelled):
            fields += [("bytes_transferred", .int(report.bytesTransferred)), ("partial_size", .int(report.partialSize))]
            return LogRecord(level: .notice, event: "interrupted", fields: fields)
        case .failed(let failure):
            fields += [
                ("error", .string(failure.description)), ("attempts", .int(report.attempts)),
                ("bytes_transferred", .int(report.bytesTransferred)), ("partial_size", .int(report.partialSize)),
            ]
            return LogRecord(level: .error, event: "failed", fields: fields)
        }
    }
}
