/// The status and headers of one response (the last one, after any 1xx or redirect hop).
public struct ResponseHead: Sendable, Equatable {
    public var status: Int
    /// Header fields in arrival order; names lowercased.
    public var fields: [(name: String, value: String)]

    public init(status: Int, fields: [(name: String, value: String)] = []) {
        self.init(status: status, lowercasedFields: fields.map { (name: $0.name.lowercased(), value: $0.value) })
    }

    /// For fields whose names are lowercase already, as the transfer engine makes them.
    init(status: Int, lowercasedFields: [(name: String, value: String)]) {
        self.status = status
        self.fields = lowercasedFields
    }

    public static func == (lhs: ResponseHead, rhs: ResponseHead) -> Bool {
        lhs.status == rhs.status && lhs.fields.elementsEqual(rhs.fields, by: { $0 == $1 })
    }

    /// The last value of a header, by case-insensitive name.
    public subscript(_ name: String) -> String? {
        field(name.lowercased())
    }

    private func field(_ lowercasedName: String) -> String? {
        fields.last(where: { $0.name == lowercasedName })?.value
    }

    /// The value of the one field of that name; nil when there is none or more than one.
    private func onlyField(_ lowercasedName: String) -> String? {
        var found: String?
        for field in fields where field.name == lowercasedName {
            if found != nil { return nil }
            found = field.value
        }
        return found
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
        if let only = onlyField("content-length"), !Self.holdsList(only) {
            return HeaderLength.parse(Substring(only).trimmingSpaces)
        }
        var length: Int64?
        var seen = false
        var agree = true
        forEachValue("content-length") { value in
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
        for field in fields {
            if field.name == "content-length" {
                lengths += Self.holdsList(field.value) ? 2 : 1
            } else if field.name == "content-range" {
                ranges += Self.holdsList(field.value) ? 2 : 1
            }
        }
        if lengths <= 1, ranges <= 1 { return nil }
        for name in ["content-length", "content-range"] {
            let asNumber = name == "content-length"
            var distinct: [Substring] = []
            var keys: [ComparedValue] = []
            forEachValue(name) { value in
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
        for field in fields where field.name == "content-length" {
            if !Self.holdsList(field.value) {
                // One value, trimmed already (`HeaderLineParser`) or trimmed here.
                let value = Substring(field.value).trimmingSpaces
                if HeaderLength.parse(value) == nil { unreadable = value }
            } else {
                forEachValue(in: field.value) { value in
                    if unreadable == nil, HeaderLength.parse(value) == nil { unreadable = value }
                }
            }
            if unreadable != nil { break }
        }
        if let unreadable {
            return "Content-Length \(Self.quoted(unreadable)) is not a number of bytes from 0 to \(HeaderLength.maximum)"
        }
        guard status == 206 || status == 416 else { return nil }
        for field in fields where field.name == "content-range" && ContentRange(field.value) == nil {
            return "Content-Range \(Self.quoted(Substring(field.value))) is not `bytes FIRST-LAST/TOTAL` or `bytes */TOTAL` with FIRST <= LAST < TOTAL <= \(HeaderLength.maximum)"
        }
        return nil
    }

    /// A server's value for a message: in backquotes, and cut short past 40 characters.
    private static func quoted(_ value: Substring) -> String {
        value.count > 40 ? "`\(value.prefix(40))…`" : "`\(value)`"
    }

    /// Calls `body` with every value of a header, fields and comma-separated list items alike,
    /// trimmed, in order. Only for headers whose values hold no commas of their own.
    private func forEachValue(_ lowercasedName: String, _ body: (Substring) -> Void) {
        for field in fields where field.name == lowercasedName {
            forEachValue(in: field.value, body)
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
        guard let encoding = field("content-encoding").map({ Substring($0).trimmingSpaces.lowercased() }) else { return false }
        return !encoding.isEmpty && encoding != "identity"
    }

    /// The body came in chunks, whose end libcurl checks: a cut one is an error, not a short file.
    var isChunked: Bool {
        var chunked = false
        forEachValue("transfer-encoding") { if $0.lowercased() == "chunked" { chunked = true } }
        return chunked
    }

    var contentRange: ContentRange? { field("content-range").flatMap(ContentRange.init) }

    /// The reply's ETag and Last-Modified (no size: which size applies depends on the status).
    var validators: RemoteValidators { RemoteValidators(etag: etag, lastModified: lastModified, size: nil) }

    public var etag: String? { validator("etag") }
    public var lastModified: String? { validator("last-modified") }

    /// A validator as the server sent it, or nil when it is absent or its bytes were not UTF-8.
    /// Header values are decoded as UTF-8 with U+FFFD in place of what is not (RFC 9110 lets a
    /// tag carry such obs-text bytes), and then two different tags could read the same: `"\xE9"`
    /// and `"\xE8"` both become `"\u{FFFD}"`, and sent back as `If-None-Match` neither is what
    /// the server sent. Such a validator names no version mirror can compare or send back, so
    /// it is treated as absent, as from a server that sends none (a U+FFFD the server really
    /// sent as UTF-8 is taken the same way: it cannot be told apart).
    private func validator(_ name: String) -> String? {
        guard let field = field(name) else { return nil }
        let trimmed = Substring(field).trimmingSpaces
        // Most values come trimmed already (`HeaderLineParser`): no copy of those.
        var value = trimmed.utf8.count == field.utf8.count ? field : String(trimmed)
        // U+FFFD is EF BF BD in UTF-8; looked for in the bytes, not by decoding scalars.
        let replaced = value.withUTF8 { bytes in
            bytes.count >= 3 && (0...bytes.count - 3).contains { bytes[$0] == 0xEF && bytes[$0 + 1] == 0xBF && bytes[$0 + 2] == 0xBD }
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

