/// The response headers mirror reads. A response's fields carry which of them they are, so
/// that finding one compares a byte, not a name: a reply's head is read a dozen ways (its
/// length, whether it contradicts itself, its validators), each looking through its fields.
enum KnownHeader: UInt8, CaseIterable, Sendable {
    case contentLength, contentRange, contentEncoding, etag, lastModified, retryAfter, transferEncoding
    // A segmented download asks whether ranges are offered and how old the version is.
    case acceptRanges, date

    /// The names, lowercased, in the order of the cases.
    static let names: [String] = allCases.map { $0.lowercasedName.description }

    var name: String { Self.names[Int(rawValue)] }

    private var lowercasedName: StaticString {
        switch self {
        case .contentLength: "content-length"
        case .contentRange: "content-range"
        case .contentEncoding: "content-encoding"
        case .etag: "etag"
        case .lastModified: "last-modified"
        case .retryAfter: "retry-after"
        case .transferEncoding: "transfer-encoding"
        case .acceptRanges: "accept-ranges"
        case .date: "date"
        }
    }

    /// The header named `lowercasedName`, if mirror reads it.
    init?(lowercasedName: String) {
        guard let index = Self.names.firstIndex(of: lowercasedName) else { return nil }
        self.init(rawValue: UInt8(index))
    }

    /// The header a field's name (in any case, as it came) is, if mirror reads it: told apart by
    /// length first, then compared byte by byte.
    init?(name: UnsafeRawBufferPointer) {
        let candidates: (KnownHeader, KnownHeader?, KnownHeader?)
        switch name.count {
        case 4: candidates = (.etag, .date, nil)
        case 11: candidates = (.retryAfter, nil, nil)
        case 13: candidates = (.contentRange, .lastModified, .acceptRanges)
        case 14: candidates = (.contentLength, nil, nil)
        case 16: candidates = (.contentEncoding, nil, nil)
        case 17: candidates = (.transferEncoding, nil, nil)
        default: return nil
        }
        if candidates.0.isNamed(name) {
            self = candidates.0
        } else if let second = candidates.1, second.isNamed(name) {
            self = second
        } else if let third = candidates.2, third.isNamed(name) {
            self = third
        } else {
            return nil
        }
    }

    /// Whether `name`, lowercased, is this header's name.
    private func isNamed(_ name: UnsafeRawBufferPointer) -> Bool {
        lowercasedName.withUTF8Buffer { wanted in
            guard wanted.count == name.count else { return false }
            var index = 0
            while index < wanted.count, name[index].asciiLowercased == wanted[index] { index += 1 }
            return index == wanted.count
        }
    }
}

/// The status and headers of one response (the last one, after any 1xx or redirect hop).
public struct ResponseHead: Sendable, Equatable {
    /// A header field, name lowercased, with the header it is when mirror reads it.
    struct Field: Sendable {
        let name: String
        var value: String
        let known: KnownHeader?

        init(_ known: KnownHeader, value: String) {
            self.name = known.name
            self.value = value
            self.known = known
        }

        init(lowercasedName name: String, value: String) {
            self.name = name
            self.value = value
            self.known = KnownHeader(lowercasedName: name)
        }
    }

    public var status: Int
    private var known: [Field]

    /// Header fields in arrival order; names lowercased.
    public var fields: [(name: String, value: String)] {
        get { known.map { (name: $0.name, value: $0.value) } }
        // The names as given, as they were kept before there was a `known` header kind.
        set { known = newValue.map { Field(lowercasedName: $0.name, value: $0.value) } }
    }

    public init(status: Int, fields: [(name: String, value: String)] = []) {
        self.init(status: status, lowercasedFields: fields.map { (name: $0.name.lowercased(), value: $0.value) })
    }

    /// For fields whose names are lowercase already.
    init(status: Int, lowercasedFields: [(name: String, value: String)]) {
        self.init(status: status, known: lowercasedFields.map { Field(lowercasedName: $0.name, value: $0.value) })
    }

    /// For the fields the transfer engine keeps (`HeaderLineParser`).
    init(status: Int, known: [Field]) {
        self.status = status
        self.known = known
    }

    public static func == (lhs: ResponseHead, rhs: ResponseHead) -> Bool {
        lhs.status == rhs.status && lhs.known.elementsEqual(rhs.known, by: { $0.name == $1.name && $0.value == $1.value })
    }

