/// Reads a response's header lines, as libcurl hands them over one at a time (CR LF
/// included), into the status and the fields mirror uses. Pure: bytes in, values out.
///
/// Each status line starts a new response (after a 1xx, or on a redirect hop) and forgets the
/// last one's fields, so what is left at the end is the final response's. Names are
/// lowercased; values are trimmed of spaces and tabs; an obsolete folded continuation is
/// appended to the header it continues. Headers mirror does not read (`KnownHeader`) are skipped
/// before any string is made of them.
struct HeaderLineParser {
    /// The last status line's code; 0 before one, or when it had none.
    private(set) var status = 0
    /// The wanted fields of the last response, in the order received.
    private(set) var known: [ResponseHead.Field] = []
    /// Whether an HTTP status line came: protocols without headers (file, ftp) send none.
    private(set) var sawStatusLine = false
    /// Whether the last header line was kept, so that a continuation of it is too.
    private var keptLastHeader = false

    /// Wanted fields a reply usually has (an nginx file: length, ETag, Last-Modified, ranges,
    /// date).
    static let usualFields = 6

    /// The wanted fields, names lowercased.
    var fields: [(name: String, value: String)] { known.map { (name: $0.name, value: $0.value) } }

    /// The head of the last response, once a status line came.
    var head: ResponseHead? {
        sawStatusLine ? ResponseHead(status: status, known: known) : nil
    }

    /// Takes one raw header line.
    mutating func receive(_ bytes: UnsafeRawBufferPointer) {
        // Strip CR LF as bytes: in Swift "\r\n" is one Character, which hasSuffix("\n") misses.
        var end = bytes.count
        while end > 0, bytes[end - 1] == 0x0A || bytes[end - 1] == 0x0D { end -= 1 }
        guard end > 0 else { return }
        let line = UnsafeRawBufferPointer(rebasing: bytes[0..<end])
        if line.count >= 5, line[0] == UInt8(ascii: "H"), line[1] == UInt8(ascii: "T"), line[2] == UInt8(ascii: "T"),
           line[3] == UInt8(ascii: "P"), line[4] == UInt8(ascii: "/") {
            status = Self.statusCode(ofStatusLine: line)
            known.removeAll(keepingCapacity: true)
            // Room for what most replies send of the wanted headers, in one allocation rather
            // than one at each doubling.
            known.reserveCapacity(Self.usualFields)
            sawStatusLine = true
            keptLastHeader = false
            return
        }
        if line[0] == 0x20 || line[0] == 0x09 {
            if keptLastHeader, !known.isEmpty {
                known[known.count - 1].value += " " + String(Substring(String(decoding: line, as: UTF8.self)).trimmingSpaces)
            }
            return
        }
        // A line with no colon is no header: skipped, and it changes nothing.
        var colon = 0
        while colon < line.count, line[colon] != UInt8(ascii: ":") { colon += 1 }
        guard colon < line.count else { return }
        let header = KnownHeader(name: UnsafeRawBufferPointer(rebasing: line[..<colon]))
        keptLastHeader = header != nil
        guard let header else { return }
        var first = colon + 1
        var last = line.count
        while first < last, line[first] == 0x20 || line[first] == 0x09 { first += 1 }
        while last > first, line[last - 1] == 0x20 || line[last - 1] == 0x09 { last -= 1 }
        // The name as listed (it matched it, lowercased), and the value from a buffer of bytes:
        // a string made from a lazily lowercased slice went through a protocol cast that the
        // runtime looked up again for every header, about 3 µs each.
        known.append(ResponseHead.Field(header, value: String(decoding: UnsafeRawBufferPointer(rebasing: line[first..<last]), as: UTF8.self)))
    }

    /// The code in "HTTP/1.1 200 OK" or "HTTP/2 200"; 0 when there is none.
    static func statusCode(ofStatusLine line: UnsafeRawBufferPointer) -> Int {
        guard let space = line.firstIndex(of: 0x20) else { return 0 }
        var code = 0
        var digits = 0
        for byte in line[(space + 1)...] {
            if byte == 0x20 { break }
            guard (0x30...0x39).contains(byte), digits < 3 else { return 0 }
            code = code * 10 + Int(byte - 0x30)
            digits += 1
        }
        return digits == 3 ? code : 0
    }
}
