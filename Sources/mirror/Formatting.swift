import MirrorCore

/// Byte counts for people: binary units, three significant figures. Every Int64, including
/// a server's `Content-Length: 9223372036854775807` and the sums it saturates, fits in
/// `maxWidth` characters.
enum ByteCount {
    static let maxWidth = 8
    private static let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]

    static func format(_ bytes: Int64) -> String {
        // No count of bytes is below zero; a negative one is a bug upstream, shown as nothing.
        let bytes = max(0, bytes)
        var value = Double(bytes)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        if unit == 0 { return "\(bytes) B" }
        // 1023.96 rounds to "1024" with no decimals: still four digits, still fits.
        let digits = value < 10 ? 2 : value < 100 ? 1 : 0
        return TextFormat.fixed(value, digits: digits) + " " + units[unit]
    }

    /// A transfer rate, bytes per second; rates below one byte a second show as `0 B/s`.
    static func rate(_ bytesPerSecond: Double) -> String {
        format(Int64(saturating: bytesPerSecond.isFinite ? bytesPerSecond : 0)) + "/s"
    }
}

enum DurationText {
    /// Durations this long or longer (a transfer dripping under a byte a second) are not spelled out.
    static let longest: Double = 100 * 86_400
    static let maxWidth = 8

    static func format(_ duration: Duration) -> String {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        return format(seconds: seconds)
    }

    /// `500ms`, `12.5s`, `4:05`, `1:02:03`, `3d04h`; `>100d` beyond `longest` and `--` for a
    /// value that is not a duration (NaN, negative). At most `maxWidth` characters.
    static func format(seconds: Double) -> String {
        guard !seconds.isNaN, seconds >= 0 else { return "--" }
        guard seconds < longest else { return ">100d" }
        if seconds < 0.9995 { return TextFormat.fixed(seconds * 1000, digits: 0) + "ms" }
        if seconds < 59.95 { return TextFormat.fixed(seconds, digits: 1) + "s" }
        let whole = Int(seconds.rounded())
        if whole < 3600 { return "\(whole / 60):" + TextFormat.twoDigits(whole % 60) }
        if whole < 86_400 {
            return "\(whole / 3600):" + TextFormat.twoDigits((whole / 60) % 60) + ":" + TextFormat.twoDigits(whole % 60)
        }
        return "\(whole / 86_400)d" + TextFormat.twoDigits((whole / 3600) % 24) + "h"
    }
}

/// The few number and column formats the output needs, without Foundation's formatter.
enum TextFormat {
    /// `value` rounded to `digits` decimals (0 to 3); values beyond Int64 are held at its
    /// bounds, NaN shows as 0.
    static func fixed(_ value: Double, digits: Int) -> String {
        let scale = [1.0, 10.0, 100.0, 1000.0][min(max(digits, 0), 3)]
        let scaled = Int64(saturating: (value * scale).rounded())
        guard digits > 0 else { return String(scaled) }
        let sign = scaled < 0 ? "-" : ""
        let magnitude = scaled.magnitude
        let fraction = String(magnitude % UInt64(scale))
        return sign + String(magnitude / UInt64(scale)) + "." + String(repeating: "0", count: digits - fraction.count) + fraction
    }

    static func twoDigits(_ value: Int) -> String {
        value < 10 && value >= 0 ? "0\(value)" : String(value)
    }

    /// `text` padded with spaces to `width` terminal columns (never cut): a wide character
    /// (CJK, most emoji) counts two.
    static func padded(_ text: String, to width: Int) -> String {
        let used = TerminalText.columns(text)
        return used >= width ? text : text + String(repeating: " ", count: width - used)
    }
}

/// The one-line descriptions of finished entries.
enum SyncText {
    /// Why an interrupted entry stopped, and what it leaves on disk.
    static func interruptedDetail(_ report: EntryReport) -> String {
        if let partial = report.partialSize, partial > 0 {
            return "interrupted; the partial file (\(ByteCount.format(partial))) is kept for the next run"
        }
        return report.interruptedBeforeStart ? "interrupted before it started" : "interrupted; no partial file was kept"
    }

    /// How many entries an interruption reached before they started, as a clause for the
    /// interruption's line (`; 1998 entries were not started (--verbose lists them)`); empty
    /// when there were none. Each is listed on a line of its own only with `--verbose`.
    static func notStarted(_ reports: [EntryReport], verbose: Bool) -> String {
        let count = reports.count(where: \.interruptedBeforeStart)
        guard count > 0 else { return "" }
        let clause = count == 1 ? "; 1 entry was not started" : "; \(count) entries were not started"
        return verbose ? clause : clause + " (--verbose lists them)"
    }

    static func finishedLine(_ report: EntryReport) -> String {
        let size = report.size.map(ByteCount.format) ?? "?"
        switch report.outcome {
        case .skipped:
            return "up to date   \(report.dest) (\(size))"
        case .failed(let failure):
            return "failed       \(report.dest): \(failure)"
        case .transferred:
            switch report.action {
            case .resume(let from, _):
                // What completed the file from `from`; bytes of earlier failed attempts are in
                // the summary's total, not here.
                let fetched = report.size.map { ByteCount.format(max(0, $0.saturatingSubtracting(from))) + " " } ?? ""
                return "resumed      \(report.dest) (\(size), \(fetched)fetched from byte \(from))"
            case .finish:
                return "completed    \(report.dest) (\(size), partial file was complete)"
            case .replace:
                return "replaced     \(report.dest) (\(size))"
            case .restart:
                return "restarted    \(report.dest) (\(size))"
            case .cached:
                return "placed       \(report.dest) (\(size), from the cache)"
            default:
                return "downloaded   \(report.dest) (\(size))"
            }
        }
    }
}
