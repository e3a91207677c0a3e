import Testing
@testable import MirrorCore

/// What a resume sends as If-Range, and when it re-reads an overlap: never a weak ETag in
/// If-Range, and bytes started under a weak tag are compared before they are continued.
struct ResumeGuardTests {
    struct Row: CustomTestStringConvertible, Sendable {
        var name: String
        var recorded: RemoteValidators?
        var current: RemoteFile?
        var expected: ResumeGuard
        var testDescription: String { name }
    }

    static let date = "Sun, 06 Nov 1994 08:49:37 GMT"

    static let rows: [Row] = [
        Row(name: "no record → overlap, no If-Range", recorded: nil, current: RemoteFile(size: 100, etag: #""a""#),
            expected: ResumeGuard(ifRange: nil, checksOverlap: true)),
        Row(name: "strong ETag recorded → it goes into If-Range", recorded: RemoteValidators(etag: #""a""#, lastModified: date, size: 100),
            current: RemoteFile(size: 100, etag: #""a""#), expected: ResumeGuard(ifRange: #""a""#, checksOverlap: false)),
        Row(name: "weak ETag recorded, the server's is now strong → its strong tag and the overlap",
            recorded: RemoteValidators(etag: #"W/"a""#, lastModified: date, size: 100),
            current: RemoteFile(size: 100, etag: #""a""#, lastModified: date), expected: ResumeGuard(ifRange: #""a""#, checksOverlap: true)),
        Row(name: "weak ETag recorded and still weak → the date", recorded: RemoteValidators(etag: #"W/"a""#, lastModified: date, size: 100),
            current: RemoteFile(size: 100, etag: #"W/"a""#, lastModified: date), expected: ResumeGuard(ifRange: date, checksOverlap: false)),
        Row(name: "weak ETag recorded, no date, still weak → overlap", recorded: RemoteValidators(etag: #"W/"a""#, lastModified: nil, size: 100),
            current: RemoteFile(size: 100, etag: #"W/"a""#), expected: ResumeGuard(ifRange: nil, checksOverlap: true)),
        Row(name: "weak ETag recorded, no probe → the date", recorded: RemoteValidators(etag: #"W/"a""#, lastModified: date, size: 100),
            current: nil, expected: ResumeGuard(ifRange: date, checksOverlap: false)),
        Row(name: "only a date recorded → the date", recorded: RemoteValidators(etag: nil, lastModified: date, size: 100),
            current: RemoteFile(size: 100, lastModified: date), expected: ResumeGuard(ifRange: date, checksOverlap: false)),
        Row(name: "only a size recorded → overlap", recorded: RemoteValidators(etag: nil, lastModified: nil, size: 100),
            current: RemoteFile(size: 100), expected: ResumeGuard(ifRange: nil, checksOverlap: true)),
    ]

    @Test(arguments: rows)
    func choice(_ row: Row) {
        #expect(ResumeGuard.choose(recorded: row.recorded, current: row.current) == row.expected)
    }
}
