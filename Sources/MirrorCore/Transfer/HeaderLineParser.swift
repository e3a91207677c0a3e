/// Reads a response's header lines, as libcurl hands them over one at a time (CR LF
/// included), into the status and the fields mirror uses. Pure: bytes in, values out.
///
/// Each status line starts a new response (after a 1xx, or on a redirect hop) and forgets the
/// last one's fields, so what is left at the end is the final response's. Names are
/// lowercased; values are trimmed of spaces and tabs; an obsolete folded continuation is
/// appended to the header it continues. Headers not in `wantedHeaders` are skipped before
/// any string is made of them.
struct HeaderLineParser {
    /// The last status line's code; 0 before one, or when it had none.
    private(set) var status = 0
    /// The wanted fields of the last response, names lowercased, in the order received.
    private(set) var fields: [(name: String, value: String)] = []
    /// Whether an HTTP status line came: protocols without headers (file, ftp) send none.
    private(set) var sawStatusLine = false
    /// Whether the last header line was kept, so that a continuation of it is too.
    private var keptLastHeader = false

    /// The response headers mirror reads, lowercased.
    static let wantedNames: [String] = [
        "content-length", "content-range", "content-encoding", "etag", "last-modified", "retry-after", "transfer-encoding",
        // A segmented download asks whether ranges are offered and how old the version is.
        "accept-ranges", "date",
    ]
    static let wantedHeaders: [[UInt8]] = wantedNames.map { Array($0.utf8) }
    /// Wanted fields a reply usually has (an nginx file: length, ETag, Last-Modified, ranges,
    /// date).
    static let usualFields = 6

    /// The head of the last response, once a status line came.
    var head: ResponseHead? {
        sawStatusLine ? ResponseHead(status: status, lowercasedFields: fields) : nil
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
            fields.removeAll(keepingCapacity: true)
            // Room for what most replies send of the wanted headers, in one allocation rather
            // than one at each doubling.
            fields.reserveCapacity(Self.usualFields)
            sawStatusLine = true
            keptLastHeader = false
            return
        }
        if line[0] == 0x20 || line[0] == 0x09 {
            if keptLastHeader, !fields.isEmpty {
                fields[fields.count - 1].value += " " + String(Substring(String(decoding: line, as: UTF8.self)).trimmingSpaces)
            }
            return
        }
        // A line with no colon is no header: skipped, and it changes nothing.
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return }
        let name = line[..<colon]
        let wanted = Self.wantedHeaders.firstIndex { wanted in
            wanted.count == name.count && zip(wanted, name).allSatisfy { $0 == $1.asciiLowercased }
        }
        keptLastHeader = wanted != nil
        guard let wanted else { return }
        var value = line[(colon + 1)...]
        while let first = value.first, first == 0x20 || first == 0x09 { value = value.dropFirst() }
        while let last = value.last, last == 0x20 || last == 0x09 { value = value.dropLast() }
        // The name as listed (it matched it, lowercased), and the value from a buffer of bytes:
        // a string made from a lazily lowercased slice went through a protocol cast that the
        // runtime looked up again for every header, about 3 µs each.
        fields.append((name: Self.wantedNames[wanted], value: String(decoding: UnsafeRawBufferPointer(rebasing: value), as: UTF8.self)))
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
