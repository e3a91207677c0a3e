import Foundation

/// One request as Apache or lighttpd logged it, in the access log format both are given:
/// `method|uri|status|Range|If-Range|response ETag|body bytes|If-None-Match`, with `-` for a
/// header not sent.
struct ServedRequest: Sendable, Equatable, CustomStringConvertible {
    var method: String
    var uri: String
    var status: Int
    var range: String?
    var ifRange: String?
    var etag: String?
    var bodyBytes: Int
    var ifNoneMatch: String? = nil

    /// The field list for a server's log format directive, `|` between fields.
    static func format(method: String, uri: String, status: String, requestHeader: (String) -> String,
                       responseHeader: (String) -> String, bodyBytes: String) -> String {
        [method, uri, status, requestHeader("Range"), requestHeader("If-Range"), responseHeader("ETag"), bodyBytes,
         requestHeader("If-None-Match")]
            .joined(separator: "|")
    }

    /// The lines of `log` that parse; servers add nothing else to these files.
    static func parse(log: String) -> [ServedRequest] {
        log.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            guard fields.count == 8, let status = Int(fields[2]) else { return nil }
            // Apache escapes the quotes of an ETag in its log.
            func header(_ text: String) -> String? {
                text == "-" || text.isEmpty ? nil : text.replacingOccurrences(of: "\\\"", with: "\"")
            }
            return ServedRequest(method: fields[0], uri: fields[1], status: status, range: header(fields[3]),
                                 ifRange: header(fields[4]), etag: header(fields[5]), bodyBytes: Int(fields[6]) ?? 0,
                                 ifNoneMatch: header(fields[7]))
        }
    }

    var description: String {
        "\(method) \(uri) → \(status) (\(bodyBytes) body bytes)" + (range.map { " Range: \($0)" } ?? "")
            + (ifRange.map { " If-Range: \($0)" } ?? "") + (ifNoneMatch.map { " If-None-Match: \($0)" } ?? "") + (etag.map { " ETag: \($0)" } ?? "")
    }
}