    /// The last value of a header, by case-insensitive name.
    public subscript(_ name: String) -> String? {
        let lowercased = name.lowercased()
        if let header = KnownHeader(lowercasedName: lowercased) { return self[header] }
        return known.last(where: { $0.name == lowercased })?.value
    }

    /// The last value of a header mirror reads.
    subscript(_ header: KnownHeader) -> String? {
        var index = known.count
        while index > 0 {
            index -= 1
            if known[index].known == header { return known[index].value }
        }
        return nil
    }

    /// The value of the one field of that header; nil when there is none or more than one.
    private func onlyField(_ header: KnownHeader) -> String? {
        var found: Int?
        for index in known.indices where known[index].known == header {
            if found != nil { return nil }
            found = index
        }
        return found.map { known[$0].value }
    }

    public var isSuccess: Bool { (200..<300).contains(status) }
    public var isRedirect: Bool { [301, 302, 303, 307, 308].contains(status) }

    /// Content-Length, when present and valid (a reply whose Content-Length is present but not
    /// valid is refused by `contradiction`). mirror sends no `Accept-Encoding` and undoes no
    /// Content-Encoding (as curl without `--compressed`): the bytes as sent are the bytes
    /// stored, so this is the stored file's length even when the body is, say, gzip-coded.
    /// The same length repeated (`100, 100`, or in two fields) is that length (RFC 9110 §8.6).
    public var contentLength: Int64? {
        // Every value must be the same valid number; checked without building a set (this runs
        // for every reply).
        if let only = onlyField(.contentLength), !Self.holdsList(only) {
            return HeaderLength.parse(Substring(only).trimmingSpaces)
        }
        var length: Int64?
        var seen = false
        var agree = true
        forEachValue(.contentLength) { value in
            let parsed = HeaderLength.parse(value)
            if !seen {
                seen = true
                length = parsed
            } else if parsed != length {
                agree = false
            }
        }
        return agree ? length : nil
    }

    /// How a value is compared for `contradiction`: lengths as numbers (`0100` is `100`),
    /// anything else as text.
    private enum ComparedValue: Equatable {
        case number(Int64)
        case text(Substring)

        init(_ value: Substring, asNumber: Bool) {
            if asNumber, let number = HeaderLength.parse(value) { self = .number(number) } else { self = .text(value) }
        }
    }

    /// What makes this reply contradict itself, if anything: a length that cannot be one, two
    /// different lengths, or two different ranges. libcurl believes one of them (or, for a
    /// length it cannot read, none, and takes the body to end where the connection does), so
    /// which bytes came, and whether all of them did, is not known.
    public var contradiction: String? {
        if let unreadable = unreadableLength { return unreadable }
        // Nearly every reply: one value of each at most, nothing to compare.
        var lengths = 0
        var ranges = 0
        for index in known.indices {
            switch known[index].known {
            case .contentLength?: lengths += Self.holdsList(known[index].value) ? 2 : 1
            case .contentRange?: ranges += Self.holdsList(known[index].value) ? 2 : 1
            default: break
            }
        }
        if lengths <= 1, ranges <= 1 { return nil }
        for header in [KnownHeader.contentLength, .contentRange] {
            let asNumber = header == .contentLength
            var distinct: [Substring] = []
            var keys: [ComparedValue] = []
            forEachValue(header) { value in
                let key = ComparedValue(value, asNumber: asNumber)
                if !keys.contains(key) {
                    keys.append(key)
                    distinct.append(value)
                }
            }
            if distinct.count > 1 {
                return "\(asNumber ? "Content-Length" : "Content-Range") given as \(distinct.map { "`\($0)`" }.joined(separator: " and "))"
            }
        }
        return nil
    }

    /// A length-bearing header that `HeaderLength` cannot read: any Content-Length, and the
    /// Content-Range of a 206 or a 416 (on other statuses it describes nothing that is kept).
    private var unreadableLength: String? {
        var unreadable: Substring?
        for index in known.indices where known[index].known == .contentLength {
            let field = known[index].value
            if !Self.holdsList(field) {
                // One value, trimmed already (`HeaderLineParser`) or trimmed here.
                let value = Substring(field).trimmingSpaces
                if HeaderLength.parse(value) == nil { unreadable = value }
            } else {
                forEachValue(in: field) { value in
                    if unreadable == nil, HeaderLength.parse(value) == nil { unreadable = value }
                }
            }
            if unreadable != nil { break }
        }
        if let unreadable {
            return "Content-Length \(Self.quoted(unreadable)) is not a number of bytes from 0 to \(HeaderLength.maximum)"
        }
        guard status == 206 || status == 416 else { return nil }
        for index in known.indices where known[index].known == .contentRange && ContentRange(known[index].value) == nil {
            return "Content-Range \(Self.quoted(Substring(known[index].value))) is not `bytes FIRST-LAST/TOTAL` or `bytes */TOTAL` with FIRST <= LAST < TOTAL <= \(HeaderLength.maximum)"
        }
        return nil
    }

