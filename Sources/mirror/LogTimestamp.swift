import Glibc

/// The wall-clock time as RFC 3339 in UTC with milliseconds, e.g. `2026-01-31T08:00:00.123Z`:
/// the time of every log line, whatever the machine's time zone.
enum LogTimestamp {
    static func now() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return format(seconds: now.tv_sec, milliseconds: Int(now.tv_nsec / 1_000_000))
    }

    /// `duration` from now.
    static func after(_ duration: Duration) -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let milliseconds = Int64(now.tv_nsec / 1_000_000).saturatingAdding(duration.components.attoseconds / 1_000_000_000_000_000)
        let seconds = now.tv_sec.saturatingAdding(Int(duration.components.seconds)).saturatingAdding(Int(milliseconds / 1000))
        return format(seconds: seconds, milliseconds: Int(milliseconds % 1000))
    }

    static func format(seconds: Int, milliseconds: Int) -> String {
        var when = time_t(seconds)
        var parts = tm()
        // Past what the calendar can hold (a wait as long as a manifest can spell): the latest time there is.
        guard gmtime_r(&when, &parts) != nil, parts.tm_year + 1900 <= 9999 else { return "9999-12-31T23:59:59.999Z" }
        let date = "\(parts.tm_year + 1900)-\(TextFormat.twoDigits(Int(parts.tm_mon) + 1))-\(TextFormat.twoDigits(Int(parts.tm_mday)))"
        let time = [parts.tm_hour, parts.tm_min, parts.tm_sec].map { TextFormat.twoDigits(Int($0)) }.joined(separator: ":")
        let fraction = String(milliseconds)
        return "\(date)T\(time).\(String(repeating: "0", count: 3 - fraction.count))\(fraction)Z"
    }
}
