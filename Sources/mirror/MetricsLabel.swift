import Glibc

/// The values `sync --metrics-file` takes from outside the run.
enum MetricsLabel {
    /// The manifest's path as its `manifest` label: made absolute (not resolving symbolic
    /// links), so that runs from cron and from a shell in another directory give one series.
    static func manifestPath(_ path: String) -> String {
        guard !path.hasPrefix("/") else { return path }
        guard let directory = getcwd(nil, 0) else { return path }
        defer { free(directory) }
        var relative = Substring(path)
        while relative.hasPrefix("./") { relative = relative.dropFirst(2) }
        let base = String(cString: directory)
        return (base.hasSuffix("/") ? base : base + "/") + relative
    }

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
