import Testing
@testable import MirrorCore

/// What the header parser keeps of the raw lines libcurl hands over: the last response's
/// status and its wanted fields, names lowercased, values trimmed, folded lines joined.
struct HeaderLineParserTests {
    struct Row: CustomTestStringConvertible, Sendable {
        var name: String
        /// Raw lines, as libcurl passes them (CR LF included).
        var lines: [String]
        var status: Int
        var fields: [Field]
        var sawStatusLine = true
        var testDescription: String { name }
    }

    struct Field: Equatable, Sendable, CustomStringConvertible {
        var name: String
        var value: String
        init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
        var description: String { "\(name): \(value)" }
    }

    static let rows: [Row] = [
        Row(name: "HTTP/1.1 200 OK with a length", lines: ["HTTP/1.1 200 OK\r\n", "Content-Length: 42\r\n", "\r\n"],
            status: 200, fields: [Field("content-length", "42")]),
        Row(name: "HTTP/2 304 with no reason", lines: ["HTTP/2 304\r\n", "etag: \"v1\"\r\n", "\r\n"],
            status: 304, fields: [Field("etag", "\"v1\"")]),
        Row(name: "a 1xx, then the final status: the 1xx's fields are forgotten",
            lines: ["HTTP/1.1 100 Continue\r\n", "Content-Length: 9\r\n", "\r\n",
                    "HTTP/1.1 206 Partial Content\r\n", "Content-Range: bytes 0-9/10\r\n", "\r\n"],
            status: 206, fields: [Field("content-range", "bytes 0-9/10")]),
        Row(name: "a redirect hop resets the fields",
            lines: ["HTTP/1.1 302 Found\r\n", "Location: /b\r\n", "ETag: \"old\"\r\n", "Content-Length: 0\r\n", "\r\n",
                    "HTTP/1.1 200 OK\r\n", "Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n", "\r\n"],
            status: 200, fields: [Field("last-modified", "Sun, 06 Nov 1994 08:49:37 GMT")]),
        Row(name: "a folded line continues the kept header, trimmed and joined by one space",
            lines: ["HTTP/1.1 200 OK\r\n", "Retry-After: 120\r\n", " \t later \t\r\n", "\tstill\r\n", "\r\n"],
            status: 200, fields: [Field("retry-after", "120 later still")]),
        Row(name: "a folded line after a skipped header is skipped too",
            lines: ["HTTP/1.1 200 OK\r\n", "ETag: \"a\"\r\n", "X-Other: 1\r\n", " continued\r\n", "\r\n"],
            status: 200, fields: [Field("etag", "\"a\"")]),
        Row(name: "a folded line before any header is dropped",
            lines: ["HTTP/1.1 200 OK\r\n", " stray\r\n", "\r\n"], status: 200, fields: []),
        Row(name: "unwanted headers are skipped; wanted ones kept in order",
            lines: ["HTTP/1.1 200 OK\r\n", "Server: nginx\r\n", "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n",
                    "Content-Type: text/plain\r\n", "Accept-Ranges: bytes\r\n", "Set-Cookie: a=b\r\n",
                    "Content-Encoding: gzip\r\n", "Transfer-Encoding: chunked\r\n", "\r\n"],
            status: 200, fields: [Field("date", "Sun, 06 Nov 1994 08:49:37 GMT"), Field("accept-ranges", "bytes"),
                                  Field("content-encoding", "gzip"), Field("transfer-encoding", "chunked")]),
        Row(name: "a name that only starts like a wanted one is skipped",
            lines: ["HTTP/1.1 200 OK\r\n", "ETag-Extra: x\r\n", "Content-Lengths: 3\r\n", "\r\n"], status: 200, fields: []),
        Row(name: "only letters match without case: a CR where a name has its hyphen is another name",
            lines: ["HTTP/1.1 200 OK\r\n", "Content\rLength: 5\r\n", "Content\rRange: bytes 0-1/2\r\n",
                    "Last\rModified: y\r\n", "Content-Length: 9\r\n", "\r\n"],
            status: 200, fields: [Field("content-length", "9")]),
        Row(name: "mixed-case names are lowercased; values keep their case",
            lines: ["HTTP/1.1 200 OK\r\n", "CoNtEnT-LeNgTh: 7\r\n", "ETAG: \"AbC\"\r\n", "\r\n"],
            status: 200, fields: [Field("content-length", "7"), Field("etag", "\"AbC\"")]),
        Row(name: "CR LF, a bare LF and stray CRs are stripped; spaces and tabs around the value too",
            lines: ["HTTP/1.1 200 OK\n", "Content-Length: \t 5 \t\r\r\n", "ETag:\"x\"\n", "\r\n"],
            status: 200, fields: [Field("content-length", "5"), Field("etag", "\"x\"")]),
        Row(name: "an empty value is kept empty",
            lines: ["HTTP/1.1 200 OK\r\n", "ETag:  \r\n", "\r\n"], status: 200, fields: [Field("etag", "")]),
        Row(name: "a line with no colon is skipped",
            lines: ["HTTP/1.1 200 OK\r\n", "garbage without a separator\r\n", "Content-Length: 1\r\n", "\r\n"],
            status: 200, fields: [Field("content-length", "1")]),
        Row(name: "a line with no colon changes nothing: a continuation after it still joins the kept header",
            lines: ["HTTP/1.1 200 OK\r\n", "ETag: \"a\r\n", "garbage\r\n", " b\"\r\n"],
            status: 200, fields: [Field("etag", "\"a b\"")]),
        Row(name: "a status line with no code gives 0 and still starts a response",
            lines: ["HTTP/1.1 200 OK\r\n", "ETag: \"a\"\r\n", "HTTP/1.1 OK\r\n"], status: 0, fields: []),
        Row(name: "no status line (file, ftp): nothing seen, headers still read",
            lines: ["Content-Length: 3\r\n", "\r\n"], status: 0, fields: [Field("content-length", "3")], sawStatusLine: false),
        Row(name: "no lines at all", lines: [], status: 0, fields: [], sawStatusLine: false),
    ]

    @Test(arguments: rows)
    func parsing(_ row: Row) {
        var parser = HeaderLineParser()
        for line in row.lines {
            Array(line.utf8).withUnsafeBytes { parser.receive($0) }
        }
        #expect(parser.status == row.status)
        #expect(parser.fields.map { Field($0.name, $0.value) } == row.fields)
        #expect(parser.sawStatusLine == row.sawStatusLine)
        if row.sawStatusLine {
            #expect(parser.head?.status == row.status)
            #expect(parser.head?.fields.map { Field($0.name, $0.value) } == row.fields)
        } else {
            #expect(parser.head == nil)
        }
    }

    @Test(arguments: [
        ("HTTP/1.1 200 OK", 200), ("HTTP/2 304", 304), ("HTTP/1.1 100 Continue", 100), ("HTTP/1.0 404 Not Found", 404),
        ("HTTP/1.1 20 OK", 0), ("HTTP/1.1 2000 OK", 0), ("HTTP/1.1", 0), ("HTTP/1.1 2x0 OK", 0), ("HTTP/1.1 ", 0),
    ])
    func statusCode(_ line: String, _ code: Int) {
        #expect(Array(line.utf8).withUnsafeBytes { HeaderLineParser.statusCode(ofStatusLine: $0) } == code)
    }
}
