import Glibc

/// The values `sync --metrics-file` takes from outside the run.
enum MetricsLabel {
    static func nowMilliseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec).saturatingMultiplied(by: 1000).saturatingAdding(Int64(now.tv_nsec / 1_000_000))
    }

    static func milliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds.saturatingMultiplied(by: 1000).saturatingAdding(attoseconds / 1_000_000_000_000_000)
    }
}
