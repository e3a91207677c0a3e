import FoundationEssentials
import Glibc
import MirrorCore
import Synchronization

/// All of the CLI's writing goes through here, under one lock, so lines from concurrent
/// entries never interleave and the live progress block is cleared before any line is written.
/// Every human line has its control characters escaped here (`TerminalText.escaped`): what a
/// server sends reaches the terminal only as visible text.
final class Console: Sendable {
    enum Mode: Sendable {
        /// Human lines on stdout, failures on stderr.
        case text
        /// JSON on stdout; human lines and failures on stderr.
        case json
    }

    /// How lines for people and logs are written.
    enum LogStyle: Sendable, Equatable {
        /// Plain lines, each begun with its RFC 3339 UTC time when `timestamps`.
        case text(timestamps: Bool)
        /// Every line a `LogRecord` on stderr; nothing for people on stdout.
        case json
    }

    let mode: Mode
    /// Only failures are printed (and the JSON document, with --json).
    let quiet: Bool
    let log: LogStyle
    let stderrIsTerminal: Bool
    private let drawnLines = Mutex(0)

    init(mode: Mode, quiet: Bool, log: LogStyle = .text(timestamps: false)) {
        self.mode = mode
        self.quiet = quiet
        self.log = log
        stderrIsTerminal = isatty(STDERR_FILENO) == 1
    }

    /// A line of human output: stdout normally, stderr when stdout carries JSON, nowhere
    /// with --quiet. The text is only made when it is shown: with --quiet, a plan's table or
    /// a line per finished entry would be built for nothing.
    func line(_ text: @autoclosure () -> String) {
        guard !quiet else { return }
        if log == .json { return record(LogRecord(level: .info, event: "message", fields: [("message", .string(text()))])) }
        write(text() + "\n", to: mode == .json ? STDERR_FILENO : STDOUT_FILENO)
    }

    /// Human text that is not a result (warnings, fallbacks): stderr, unless --quiet.
    func notice(_ text: @autoclosure () -> String) {
        guard !quiet else { return }
        if log == .json { return record(LogRecord(level: .notice, event: "message", fields: [("message", .string(text()))])) }
        write(text() + "\n", to: STDERR_FILENO)
    }

    /// Always shown, even with --quiet.
    func error(_ text: String) {
        if log == .json { return record(LogRecord(level: .error, event: "message", fields: [("message", .string(text))])) }
        write(text + "\n", to: STDERR_FILENO)
    }

    /// Says why the command stops, on stderr and, under `--json`, as the error document of kind
    /// `kind` on stdout; the exit that ends it, to throw.
    func stop(_ kind: String, _ message: String, status: ExitStatus) -> ExitWith {
        if mode == .json { json(ErrorJSON.document(kind: kind, message: message)) }
        error("mirror: \(message)")
        return ExitWith(status: status)
    }

    /// One line of `--log-format json` on stderr. (JSONValue escapes every control character.)
    func record(_ record: LogRecord) {
        let line = record.text(at: LogTimestamp.now()) + "\n"
        drawnLines.withLock { _ in Self.writeAll(line, to: STDERR_FILENO) }
    }

    /// Part of a JSON document written as it grows (`json` writes its last part).
    func jsonPart(_ text: String) {
        write(text, to: STDOUT_FILENO)
    }

    /// The JSON document, alone on stdout.
    func json(_ text: String) {
        // JSONValue escapes every control character itself; the text has none left.
        write(text + "\n", to: STDOUT_FILENO)
    }

    /// Replaces the live progress block on a terminal's stderr.
    func drawProgress(_ lines: [String]) {
        drawnLines.withLock { drawn in
            var text = Self.clearing(drawn)
            for line in lines { text += TerminalText.escaped(line) + "\u{1B}[K\n" }
            drawn = lines.count
            Self.writeAll(text, to: STDERR_FILENO)
        }
    }

    func clearProgress() {
        drawnLines.withLock { drawn in
            Self.writeAll(Self.clearing(drawn), to: STDERR_FILENO)
            drawn = 0
        }
    }

