import MirrorCore

/// Byte counts for people: binary units, three significant figures.
enum ByteCount {
    static func format(_ bytes: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
        var value = Double(bytes)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        if unit == 0 { return "\(bytes) B" }
        let digits = value < 10 ? 2 : value < 100 ? 1 : 0
        return TextFormat.fixed(value, digits: digits) + " " + units[unit]
    }
}

enum DurationText {
    static func format(_ duration: Duration) -> String {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        return format(seconds: seconds)
    }

    static func format(seconds: Double) -> String {
        if seconds < 1 { return TextFormat.fixed(seconds * 1000, digits: 0) + "ms" }
        if seconds < 60 { return TextFormat.fixed(seconds, digits: 1) + "s" }
        let whole = Int(seconds.rounded())
        if whole < 3600 { return "\(whole / 60):" + TextFormat.twoDigits(whole % 60) }
        return "\(whole / 3600):" + TextFormat.twoDigits((whole / 60) % 60) + ":" + TextFormat.twoDigits(whole % 60)
    }
}

/// The few number and column formats the output needs, without Foundation's formatter.
enum TextFormat {
    /// `value` rounded to `digits` decimals (0 to 3).
    static func fixed(_ value: Double, digits: Int) -> String {
        let scale = [1.0, 10.0, 100.0, 1000.0][min(max(digits, 0), 3)]
        let scaled = Int64((value * scale).rounded())
        guard digits > 0 else { return String(scaled) }
        let sign = scaled < 0 ? "-" : ""
        let magnitude = scaled.magnitude
        let fraction = String(magnitude % UInt64(scale))
        return sign + String(magnitude / UInt64(scale)) + "." + String(repeating: "0", count: digits - fraction.count) + fraction
    }

    static func twoDigits(_ value: Int) -> String {
        value < 10 && value >= 0 ? "0\(value)" : String(value)
    }

    /// `text` padded with spaces to `width` characters (never cut).
    static func padded(_ text: String, to width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }
}

/// The one-line descriptions of finished entries.
enum SyncText {
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
                return "resumed      \(report.dest) (\(size), \(ByteCount.format(report.bytesTransferred)) fetched from byte \(from))"
            case .finish:
                return "completed    \(report.dest) (\(size), partial file was complete)"
            case .replace:
                return "replaced     \(report.dest) (\(size))"
            case .restart:
                return "restarted    \(report.dest) (\(size))"
            default:
                return "downloaded   \(report.dest) (\(size))"
            }
        }
    }
}
