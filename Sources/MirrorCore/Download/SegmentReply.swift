/// The two judgements of a reply that a segmented download rests on, as pure functions
/// (`SegmentReplyTests`): whether the entry's plain GET may be split (`version(ofLead:…)`),
/// and what a range request's reply means for the bytes on disk (`judge`).
enum SegmentReply {
    /// What to do with the reply to one range request.
    enum Verdict: Equatable {
        /// A 206 of exactly the range asked, of this version: write it at its offset.
        case write
        case end(SegmentedDownload.StreamEnd)
    }

    /// A Last-Modified this much older than the reply's Date names a version that no longer
    /// changes within the second it names (RFC 9110 §8.8.2.2): a strong validator.
    static let settledAge = 60

    /// The version a plain GET's reply offers to fetch in segments, or nil when it must stay one
    /// stream: not a 200, smaller than `segmentMin`, coded (a `Content-Encoding` may code each
    /// range on its own), ranges not offered (`Accept-Ranges: bytes`), or no strong validator
    /// (a strong ETag, or a Last-Modified at least a minute older than the reply's Date) unless
    /// a pin checks the whole file anyway (`pinned`): then any server that offers ranges, also
    /// one that names no version at all (its ranges then carry no precondition, and a file
    /// that changed between them fails the pin and starts over).
    static func version(ofLead head: ResponseHead, url: String, segmentMin: Int64, pinned: Bool) -> SegmentVersion? {
        guard head.status == 200, head.contradiction == nil, let total = head.contentLength, total >= segmentMin, total > 0,
              !head.isEncoded, acceptsByteRanges(head)
        else { return nil }
        // The ETag as sent (a weak one too: it names the version the partial record names);
        // only a strong one goes into `If-Match`.
        let etag = head.etag
        let strongETag = etag.flatMap { EntityTag($0).isWeak ? nil : $0 }
        let lastModified = head.lastModified
        let settled: Bool = {
            guard let lastModified, let modified = HTTPDate.parse(lastModified),
                  let dated = head["date"], let date = HTTPDate.parse(dated) else { return false }
            return date - modified >= settledAge
        }()
        guard strongETag != nil || settled || pinned else { return nil }
        let version = SegmentVersion(url: url, total: total, etag: etag, lastModified: lastModified)
        // A range request names the version it asks for whenever the server gave it a name.
        // Without one, only a pin may vouch for the pieces: it checks the whole file.
        return version.precondition != nil || pinned ? version : nil
    }

    private static func acceptsByteRanges(_ head: ResponseHead) -> Bool {
        guard let value = head["accept-ranges"] else { return false }
        return value.split(separator: ",").contains { $0.trimmingSpaces.lowercased() == "bytes" }
    }

    /// The reply to a request for bytes `first...last` of `version`, as a verdict. Only a 206
    /// whose Content-Range is exactly the range asked, with the version's total, validators
    /// that name the version, and no coding is written.
    static func judge(_ head: ResponseHead, first: Int64, last: Int64, version: SegmentVersion) -> Verdict {
        if let contradiction = head.contradiction {
            return .end(.failed(.contradictoryReply(contradiction)))
        }
        if let change = otherVersion(head, version) {
            return .end(.versionChanged(change))
        }
        switch head.status {
        case 206:
            guard let range = head.contentRange, let total = range.total else {
                return .end(.failed(.rangeMismatch("206 without a Content-Range that gives the file's size")))
            }
            if total != version.total {
                return .end(.versionChanged("size changed from \(version.total) to \(total) bytes"))
            }
            guard range.first == first, range.last == last else {
                return .end(.fold(.rangeMismatch("asked for bytes \(first)-\(last), server sent \(range.first ?? -1)-\(range.last ?? -1)")))
            }
            if head.isEncoded {
                return .end(.fold(.rangeMismatch("a range coded as \(head["content-encoding"] ?? "")")))
            }
            // A version the lead's reply named must be named again; one that had no name (a
            // pinned file) cannot be, and the pin checks the whole.
            if head.etag == nil && head.lastModified == nil && version.precondition != nil {
                return .end(.fold(.rangeMismatch("a range whose reply names no version")))
            }
            return .write
        case 412:
            return .end(.versionChanged("412 Precondition Failed: the version asked for is gone"))
        case 416:
            return .end(.versionChanged("416: the range asked for is past the file's end"))
        case 200:
            if let length = head.contentLength, length != version.total {
                return .end(.versionChanged("the whole file came back, of \(length) bytes instead of \(version.total)"))
            }
            return .end(.fold(.rangeMismatch("the server answered a range request with the whole file")))
        case 429, 503:
            return .end(.fold(.httpStatus(head.status, retryAfter: head["retry-after"])))
        default:
            return .end(.failed(.httpStatus(head.status, retryAfter: head["retry-after"])))
        }
    }

    /// How `head` names another version than `version`, if it does: an ETag or Last-Modified
    /// that differs from the version's (ETags strongly compared: the bytes must be the same).
    private static func otherVersion(_ head: ResponseHead, _ version: SegmentVersion) -> String? {
        guard head.isSuccess else { return nil }
        // A weak ETag (only with a pin that checks the whole file) is compared weakly.
        if let etag = version.etag, let sent = head.etag,
           !(EntityTag(etag).isWeak ? EntityTag.weaklyMatch(etag, sent) : EntityTag.stronglyMatch(etag, sent)) {
            return "ETag changed from \(etag) to \(sent)"
        }
        if let modified = version.lastModified, let sent = head.lastModified, !RemoteValidators.sameBytes(modified, sent) {
            return "Last-Modified changed from \(modified) to \(sent)"
        }
        return nil
    }
}
