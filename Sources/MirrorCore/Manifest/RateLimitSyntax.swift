/// How a `rate_limit` (and `--rate-limit`) is written: a rate in bytes per second with an
/// optional unit and `/s` (`1048576`, `512KiB`, `5MiB/s`, `10MB`), `off`, or a timetable of
/// `HH:MM,RATE` pairs separated by spaces in increasing order of time, local time
/// (`"08:00,512KiB 19:00,off"`).
enum RateLimitSyntax {
    static func parse(_ text: String) throws(ValueProblem) -> RateLimit {
        let trimmed = Substring(text).trimmingSpaces
        let items = trimmed.split(separator: " ", omittingEmptySubsequences: true)
        guard let first = items.first else {
            throw ValueProblem("expected a rate like 5MiB, `off` or a timetable like \"08:00,512KiB 19:00,off\", found an empty value")
        }
        if items.count == 1, !first.contains(",") {
            return RateLimit(bytesPerSecond: try rate(String(first)), description: String(trimmed))
        }
        var changes: [RateLimit.Change] = []
        for item in items {
            let parts = item.split(separator: ",", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2 else {
                throw ValueProblem("timetable item `\(item)` is not `HH:MM,RATE`; write items like \"08:00,512KiB 19:00,off\", separated by spaces")
            }
            let minute = try minuteOfDay(String(parts[0]), item: String(item))
            if let previous = changes.last, previous.minuteOfDay >= minute {
                throw ValueProblem("timetable item `\(item)` is not later than the one before it; list the times in increasing order")
            }
            changes.append(RateLimit.Change(minuteOfDay: minute, bytesPerSecond: try rate(String(parts[1]))))
        }
        return RateLimit(changes: changes, description: String(trimmed))
    }

    /// `HH:MM`, 00:00 to 23:59.
    private static func minuteOfDay(_ text: String, item: String) throws(ValueProblem) -> Int {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, parts.allSatisfy({ $0.count == 2 && $0.allSatisfy { $0.isASCII && $0.isNumber } }),
              let hour = Int(parts[0]), let minute = Int(parts[1]), hour < 24, minute < 60
        else {
            throw ValueProblem("timetable item `\(item)` does not start with a time from 00:00 to 23:59 (HH:MM)")
        }
        return hour * 60 + minute
    }

    /// A rate in bytes per second, or nil for `off`.
    private static func rate(_ text: String) throws(ValueProblem) -> Int64? {
        if text.lowercased() == "off" { return nil }
        var amount = Substring(text)
        if amount.lowercased().hasSuffix("/s") { amount = amount.dropLast(2) }
        let bytes: Int64
        do {
            bytes = try ByteCountSyntax.parse(String(amount))
        } catch {
            throw ValueProblem("expected a rate like 1048576, 512KiB or 5MiB/s (bytes per second) or `off`, found `\(text)`")
        }
        guard bytes > 0 else {
            throw ValueProblem("a rate of 0 would stop every transfer; write `off` for no limit")
        }
        return bytes
    }
}
