/// Durations in a manifest: whole numbers with a unit, `500ms`, `30s`, `5m`, `1h`, or several
/// of them from the largest unit down, `1h30m`, `1m30s`, `2s500ms`.
public enum DurationSyntax {
    private static let units: [(symbol: String, milliseconds: Int64)] = [
        ("h", 3_600_000), ("m", 60_000), ("s", 1_000), ("ms", 1),
    ]

    private static let example = "like 500ms, 30s, 5m, 1h or 1m30s"

    /// The duration `text` spells; it must be greater than zero.
    /// `duration` as the manifest would write it: `5m`, `1m30s`, `500ms`, `0ms`.
    public static func text(_ duration: Duration) -> String {
        var remaining = duration.milliseconds
        guard remaining > 0 else { return "0ms" }
        var text = ""
        for unit in units where remaining >= unit.milliseconds {
            text += "\(remaining / unit.milliseconds)\(unit.symbol)"
            remaining %= unit.milliseconds
        }
        return text
    }

    /// The duration `text` spells, or nil; for command-line options.
    public static func duration(_ text: String) -> Duration? {
        try? parse(text)
    }

    static func parse(_ text: String) throws(ValueProblem) -> Duration {
        let characters = Array(text)
        guard !characters.isEmpty else {
            throw ValueProblem("expected a duration \(example), found an empty value")
        }
        var total: Int64 = 0
        var position = 0
        var previousUnitRank = -1
        while position < characters.count {
            let digitsStart = position
            while position < characters.count, characters[position].isASCII, characters[position].isNumber {
                position += 1
            }
            let digits = String(characters[digitsStart..<position])
            let unitStart = position
            while position < characters.count, characters[position].isLetter {
                position += 1
            }
            let unit = String(characters[unitStart..<position])
            guard !digits.isEmpty else {
                throw ValueProblem("expected a duration \(example), found `\(text)`")
            }
            guard !unit.isEmpty else {
                if position == characters.count, digitsStart == 0 {
                    throw ValueProblem("`\(text)` has no unit; write `\(text)s` for seconds (units: ms, s, m, h)")
                }
                throw ValueProblem("expected a duration \(example), found `\(text)`")
            }
            guard let rank = units.firstIndex(where: { $0.symbol == unit }) else {
                throw ValueProblem("unknown unit `\(unit)` in `\(text)`; use ms, s, m or h (\(example))")
            }
            guard rank > previousUnitRank else {
                throw ValueProblem("units in `\(text)` must go from largest to smallest, each once, \(example)")
            }
            previousUnitRank = rank
            guard let count = Int64(digits) else {
                throw ValueProblem("duration `\(text)` is too long")
            }
            let (part, overflowedPart) = count.multipliedReportingOverflow(by: units[rank].milliseconds)
            let (sum, overflowedSum) = total.addingReportingOverflow(part)
            guard !overflowedPart, !overflowedSum else {
                throw ValueProblem("duration `\(text)` is too long")
            }
            total = sum
        }
        guard total > 0 else {
            throw ValueProblem("expected a duration greater than zero, found `\(text)`")
        }
        return .milliseconds(total)
    }
}
