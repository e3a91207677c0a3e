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
        return String(format: "%.\(digits)f %@", value, units[unit])
    }
}

enum DurationText {
    static func format(_ duration: Duration) -> String {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        return format(seconds: seconds)
    }

    static func format(seconds: Double) -> String {
        if seconds < 1 { return String(format: "%.0fms", seconds * 1000) }
        if seconds < 60 { return String(format: "%.1fs", seconds) }
        let whole = Int(seconds.rounded())
        if whole < 3600 { return String(format: "%d:%02d", whole / 60, whole % 60) }
        return String(format: "%d:%02d:%02d", whole / 3600, (whole / 60) % 60, whole % 60)
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
