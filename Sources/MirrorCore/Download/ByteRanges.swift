/// Bytes `[start, end)` of a file.
struct ByteRange: Equatable, Sendable, CustomStringConvertible {
    var start: Int64
    var end: Int64

    init(_ start: Int64, _ end: Int64) {
        self.start = start
        self.end = end
    }

    var count: Int64 { end - start }
    var isEmpty: Bool { end <= start }
    var description: String { "\(start)-\(end)" }
}

/// Sets of byte ranges, kept sorted and merged: what a segmented download has written, made
/// durable, or still has to fetch.
enum ByteRanges {
    /// `ranges` sorted, with touching and overlapping ones joined and empty ones dropped.
    static func merged(_ ranges: [ByteRange]) -> [ByteRange] {
        var result: [ByteRange] = []
        for range in ranges.filter({ !$0.isEmpty }).sorted(by: { $0.start < $1.start }) {
            if let last = result.indices.last, range.start <= result[last].end {
                result[last].end = max(result[last].end, range.end)
            } else {
                result.append(range)
            }
        }
        return result
    }

    /// How many bytes from 0 on `ranges` covers without a gap.
    static func prefix(of ranges: [ByteRange]) -> Int64 {
        guard let first = merged(ranges).first, first.start == 0 else { return 0 }
        return first.end
    }

    /// The parts of `[0, total)` that `ranges` does not cover, in order.
    static func gaps(in ranges: [ByteRange], total: Int64) -> [ByteRange] {
        var gaps: [ByteRange] = []
        var at: Int64 = 0
        for range in merged(ranges) where range.end > at {
            if range.start > at { gaps.append(ByteRange(at, min(range.start, total))) }
            at = max(at, range.end)
            if at >= total { break }
        }
        if at < total { gaps.append(ByteRange(at, total)) }
        return gaps.filter { !$0.isEmpty }
    }

    /// Whether `ranges` covers all of `[0, total)`.
    static func covers(_ ranges: [ByteRange], total: Int64) -> Bool {
        gaps(in: ranges, total: total).isEmpty
    }

    /// `0-1048576,2097152-4194304`: how the state store keeps a map's ranges.
    static func encode(_ ranges: [ByteRange]) -> String {
        merged(ranges).map(\.description).joined(separator: ",")
    }

    /// The ranges `encode` wrote; nil for anything else (a damaged map is no map).
    static func decode(_ text: String) -> [ByteRange]? {
        if text.isEmpty { return [] }
        var ranges: [ByteRange] = []
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let bounds = part.split(separator: "-", omittingEmptySubsequences: false)
            guard bounds.count == 2, let start = Int64(bounds[0]), let end = Int64(bounds[1]), start >= 0, start < end else {
                return nil
            }
            ranges.append(ByteRange(start, end))
        }
        return ranges
    }
}