    /// A server's value for a message: in backquotes, and cut short past 40 characters.
    private static func quoted(_ value: Substring) -> String {
        value.count > 40 ? "`\(value.prefix(40))…`" : "`\(value)`"
    }

    /// Calls `body` with every value of a header, fields and comma-separated list items alike,
    /// trimmed, in order. Only for headers whose values hold no commas of their own.
    private func forEachValue(_ header: KnownHeader, _ body: (Substring) -> Void) {
        for index in known.indices where known[index].known == header {
            forEachValue(in: known[index].value, body)
        }
    }

    /// `forEachValue` for one field's value.
    private func forEachValue(in value: String, _ body: (Substring) -> Void) {
        var rest = Substring(value)
        while true {
            if let comma = rest.firstIndex(of: ",") {
                body(rest[..<comma].trimmingSpaces)
                rest = rest[rest.index(after: comma)...]
            } else {
                body(rest.trimmingSpaces)
                break
            }
        }
    }

    /// Whether a value holds a comma, so more than one list item.
    private static func holdsList(_ value: String) -> Bool {
        var value = value
        return value.withUTF8 { $0.contains(UInt8(ascii: ",")) }
    }

    /// A Content-Encoding other than identity: the server sent a coded representation.
    public var isEncoded: Bool {
        guard let encoding = self[.contentEncoding].map({ Substring($0).trimmingSpaces.lowercased() }) else { return false }
        return !encoding.isEmpty && encoding != "identity"
    }

    /// The body came in chunks, whose end libcurl checks: a cut one is an error, not a short file.
    var isChunked: Bool {
        var chunked = false
        forEachValue(.transferEncoding) { if $0.lowercased() == "chunked" { chunked = true } }
        return chunked
    }

    var contentRange: ContentRange? { self[.contentRange].flatMap(ContentRange.init) }

    /// The reply's ETag and Last-Modified (no size: which size applies depends on the status).
    var validators: RemoteValidators { RemoteValidators(etag: etag, lastModified: lastModified, size: nil) }

    public var etag: String? { validator(.etag) }
    public var lastModified: String? { validator(.lastModified) }

    /// A validator as the server sent it, or nil when it is absent or its bytes were not UTF-8.
    /// Header values are decoded as UTF-8 with U+FFFD in place of what is not (RFC 9110 lets a
    /// tag carry such obs-text bytes), and then two different tags could read the same: `"\xE9"`
    /// and `"\xE8"` both become `"\u{FFFD}"`, and sent back as `If-None-Match` neither is what
    /// the server sent. Such a validator names no version mirror can compare or send back, so
    /// it is treated as absent, as from a server that sends none (a U+FFFD the server really
    /// sent as UTF-8 is taken the same way: it cannot be told apart).
    private func validator(_ header: KnownHeader) -> String? {
        guard let field = self[header] else { return nil }
        var value = field
        // Most values come trimmed already (`HeaderLineParser`): no copy of those.
        if let first = value.utf8.first, let last = value.utf8.last, first == 0x20 || first == 0x09 || last == 0x20 || last == 0x09 {
            value = String(Substring(field).trimmingSpaces)
        }
        // U+FFFD is EF BF BD in UTF-8; looked for in the bytes, not by decoding scalars.
        let replaced = value.withUTF8 { bytes in
            var index = 0
            while index + 2 < bytes.count {
                if bytes[index] == 0xEF, bytes[index + 1] == 0xBF, bytes[index + 2] == 0xBD { return true }
                index += 1
            }
            return false
        }
        return replaced ? nil : value
    }

    /// The total size of the file this response describes: Content-Range's total for a 206 or
    /// a 416, otherwise the Content-Length of a 200.
    public var totalSize: Int64? {
        switch status {
        case 206, 416: return contentRange?.total
        case 200: return contentLength
        default: return nil
        }
    }
}

