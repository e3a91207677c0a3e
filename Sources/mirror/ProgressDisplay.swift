import FoundationEssentials
import Glibc
import MirrorCore
import Synchronization

/// Redraws live progress on a terminal's stderr a few times a second: overall bytes of the
/// expected total, rate, ETA, files done, and the running transfers.
final class ProgressDisplay: Sendable {
    private let progress: SyncProgress
    private let console: Console
    private let task = Mutex<Task<Void, Never>?>(nil)
    static let interval: Duration = .milliseconds(200)
    static let shownTransfers = 6

    init(progress: SyncProgress, console: Console) {
        self.progress = progress
        self.console = console
    }

    func start() {
        let progress = self.progress
        let console = self.console
        task.withLock { task in
            task = Task {
                var rate = RateWindow()
                while !Task.isCancelled {
                    let snapshot = progress.snapshot()
                    rate.add(bytes: snapshot.bytesReceived, at: ContinuousClock.now)
                    console.drawProgress(Self.lines(snapshot, bytesPerSecond: rate.bytesPerSecond))
                    try? await Task.sleep(for: Self.interval)
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

    static func lines(_ snapshot: SyncProgress.Snapshot, bytesPerSecond: Double) -> [String] {
        let done = snapshot.bytesReceived
        let total = snapshot.bytesExpected
        let fraction = total > 0 ? min(1, Double(done) / Double(total)) : 0
        let width = 24
        let filled = Int(fraction * Double(width))
        let bar = "[" + String(repeating: "=", count: filled) + String(repeating: " ", count: width - filled) + "]"
        var eta = "--"
        if bytesPerSecond > 0, total > done {
            eta = DurationText.format(seconds: Double(total - done) / bytesPerSecond)
        }
        var lines = [
            "\(bar) \(ByteCount.format(done)) of \(ByteCount.format(total))  \(ByteCount.format(Int64(bytesPerSecond)))/s  ETA \(eta)  \(snapshot.entriesDone)/\(snapshot.entriesTotal) files"
        ]
        for transfer in snapshot.active.prefix(shownTransfers) {
            let of = transfer.bytesTotal.map { " of \(ByteCount.format($0))" } ?? ""
            lines.append("  \(transfer.dest)  \(ByteCount.format(transfer.bytesDone))\(of)")
        }
        if snapshot.active.count > shownTransfers {
            lines.append("  … and \(snapshot.active.count - shownTransfers) more")
        }
        return lines
    }
}

/// Transfer rate over the last few seconds.
struct RateWindow {
    private var samples: [(time: ContinuousClock.Instant, bytes: Int64)] = []
    static let span: Duration = .seconds(3)

    mutating func add(bytes: Int64, at time: ContinuousClock.Instant) {
        samples.append((time, bytes))
        while let first = samples.first, time - first.time > Self.span { samples.removeFirst() }
    }

    var bytesPerSecond: Double {
        guard let first = samples.first, let last = samples.last, last.time > first.time else { return 0 }
        let elapsed = last.time - first.time
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return Double(last.bytes - first.bytes) / seconds
    }
}
