import FoundationEssentials
import Glibc
import MirrorCore
import Synchronization

/// Live progress of a sync on a terminal's stderr (see `ProgressLayout` for what it shows).
///
/// On a terminal that can move its cursor the block is redrawn in place a few times a second,
/// every line fitted to the terminal's current width. A `dumb` terminal (or none named in
/// `TERM`, as under Emacs or a CI log viewer) gets no escape sequence at all: a plain summary
/// line now and then.
final class ProgressDisplay: Sendable {
    enum Style: Equatable {
        /// Redraw the block in place.
        case redraw
        /// A plain line every `plainInterval`, nothing else.
        case plainLines
    }

    /// What it draws, which the run counts into.
    let progress: SyncProgress
    private let console: Console
    private let style: Style
    private let task = Mutex<Task<Void, Never>?>(nil)
    static let interval: Duration = .milliseconds(200)
    static let plainInterval: Duration = .seconds(5)

    /// The style for stderr, or nil when no progress should be shown there.
    static func style(stderrIsTerminal: Bool, term: String?) -> Style? {
        guard stderrIsTerminal else { return nil }
        guard let term, !term.isEmpty, term != "dumb" else { return .plainLines }
        return .redraw
    }

    init(progress: SyncProgress, console: Console, style: Style) {
        self.progress = progress
        self.console = console
        self.style = style
    }

    func start() {
        let progress = self.progress
        let console = self.console
        let style = self.style
        task.withLock { task in
            task = Task {
                var rates = TransferRates()
                // The first sample, taken now: the first frame has a rate to show.
                _ = rates.frame(progress.snapshot(), at: .now)
                let pause = style == .redraw ? Self.interval : Self.plainInterval
                var lastPlain: String?
                while !Task.isCancelled {
                    // Nothing is drawn before the first pause: a sync that has nothing to fetch
                    // ends without a frame.
                    try? await Task.sleep(for: pause)
                    if Task.isCancelled { break }
                    let frame = rates.frame(progress.snapshot(), at: .now)
                    switch style {
                    case .redraw:
                        console.drawProgress(ProgressLayout.lines(frame, width: Terminal.columns() - 1))
                    case .plainLines:
                        let line = ProgressLayout.summary(frame, width: Terminal.columns() - 1)
                        if line != lastPlain { console.notice(line) }
                        lastPlain = line
                    }
                }
            }
        }
    }

    func stop() async {
        let running = task.withLock { task in
            defer { task = nil }
            return task
        }
        running?.cancel()
        await running?.value
        console.clearProgress()
    }
}

/// Turns snapshots into frames, keeping a rate window for the run and one per running transfer.
struct TransferRates {
    private var overall = RateWindow()
    private var perDest: [String: RateWindow] = [:]

    mutating func frame(_ snapshot: SyncProgress.Snapshot, at now: ContinuousClock.Instant) -> ProgressFrame {
        overall.add(bytes: snapshot.bytesReceived, at: now)
        var windows: [String: RateWindow] = [:]
        var transfers: [ProgressFrame.Transfer] = []
        for transfer in snapshot.active {
            var window = perDest[transfer.dest] ?? RateWindow()
            window.add(bytes: transfer.bytesDone, at: now)
            windows[transfer.dest] = window
            transfers.append(.init(dest: transfer.dest, bytesDone: transfer.bytesDone, bytesTotal: transfer.bytesTotal,
                                   bytesPerSecond: window.bytesPerSecond))
        }
        // Finished transfers' windows go; a retried one starts a new window.
        perDest = windows
        return ProgressFrame(
            bytesReceived: snapshot.bytesReceived, bytesRemaining: snapshot.bytesRemaining,
            entriesOfUnknownSize: snapshot.entriesOfUnknownSize, entriesDone: snapshot.entriesDone,
            entriesTotal: snapshot.entriesTotal, bytesPerSecond: overall.bytesPerSecond, transfers: transfers)
    }
}

/// Transfer rate over the last few seconds: over `span`, or over the time since the sample
/// before, when samples come further apart than that.
struct RateWindow {
    private var samples: [(time: ContinuousClock.Instant, bytes: Int64)] = []
    static let span: Duration = .seconds(3)

    mutating func add(bytes: Int64, at time: ContinuousClock.Instant) {
        samples.append((time, bytes))
        // The newest sample at least `span` old stays as the window's start: a display that
        // samples less often than `span` (a dumb terminal's line every 5 s) must still have
        // two samples to measure between, not only the one just added.
        while samples.count > 1, time - samples[1].time >= Self.span { samples.removeFirst() }
    }

    /// Never negative (a restarted transfer counts from zero again) and never NaN.
    var bytesPerSecond: Double {
        guard let first = samples.first, let last = samples.last, last.time > first.time else { return 0 }
        let elapsed = last.time - first.time
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return max(0, Double(last.bytes) - Double(first.bytes)) / seconds
    }
}

/// The terminal stderr is drawn on.
enum Terminal {
    /// Its width in columns: what the terminal says, else `COLUMNS`, else 80.
    static func columns() -> Int {
        var size = winsize()
        if ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 {
            return Int(size.ws_col)
        }
        return columnsVariable() ?? 80
    }

    /// `COLUMNS`, when it holds a width (at most 1000).
    static func columnsVariable() -> Int? {
        guard let text = getenv("COLUMNS").map({ String(cString: $0) }), let columns = Int(text), columns > 0 else { return nil }
        return min(columns, 1000)
    }
}
