/// Byte counts in a manifest: a plain integer, or for limits such as `max_size` a number with a
/// unit, binary (`10KiB`, `5MiB`, `2GiB`, `1TiB`) or decimal (`1KB`, `1MB`, `1GB`, `1TB`).
enum ByteCountSyntax {
    private static let units: [(symbol: String, bytes: Int64)] = [
        ("b", 1),
        ("kib", 1 << 10), ("mib", 1 << 20), ("gib", 1 << 30), ("tib", 1 << 40),
        ("kb", 1_000), ("mb", 1_000_000), ("gb", 1_000_000_000), ("tb", 1_000_000_000_000),
    ]

    /// The number of bytes `text` spells: digits, optionally followed (after optional spaces) by
    /// a unit, matched without regard to case.
    static func parse(_ text: String) throws(ValueProblem) -> Int64 {
        let expected = "expected a size like 1048576, 10KiB, 5MiB, 2GiB or 1GB"
        let digits = text.prefix { $0.isASCII && $0.isNumber }
        let unit = text.dropFirst(digits.count).drop { $0 == " " }
        guard !digits.isEmpty else {
            if text.hasPrefix("-") {
                throw ValueProblem("\(expected), found a negative number `\(text)`")
            }
            throw ValueProblem("\(expected), found `\(text)`")
        }
        guard let count = Int64(digits) else {
            throw ValueProblem("size `\(text)` is too large")
        }
        if unit.isEmpty { return count }
        guard let multiplier = units.first(where: { $0.symbol == unit.lowercased() })?.bytes else {
            if ["k", "m", "g", "t"].contains(unit.lowercased()) {
                throw ValueProblem("unit `\(unit)` in `\(text)` is ambiguous; write \(unit.uppercased())iB (powers of 1024) or \(unit.uppercased())B (powers of 1000)")
            }
            throw ValueProblem("\(expected), found `\(text)`")
        }
        let (bytes, overflowed) = count.multipliedReportingOverflow(by: multiplier)
        guard !overflowed else {
            throw ValueProblem("size `\(text)` is too large")
        }
        return bytes
    }
}
