import Foundation

/// What a `Range` header asks of a representation of a given length (RFC 9110 §14.1–14.2),
/// limited to the single-range requests that download tools send.
enum RangeRequest: Equatable, Sendable {
    /// No Range, another unit, a syntax error or several ranges: the server answers with the
    /// whole representation (RFC 9110 lets a server ignore Range).
    case ignored
    /// The bytes at these offsets, clamped to the representation.
    case satisfiable(ClosedRange<Int>)
    /// A valid range that selects no byte: 416.
    case unsatisfiable

    init(header: String?, length: Int) {
        guard let header else { self = .ignored; return }
        let trimmed = header.trimmingCharacters(in: .whitespaces)
        guard let equals = trimmed.firstIndex(of: "="),
              trimmed[..<equals].trimmingCharacters(in: .whitespaces).lowercased() == "bytes"
        else { self = .ignored; return }
        let spec = trimmed[trimmed.index(after: equals)...].trimmingCharacters(in: .whitespaces)
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { self = .ignored; return }
        let firstText = spec[..<dash]
        let lastText = spec[spec.index(after: dash)...]
        let isDigits = { (text: Substring) in !text.isEmpty && text.allSatisfy(\.isASCII) && text.allSatisfy(\.isNumber) }

        if firstText.isEmpty {
            // bytes=-SUFFIX: the last SUFFIX bytes.
            guard isDigits(lastText), let suffix = Int(lastText) else { self = .ignored; return }
            guard suffix > 0, length > 0 else { self = .unsatisfiable; return }
            self = .satisfiable(max(0, length - suffix)...(length - 1))
            return
        }
        guard isDigits(firstText), let first = Int(firstText) else { self = .ignored; return }
        var last = length - 1
        if !lastText.isEmpty {
            guard isDigits(lastText), let requestedLast = Int(lastText) else { self = .ignored; return }
            // last < first makes the whole header invalid, which means "ignore it", not 416.
            guard requestedLast >= first else { self = .ignored; return }
            last = min(requestedLast, length - 1)
        }
        guard first < length else { self = .unsatisfiable; return }
        self = .satisfiable(first...last)
    }
}

/// The conditional-request checks a static file server applies (RFC 9110 §13.1).
enum ConditionalRequest {
    /// `If-Range`: an entity tag must match by strong comparison (weak tags never match); a date
    /// must equal the Last-Modified value exactly.
    static func ifRangeHolds(_ condition: String, etag: String?, lastModified: String?) -> Bool {
        let condition = condition.trimmingCharacters(in: .whitespaces)
        if condition.hasPrefix("\"") || condition.hasPrefix("W/") {
            guard let etag, !etag.hasPrefix("W/"), !condition.hasPrefix("W/") else { return false }
            return condition == etag
        }
        guard let lastModified else { return false }
        return condition == lastModified
    }

    /// `If-None-Match` (weak comparison, `*` matches any existing file), or when that is absent
    /// `If-Modified-Since` (not modified when Last-Modified is not later than the given date).
    static func isNotModified(_ request: HeaderFields, etag: String?, lastModified: String?) -> Bool {
        if let ifNoneMatch = request["If-None-Match"] {
            let tags = ifNoneMatch.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            if tags.contains("*") { return true }
            guard let etag else { return false }
            return tags.contains { opaqueTag($0) == opaqueTag(etag) }
        }
        guard let ifModifiedSince = request["If-Modified-Since"], let lastModified else { return false }
        if ifModifiedSince == lastModified { return true }
        guard let since = httpDate(ifModifiedSince), let modified = httpDate(lastModified) else { return false }
        return modified <= since
    }

    private static func opaqueTag(_ tag: String) -> String {
        tag.hasPrefix("W/") ? String(tag.dropFirst(2)) : tag
    }

    /// Parses the IMF-fixdate form ("Sun, 06 Nov 1994 08:49:37 GMT") that servers send.
    static func httpDate(_ text: String) -> Date? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.date(from: text)
    }
}

extension FaultReply.StaticFile {
    /// The status, headers and body a static file server gives `method` with `request` headers,
    /// before any delivery fault.
    func answer(method: String, request: HeaderFields,
                misreport: FaultReply.RangeMisreport?) -> (status: Int, headers: HeaderFields, body: Data) {
        var headers = HeaderFields()
        headers["Content-Type"] = "application/octet-stream"
        if let lastModified { headers["Last-Modified"] = lastModified }
        if let etag { headers["ETag"] = etag }
        if acceptRanges { headers["Accept-Ranges"] = "bytes" }

        guard method == "GET" || method == "HEAD" else {
            headers["Allow"] = "GET, HEAD"
            return (405, headers, Data())
        }
        if honorConditions, ConditionalRequest.isNotModified(request, etag: etag, lastModified: lastModified) {
            return (304, headers, Data())
        }
        // Range is defined for GET only; HEAD describes the whole representation.
        guard method == "GET", honorRange, let rangeHeader = request["Range"] else {
            return (200, headers, data)
        }
        if honorIfRange, let condition = request["If-Range"],
           !ConditionalRequest.ifRangeHolds(condition, etag: etag, lastModified: lastModified) {
            return (200, headers, data)
        }
        switch RangeRequest(header: rangeHeader, length: data.count) {
        case .ignored:
            return (200, headers, data)
        case .unsatisfiable:
            headers["Content-Range"] = "bytes */\(data.count)"
            return (416, headers, Data())
        case .satisfiable(let range):
            var first = range.lowerBound
            var last = range.upperBound
            var total = data.count
            if let misreport {
                if let claimedStart = misreport.start {
                    first = min(max(0, claimedStart), data.count - 1)
                    if first > last { last = data.count - 1 }
                }
                total = misreport.total ?? total
            }
            headers["Content-Range"] = "bytes \(first)-\(last)/\(total)"
            return (206, headers, data.subdata(in: first..<(last + 1)))
        }
    }
}
