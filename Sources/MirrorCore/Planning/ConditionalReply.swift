/// How `sync` reads the reply to its conditional GET (`If-None-Match` with the ETag the store
/// recorded for `DEST`, `If-Modified-Since` with its Last-Modified): as the remote facts a
/// probe would have found, so that `Planner.decide` reaches the decision the probe would have
/// led to. Judged from the head alone, before any body byte.
enum ConditionalReply {
    /// - Parameter recorded: the validators the GET was made conditional on.
    ///
    /// A 304 says the file is still the recorded version: the facts are the record's. A 200
    /// carries the file: its Content-Length, ETag and Last-Modified are the facts, as a HEAD's
    /// would have been (a server that ignored the conditions and sent the recorded version
    /// again is then recognised by the planner, which compares ETags weakly). Any other reply
    /// is a failure, the same a probe would have met.
    static func remoteFacts(of head: ResponseHead, recorded: RemoteValidators) -> RemoteFacts {
        switch head.status {
        case 304:
            return .available(RemoteFile(size: recorded.size, etag: recorded.etag, lastModified: recorded.lastModified))
        case 200:
            if let contradiction = head.contradiction { return .unavailable(.contradictoryReply(contradiction)) }
            return .available(RemoteFile(size: head.contentLength, etag: head.etag, lastModified: head.lastModified))
        case 200..<300:
            // No Range was sent: a part (206) or no content (204) is not the file.
            return .unavailable(.contradictoryReply("\(head.status) to a GET of the whole file"))
        default:
            return .unavailable(.httpStatus(head.status, retryAfter: head["retry-after"]))
        }
    }

    /// What becomes of a body that is not taken: a 2xx body may be the whole file and is
    /// stopped; an error page or a 304 (which has none) is read to its end, which keeps the
    /// connection for the next request.
    static func abandoning(_ head: ResponseHead) -> BodyDisposition {
        head.isSuccess ? .abort : .discard
    }
}
