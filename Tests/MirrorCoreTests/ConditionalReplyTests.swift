import Testing
@testable import MirrorCore

/// The judgement of a conditional GET's reply head: the facts it stands for
/// (`ConditionalReply.remoteFacts`), the planner's decision on them, and what becomes of a body
/// that is not taken. Each row is a reply to a GET conditional on the recorded version.
struct ConditionalReplyTests {
    static let date = "Sun, 06 Nov 1994 08:49:37 GMT"
    static let later = "Mon, 07 Nov 1994 08:49:37 GMT"
    static let identity = LocalIdentity(size: 100, modifiedNanoseconds: 784_111_777_000_000_000, inode: 7)
    static let local = LocalFacts(destination: .file(size: 100), partial: .missing, destinationIdentity: identity,
                                  destinationModified: 784_111_777)

    struct Row: CustomTestStringConvertible, Sendable {
        var name: String
        var recorded = RemoteValidators(etag: "\"a\"", lastModified: ConditionalReplyTests.date, size: 100)
        var status: Int
        var fields: [String: String] = [:]
        var pins = Pins()
        var facts: RemoteFacts
        var action: Action
        var disposition: BodyDisposition
        var testDescription: String { name }
    }

    static let rows: [Row] = [
        Row(name: "304: the recorded version, skip", status: 304, fields: ["ETag": "\"a\""],
            facts: .available(RemoteFile(size: 100, etag: "\"a\"", lastModified: date)), action: .skip, disposition: .discard),
        Row(name: "304 with the recorded ETag sent weak: the same version, compared weakly", status: 304, fields: ["ETag": "W/\"a\""],
            facts: .available(RemoteFile(size: 100, etag: "W/\"a\"", lastModified: date)), action: .skip, disposition: .discard),
        Row(name: "304 with no headers: still the recorded version", status: 304,
            facts: .available(RemoteFile(size: 100, etag: "\"a\"", lastModified: date)), action: .skip, disposition: .discard),
        Row(name: "304 against a size pin the recorded size contradicts: the probe's failure", status: 304, pins: Pins(size: 99),
            facts: .available(RemoteFile(size: 100, etag: "\"a\"", lastModified: date)),
            action: .fail(.sizePinConflict(pinned: 99, remote: 100)), disposition: .discard),
        Row(name: "200 with the recorded ETag and date (conditions ignored): skip, body stopped", status: 200,
            fields: ["ETag": "\"a\"", "Last-Modified": date, "Content-Length": "100"],
            facts: .available(RemoteFile(size: 100, etag: "\"a\"", lastModified: date)), action: .skip, disposition: .abort),
        Row(name: "200 with the recorded ETag sent weak: compared weakly, skip", status: 200,
            fields: ["ETag": "W/\"a\"", "Content-Length": "100"],
            facts: .available(RemoteFile(size: 100, etag: "W/\"a\"")), action: .skip, disposition: .abort),
        Row(name: "200 with no ETag, the recorded Last-Modified and size: skip", recorded: RemoteValidators(etag: nil, lastModified: date, size: 100),
            status: 200, fields: ["Last-Modified": date, "Content-Length": "100"],
            facts: .available(RemoteFile(size: 100, lastModified: date)), action: .skip, disposition: .abort),
        Row(name: "200 with the recorded Last-Modified but another size: replace", recorded: RemoteValidators(etag: nil, lastModified: date, size: 100),
            status: 200, fields: ["Last-Modified": date, "Content-Length": "101"],
            facts: .available(RemoteFile(size: 101, lastModified: date)),
            action: .replace(reason: "the remote file changed: size changed from 100 to 101 bytes"), disposition: .abort),
        Row(name: "200 with another ETag: replace", status: 200, fields: ["ETag": "\"b\"", "Last-Modified": later, "Content-Length": "100"],
            facts: .available(RemoteFile(size: 100, etag: "\"b\"", lastModified: later)),
            action: .replace(reason: "the remote file changed: ETag changed from \"a\" to \"b\""), disposition: .abort),
        Row(name: "200 with no validator at all: fetched again and compared", status: 200, fields: ["Content-Length": "100"],
            facts: .available(RemoteFile(size: 100)),
            action: .replace(reason: "the remote file changed: the server now names its versions by nothing where the record has ETag and Last-Modified"),
            disposition: .abort),
        Row(name: "200 whose size contradicts the size pin: fail, nothing written", status: 200, fields: ["ETag": "\"b\"", "Content-Length": "150"],
            pins: Pins(size: 100), facts: .available(RemoteFile(size: 150, etag: "\"b\"")),
            action: .fail(.sizePinConflict(pinned: 100, remote: 150)), disposition: .abort),
        Row(name: "200 that contradicts itself: the probe's failure", status: 200, fields: ["Content-Length": "100, 101", "ETag": "\"b\""],
            facts: .unavailable(.contradictoryReply("Content-Length given as `100` and `101`")),
            action: .fail(.contradictoryReply("Content-Length given as `100` and `101`")), disposition: .abort),
        Row(name: "206 to a GET without a Range: not the file", status: 206, fields: ["Content-Range": "bytes 0-9/100"],
            facts: .unavailable(.contradictoryReply("206 to a GET of the whole file")),
            action: .fail(.contradictoryReply("206 to a GET of the whole file")), disposition: .abort),
        Row(name: "404: the probe's failure, the error page read to its end", status: 404,
            facts: .unavailable(.httpStatus(404)), action: .fail(.httpStatus(404)), disposition: .discard),
        Row(name: "503 with Retry-After: kept for the pause", status: 503, fields: ["Retry-After": "5"],
            facts: .unavailable(.httpStatus(503, retryAfter: "5")), action: .fail(.httpStatus(503, retryAfter: "5")), disposition: .discard),
    ]

