/// One moment of a sync, as the progress block shows it: numbers only, rates included.
struct ProgressFrame: Equatable {
    struct Transfer: Equatable {
        var dest: String
        var bytesDone: Int64
        var bytesTotal: Int64?
        var bytesPerSecond: Double
    }

    var bytesReceived: Int64
    /// Bytes known to be still to come (see `SyncProgress.Snapshot.bytesRemaining`).
    var bytesRemaining: Int64
    var entriesOfUnknownSize: Int
    var entriesDone: Int
    var entriesTotal: Int
    /// The recent rate of the whole run.
    var bytesPerSecond: Double
    var transfers: [Transfer]
}

/// The lines of the progress block for a frame, each at most `width` columns wide: a line wider
/// than the terminal would wrap, and the block could no longer be redrawn in place.
///
/// The first line sums the run: bar, bytes received of the total known so far, rate, time
/// left and files done; what does not fit goes, least useful first. Then one line per running
/// transfer: its dest (cut in the middle when long), percent, bytes and rate.
enum ProgressLayout {
    static let shownTransfers = 6
    static let barWidth = 20
    /// A dest is cut no shorter than this before the numbers beside it are dropped instead.
    static let shortestDest = 12

    static func lines(_ frame: ProgressFrame, width: Int) -> [String] {
        let width = max(width, 1)
        var lines = [summary(frame, width: width)]
        for transfer in frame.transfers.prefix(shownTransfers) {
            lines.append(transferLine(transfer, width: width))
        }
        if frame.transfers.count > shownTransfers {
            lines.append(TerminalText.prefix("  ... and \(frame.transfers.count - shownTransfers) more", columns: width))
        }
        return lines
    }

    /// The first line. Parts in the order shown, each with its rank: when the line is too
    /// wide, the highest rank goes first.
    static func summary(_ frame: ProgressFrame, width: Int) -> String {
        var parts: [(text: String, rank: Int)] = []
        let received = max(0, frame.bytesReceived)
        let remaining = max(0, frame.bytesRemaining)
        let total = received.saturatingAdding(remaining)
        let unknown = frame.entriesOfUnknownSize
        // Before any size is known there is no "0 B of 0 B" to show, only the files.
        if total > 0 {
            let fraction = Double(received) / Double(total)
            let filled = min(barWidth, max(0, Int(saturating: fraction * Double(barWidth))))
            parts.append(("[" + String(repeating: "=", count: filled) + String(repeating: " ", count: barWidth - filled) + "]", 6))
            parts.append(("\(ByteCount.format(received)) of \(ByteCount.format(total))", 1))
            if unknown > 0 { parts.append(("+ \(unknown) of unknown size", 5)) }
            parts.append((ByteCount.rate(frame.bytesPerSecond), 3))
            if let eta = eta(remaining: remaining, bytesPerSecond: frame.bytesPerSecond, unknownSizes: unknown) {
                parts.append(("ETA " + eta, 2))
            }
        } else if received == 0 && unknown > 0 {
            parts.append(("waiting for the first reply", 5))
        }
        parts.append(("\(frame.entriesDone)/\(frame.entriesTotal) files", 4))
        return fitted(parts, width: width)
    }

    /// Time left for the bytes that remain at the recent rate; nil once nothing is known to
    /// remain. With sizes still unknown it is a lower bound, marked `>`.
    static func eta(remaining: Int64, bytesPerSecond: Double, unknownSizes: Int) -> String? {
        guard remaining > 0 else { return unknownSizes > 0 ? "--" : nil }
        guard bytesPerSecond.isFinite, bytesPerSecond > 0 else { return "--" }
        let text = DurationText.format(seconds: Double(remaining) / bytesPerSecond)
        return unknownSizes > 0 && !text.hasPrefix(">") ? ">" + text : text
    }

    static func transferLine(_ transfer: ProgressFrame.Transfer, width: Int) -> String {
        let dest = TerminalText.escaped(transfer.dest)
        let done = max(0, transfer.bytesDone)
        var numbers: [String] = []
        if let total = transfer.bytesTotal, total > 0 {
            let percent = min(100, max(0, Int(saturating: Double(done) / Double(total) * 100)))
            numbers.append(TextFormat.padded("\(percent)%", to: 4))
            numbers.append("\(ByteCount.format(done)) of \(ByteCount.format(total))")
        } else {
            numbers.append(ByteCount.format(done))
        }
        numbers.append(ByteCount.rate(transfer.bytesPerSecond))
        // Drop the rate, then the "of total", before squeezing the dest below its shortest.
        while !numbers.isEmpty {
            let tail = "  " + numbers.joined(separator: "  ")
            let room = width - 2 - TerminalText.columns(tail)
            if room >= min(shortestDest, TerminalText.columns(dest)) {
                return "  " + TerminalText.middleCut(dest, columns: room) + tail
            }
            numbers.removeLast()
        }
        return TerminalText.prefix("  " + TerminalText.middleCut(dest, columns: max(0, width - 2)), columns: width)
    }

    /// The parts joined by two spaces, dropping the highest-ranked ones until the line fits;
    /// whatever still does not fit is cut at `width`.
    static func fitted(_ parts: [(text: String, rank: Int)], width: Int) -> String {
        var kept = parts
        while true {
            let line = kept.map(\.text).joined(separator: "  ")
            if TerminalText.columns(line) <= width || kept.count <= 1 {
                return TerminalText.prefix(line, columns: width)
            }
            let worst = kept.indices.max(by: { kept[$0].rank < kept[$1].rank })!
            kept.remove(at: worst)
        }
    }
}
