/// A parsed `Content-Range` header value (RFC 9110 §14.4), bytes unit only.
///
/// Either a satisfied range, `bytes FIRST-LAST/TOTAL` (TOTAL may be `*`), or the unsatisfied
/// form `bytes */TOTAL` that comes with a 416.
struct ContentRange: Equatable, Sendable {
    /// First and last byte positions, inclusive; nil for the unsatisfied form.
    var first: Int64?
    var last: Int64?
    /// Complete length of the representation; nil when the server sent `*`.
    var total: Int64?

    init(first: Int64?, last: Int64?, total: Int64?) {
        self.first = first
        self.last = last
        self.total = total
    }

    /// Returns nil for anything malformed or impossible (numbers `HeaderLength` cannot read, a
    /// last byte before the first or past the total); `ResponseHead.contradiction` refuses a
    /// 206 or 416 that carries one.
    init?(_ header: String) {
        var text = Substring(header).drop(while: { $0 == " " })
        guard text.lowercased().hasPrefix("bytes ") else { return nil }
        text = text.dropFirst("bytes ".count).drop(while: { $0 == " " })
        let halves = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard halves.count == 2 else { return nil }
        let rangePart = halves[0].trimmingSpaces
        let totalPart = halves[1].trimmingSpaces
        if totalPart == "*" {
            total = nil
        } else {
            guard let value = HeaderLength.parse(totalPart) else { return nil }
            total = value
        }
        if rangePart == "*" {
            guard total != nil else { return nil }
            first = nil
            last = nil
            return
        }
        let bounds = rangePart.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard bounds.count == 2, let first = HeaderLength.parse(bounds[0]), let last = HeaderLength.parse(bounds[1]),
              first <= last
        else { return nil }
        if let total, last >= total { return nil }
        self.first = first
        self.last = last
    }
}

extension Substring {
    var trimmingSpaces: Substring {
        // On the bytes: a space or tab is never part of a longer UTF-8 sequence, so the first
        // kept byte starts a character and the byte after the last kept one ends one.
        let isBlank = { (byte: UInt8) in byte == 0x20 || byte == 0x09 }
        guard let start = utf8.firstIndex(where: { !isBlank($0) }),
              let last = utf8.lastIndex(where: { !isBlank($0) })
        else { return self[endIndex...] }
        return self[start..<utf8.index(after: last)]
    }
}