    @Test(arguments: rows)
    func judgement(_ row: Row) {
        let head = ResponseHead(status: row.status, fields: row.fields.map { (name: $0.key, value: $0.value) })
        let facts = ConditionalReply.remoteFacts(of: head, recorded: row.recorded)
        #expect(facts == row.facts)
        #expect(ConditionalReply.judge(head, recorded: row.recorded) == .facts(row.facts))
        let record = StateRecord(dest: "f", url: "u", complete: CompleteVersion(validators: row.recorded, sha256: nil, local: Self.identity))
        #expect(Planner.decide(local: Self.local, remote: facts, pins: row.pins, state: record) == row.action)
        if !row.action.startsFromZero {
            #expect(ConditionalReply.abandoning(head) == row.disposition)
        }
    }

    /// A 304 carries the validators a 200 would have (RFC 9110 §15.4.5): one that names another
    /// version than the one asked about proves nothing.
    @Test(arguments: [
        (["ETag": "\"b\""], "304 Not Modified naming another version (ETag changed from \"a\" to \"b\")"),
        (["ETag": "\"a\"", "Last-Modified": later],
         "304 Not Modified naming another version (Last-Modified changed from \(date) to \(later))"),
        (["Last-Modified": later], "304 Not Modified naming another version (Last-Modified changed from \(date) to \(later))"),
    ])
    func a304NamingAnotherVersionIsInconclusive(_ fields: [String: String], _ reason: String) {
        let head = ResponseHead(status: 304, fields: fields.map { (name: $0.key, value: $0.value) })
        let recorded = RemoteValidators(etag: "\"a\"", lastModified: Self.date, size: 100)
        #expect(ConditionalReply.judge(head, recorded: recorded) == .inconclusive(reason))
    }

    /// Only one entity-tag goes back as `If-None-Match`.
    @Test(arguments: [("\"a\"", true), ("W/\"a\"", true), ("\"\"", true), ("*", false), ("\"a\", \"b\"", false),
                      ("a", false), ("W/a", false), ("\"a", false), ("\"a b\"", false), ("w/\"a\"", false),
                      ("W/\"\"", true), ("\"é\"", true), ("\"\u{7F}\"", false), ("\"a\"\"", false), ("W/\"", false), ("\"", false)])
    func onlyOneEntityTagIsSentBack(_ etag: String, _ single: Bool) {
        #expect(EntityTag.isSingleTag(etag) == single, "\(etag)")
    }
}