    func report(_ event: RunEvent, verbose: Bool) {
        if log == .json {
            if let record = LogRecord.of(event, verbose: verbose, quiet: quiet) { self.record(record) }
            return
        }
        switch event {
        case .started:
            return
        case .probed(let dest, let url, let facts):
            guard verbose else { return }
            switch facts {
            case .available(let file):
                let size = file.size.map(ByteCount.format) ?? "unknown size"
                var validators = [String]()
                if let etag = file.etag { validators.append("ETag \(etag)") }
                if let modified = file.lastModified { validators.append("Last-Modified \(modified)") }
                let suffix = validators.isEmpty ? "" : ", " + validators.joined(separator: ", ")
                error("probe \(dest): \(url): \(size)\(suffix)")
            case .unavailable(let failure):
                error("probe \(dest): \(url): \(failure)")
            }
        case .decided(let dest, let action):
            guard verbose else { return }
            let detail = action.reason.map { ": \($0)" } ?? ""
            let offset = action.offset > 0 ? " from byte \(action.offset)" : ""
            error("plan \(dest): \(action.name)\(offset)\(detail)")
        case .retrying(let dest, _, let failure, let attempt, let delay):
            guard verbose else { return }
            error("retry \(dest): \(failure); attempt \(attempt + 1) in \(DurationText.format(delay))")
        case .waitingForNetwork(let host, let wait):
            notice("mirror: \(host) is unreachable; transfers to it wait up to \(DurationSyntax.text(wait)) (until \(Self.clockTime(after: wait))) for the network")
        case .pausedByServer(let host, let pause):
            guard verbose else { return }
            error("pause \(host): the server asked for \(DurationText.format(pause)) (Retry-After)")
        case .stateStoreProblem(let problem):
            // A store the whole run goes without costs every later run too: said without -v.
            if problem.concernsTheRun { return notice("mirror: warning: \(problem)") }
            guard verbose else { return }
            error("state: \(problem)")
        case .cacheProblem(let text):
            notice("mirror: warning: cache: \(text)")
        case .fallingBack(let dest, let url, let failure):
            notice("\(dest): \(failure); trying mirror \(url)")
        case .pruneLeftover(let leftover):
            if case .kept = leftover.state { return notice("mirror: warning: \(leftover)") }
            notice("mirror: \(leftover)")
        case .finished(let report):
            if report.interruptedBeforeStart && !verbose {
                // Counted in the interruption's one line instead (SyncText.notStarted).
                return
            }
            if case .failed(.cancelled) = report.outcome {
                notice("stopped      \(report.dest): \(SyncText.interruptedDetail(report))")
            } else if case .failed(let failure) = report.outcome {
                let tries = report.attempts == 1 ? "1 attempt" : "\(report.attempts) attempts"
                error("FAILED \(report.dest): \(failure) (\(report.url), \(tries))")
            } else {
                line(SyncText.finishedLine(report))
            }
        }
    }

    /// Local wall-clock time `duration` from now, as HH:MM:SS.
    static func clockTime(after duration: Duration) -> String {
        // `connectivity.wait` may be as long as a manifest can spell: no trap, and no made-up
        // time where the calendar gives out.
        var when = time(nil).saturatingAdding(Int(duration.components.seconds))
        var parts = tm()
        guard localtime_r(&when, &parts) != nil else { return "--:--:--" }
        return [parts.tm_hour, parts.tm_min, parts.tm_sec].map { TextFormat.twoDigits(Int($0)) }.joined(separator: ":")
    }

    /// Writes human text, escaped, after clearing the progress block.
    private func write(_ text: String, to fd: Int32) {
        var text = TerminalText.escapedLines(text)
        if log == .text(timestamps: true) { text = Self.stamped(text, with: LogTimestamp.now()) }
        drawnLines.withLock { drawn in
            if drawn > 0 {
                Self.writeAll(Self.clearing(drawn), to: STDERR_FILENO)
                drawn = 0
            }
            Self.writeAll(text, to: fd)
        }
    }

    /// Every line of `text` begun with `time` and a space.
    static func stamped(_ text: String, with time: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).enumerated().map { index, line in
            // The text ends in a line feed: nothing follows the last one.
            line.isEmpty && index > 0 ? "" : time + " " + line
        }.joined(separator: "\n")
    }

    /// For messages written before any Console exists (argument errors).
    static func writeToStandardError(_ text: String) {
        writeAll(TerminalText.escapedLines(text), to: STDERR_FILENO)
    }

    private static func clearing(_ lines: Int) -> String {
        lines > 0 ? "\u{1B}[\(lines)A\r\u{1B}[J" : ""
    }

    /// Writes `text` to `fd`, through `StandardOutputBuffer` (which keeps stdout in order with
    /// stderr, and buffered when stdout is not a terminal).
    private static func writeAll(_ text: String, to fd: Int32) {
        StandardOutputBuffer.write(text, to: fd)
    }
}

