/// How a resumed transfer makes sure the bytes on disk and the bytes appended are of one
/// version: the `If-Range` it sends, and whether it re-reads an overlap before the resume point.
///
/// Only a strong ETag or a date goes into `If-Range` (RFC 9110 §13.1.5). A partial file started
/// under a weak ETag (Apache's, for a file under a second old) that the server now sends strong
/// is of the same version by weak comparison, but a weak tag never promised the same bytes: it
/// is resumed under the server's strong tag, and its last bytes are compared as well.
struct ResumeGuard: Equatable, Sendable {
    /// The validator sent as `If-Range`; nil sends none.
    var ifRange: String?
    /// Re-request the bytes just before the resume point and require them to equal the local
    /// ones (see `DownloadMachine.overlapLength`).
    var checksOverlap: Bool

    /// - Parameters:
    ///   - recorded: the validators recorded when the partial file was started, if any.
    ///   - current: what the probe found the server's file to be now, if it probed.
    static func choose(recorded: RemoteValidators?, current: RemoteFile?) -> ResumeGuard {
        guard let recorded else { return ResumeGuard(ifRange: nil, checksOverlap: true) }
        if let strong = recorded.strongETag { return ResumeGuard(ifRange: strong, checksOverlap: false) }
        if let weak = recorded.etag, let now = current?.etag, !EntityTag(now).isWeak, EntityTag.weaklyMatch(weak, now) {
            return ResumeGuard(ifRange: now, checksOverlap: true)
        }
        if let date = recorded.lastModified { return ResumeGuard(ifRange: date, checksOverlap: false) }
        return ResumeGuard(ifRange: nil, checksOverlap: true)
    }
}
