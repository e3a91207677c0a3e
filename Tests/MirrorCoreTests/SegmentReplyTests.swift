import Testing
@testable import MirrorCore

/// `SegmentReply`: when a plain GET may be split, and what a range request's reply means.
struct SegmentReplyTests {
    static let etag = "\"5f-1000\""
    static let modified = "Sun, 06 Nov 1994 08:49:37 GMT"
    static let version = SegmentVersion(url: "u", total: 1000, etag: etag, lastModified: modified)

    static func head(_ status: Int, _ fields: [(String, String)]) -> ResponseHead {
        ResponseHead(status: status, fields: fields.map { (name: $0.0, value: $0.1) })
    }

    static func lead(_ extra: [(String, String)], length: String = "1000") -> ResponseHead {
        head(200, [("Content-Length", length), ("Accept-Ranges", "bytes")] + extra)
    }

    @Test(arguments: [
        // (what, head, pinned, expected version's precondition)
        ("a strong ETag", lead([("ETag", etag)]), false, "If-Match"),
        ("a Last-Modified a minute older than the Date", lead([("Last-Modified", modified), ("Date", "Sun, 06 Nov 1994 08:50:37 GMT")]), false, "If-Unmodified-Since"),
        ("a Last-Modified less than a minute old", lead([("Last-Modified", modified), ("Date", "Sun, 06 Nov 1994 08:50:36 GMT")]), false, nil),
        ("a weak ETag only", lead([("ETag", "W/\"x\"")]), false, nil),
        ("a weak ETag and a fresh Last-Modified, pinned", lead([("ETag", "W/\"x\""), ("Last-Modified", modified)]), true, "If-Unmodified-Since"),
        ("no validator at all, pinned", lead([]), true, nil),
        ("under segment_min", lead([("ETag", etag)], length: "999"), false, nil),
        ("coded", lead([("ETag", etag), ("Content-Encoding", "gzip")]), false, nil),
        ("ranges not offered", head(200, [("Content-Length", "1000"), ("ETag", etag)]), false, nil),
        ("ranges refused", head(200, [("Content-Length", "1000"), ("ETag", etag), ("Accept-Ranges", "none")]), false, nil),
        ("no length", head(200, [("ETag", etag), ("Accept-Ranges", "bytes")]), false, nil),
        ("not a 200", head(206, [("Content-Length", "1000"), ("ETag", etag), ("Accept-Ranges", "bytes")]), false, nil),
    ] as [(String, ResponseHead, Bool, String?)])
    func whenALeadMayBeSplit(_ what: String, _ head: ResponseHead, _ pinned: Bool, _ precondition: String?) {
        let version = SegmentReply.version(ofLead: head, url: "u", segmentMin: 1000, pinned: pinned)
        #expect(version?.precondition?.name == precondition, "\(what)")
        // A version is offered exactly when a precondition names it, or a pin vouches for it.
        #expect((version != nil) == (precondition != nil || (pinned && what.hasPrefix("no validator"))), "\(what)")
    }

    /// A pinned file from a server that names no version: its ranges carry no precondition and
    /// a 206 that names none is written (the pin checks the whole file); one that names a
    /// version is written too (nothing to compare it with), and a changed total still ends it.
    @Test func aPinnedVersionWithoutValidatorsTakesRangesThatNameNone() throws {
        let version = try #require(SegmentReply.version(ofLead: Self.lead([]), url: "u", segmentMin: 1000, pinned: true))
        #expect(version.precondition == nil)
        #expect(SegmentReply.judge(Self.part("bytes 100-199/1000", []), first: 100, last: 199, version: version) == .write)
        #expect(SegmentReply.judge(Self.part("bytes 100-199/1000"), first: 100, last: 199, version: version) == .write)
        #expect(SegmentReply.judge(Self.part("bytes 100-199/1001", []), first: 100, last: 199, version: version)
            == .end(.versionChanged("size changed from 1000 to 1001 bytes")))
        #expect(SegmentReply.version(ofLead: Self.lead([]), url: "u", segmentMin: 1000, pinned: false) == nil,
                "unpinned, a version without a name is never split")
    }

    static func part(_ range: String, _ extra: [(String, String)] = [("ETag", etag)]) -> ResponseHead {
        head(206, [("Content-Range", range)] + extra)
    }

    @Test(arguments: [
        ("exactly the range, of the version", part("bytes 100-199/1000"), SegmentReply.Verdict.write),
        ("the version named by its date", part("bytes 100-199/1000", [("Last-Modified", modified)]), .write),
        ("another total", part("bytes 100-199/2000"), .end(.versionChanged("size changed from 1000 to 2000 bytes"))),
        ("another ETag", part("bytes 100-199/1000", [("ETag", "\"6a-1000\"")]),
         .end(.versionChanged("ETag changed from \"5f-1000\" to \"6a-1000\""))),
        ("a weak form of the ETag", part("bytes 100-199/1000", [("ETag", "W/\"5f-1000\"")]),
         .end(.versionChanged("ETag changed from \"5f-1000\" to W/\"5f-1000\""))),
        ("another date", part("bytes 100-199/1000", [("Last-Modified", "Mon, 07 Nov 1994 08:49:37 GMT")]),
         .end(.versionChanged("Last-Modified changed from \(modified) to Mon, 07 Nov 1994 08:49:37 GMT"))),
        ("another range", part("bytes 100-149/1000"), .end(.fold(.rangeMismatch("asked for bytes 100-199, server sent 100-149")))),
        ("no total", part("bytes 100-199/*"), .end(.failed(.rangeMismatch("206 without a Content-Range that gives the file's size")))),
        ("coded", part("bytes 100-199/1000", [("ETag", etag), ("Content-Encoding", "gzip")]), .end(.fold(.rangeMismatch("a range coded as gzip")))),
        ("no validator", part("bytes 100-199/1000", []), .end(.fold(.rangeMismatch("a range whose reply names no version")))),
        ("412", head(412, []), .end(.versionChanged("412 Precondition Failed: the version asked for is gone"))),
        ("416", head(416, [("Content-Range", "bytes */50")]), .end(.versionChanged("416: the range asked for is past the file's end"))),
        ("the whole file, same version", head(200, [("Content-Length", "1000"), ("ETag", etag)]),
         .end(.fold(.rangeMismatch("the server answered a range request with the whole file")))),
        ("the whole file, another size", head(200, [("Content-Length", "900")]),
         .end(.versionChanged("the whole file came back, of 900 bytes instead of 1000"))),
        ("429", head(429, [("Retry-After", "5")]), .end(.fold(.httpStatus(429, retryAfter: "5")))),
        ("503", head(503, []), .end(.fold(.httpStatus(503)))),
        ("500", head(500, []), .end(.failed(.httpStatus(500)))),
    ] as [(String, ResponseHead, SegmentReply.Verdict)])
    func whatARangeReplyMeans(_ what: String, _ head: ResponseHead, _ verdict: SegmentReply.Verdict) {
        #expect(SegmentReply.judge(head, first: 100, last: 199, version: Self.version) == verdict, "\(what)")
    }
}