/// Everything the CLI writes, in one place. Standard output and standard error that are pipes
/// or files are held in memory and written in pieces of up to 64 KiB, not a `write` per line (a
/// `verify` of a million entries made a million of them, and of ten million missing files ten
/// million on stderr): held at most about half a second, written before anything goes to the
/// other descriptor (so that `2>&1` keeps the order lines were made in), and at exit. On a
/// terminal each line goes out as it is made.
enum StandardOutputBuffer {
    private struct Held {
        /// The descriptor the held bytes are for.
        var descriptor = STDOUT_FILENO
        var bytes: [UInt8] = []
        /// When the oldest held byte was made (the monotonic clock, ms).
        var since: Int64 = 0
        var flusherStarted = false
    }

    private static let held = Mutex(Held())
    static let buffersStandardOutput = isatty(STDOUT_FILENO) != 1
    static let buffersStandardError = isatty(STDERR_FILENO) != 1
    /// Held bytes that are written at once.
    static let limit = 64 * 1024
    /// How long a line may wait at most (ms).
    static let longestWait: Int64 = 500

    static func write(_ text: String, to fd: Int32) {
        held.withLock { held in
            if fd == STDOUT_FILENO ? buffersStandardOutput : fd == STDERR_FILENO && buffersStandardError {
                if held.descriptor != fd {
                    flush(&held)
                    held.descriptor = fd
                }
                if held.bytes.isEmpty { held.since = MonotonicClock.milliseconds() }
                held.bytes.append(contentsOf: text.utf8)
                if !held.flusherStarted {
                    held.flusherStarted = true
                    startFlusher()
                }
                if held.bytes.count >= limit { flush(&held) }
                return
            }
            flush(&held)
            writeAll(Array(text.utf8), to: fd)
        }
    }

    /// Writes what is held now: before an output that goes to stdout on its own (`--metrics-file
    /// -`, `--report -`), so that it follows the lines made before it.
    static func flush() {
        held.withLock { flush(&$0) }
    }

    /// Writes what is held, at exit, within a second: another thread may be writing (the
    /// flusher, or a line being made), or the pipe may be full with no one reading it; an
    /// exit on a second signal must not hang on either.
    static func flushAtExit() {
        let deadline = MonotonicClock.milliseconds() + 1000
        while MonotonicClock.milliseconds() < deadline {
            let done = held.withLockIfAvailable { held -> Bool in
                if !held.bytes.isEmpty { writeAll(held.bytes, to: held.descriptor, until: deadline) }
                held.bytes.removeAll()
                return true
            }
            if done != nil { return }
            usleep(1000)
        }
    }

    private static func flush(_ held: inout Held) {
        guard !held.bytes.isEmpty else { return }
        writeAll(held.bytes, to: held.descriptor)
        held.bytes.removeAll(keepingCapacity: true)
    }

    /// Writes what has been held for half of `longestWait` or more, looking every half of it
    /// from a thread of its own, so that no line waits longer than `longestWait`; and registers
    /// the exit's flush. Once, with the first line held.
    private static func startFlusher() {
        atexit { StandardOutputBuffer.flushAtExit() }
        DetachedThread.start {
            while true {
                usleep(UInt32(longestWait * 1000 / 2))
                held.withLock { held in
                    if !held.bytes.isEmpty && MonotonicClock.milliseconds() - held.since >= longestWait / 2 { flush(&held) }
                }
            }
        }
    }

    /// Writes all of `bytes`, until `deadline` when one is given. A failure is not the run's:
    /// a closed stdout (cron with output discarded) must not fail it.
    private static func writeAll(_ bytes: [UInt8], to fd: Int32, until deadline: Int64? = nil) {
        _ = bytes.withUnsafeBytes { DescriptorWrite.all($0, to: fd, until: deadline) }
    }
}
