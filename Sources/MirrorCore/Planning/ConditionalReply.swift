/// How `sync` reads the reply to its conditional GET (`If-None-Match` with the ETag the store
/// recorded for `DEST`): as the remote facts a probe would have found, so that
/// `Planner.decide` reaches the decision the probe would have led to. Judged from the head
/// alone, before any body byte.
///
/// Only an ETag is sent, never `If-Modified-Since`: that asks "changed after this date?", and a
/// server answers it 304 for a version whose date went back (a rollback, a copy that kept an
/// older date) or stayed (a rebuild under a fixed date) while its bytes changed, where the
/// probe's equality of dates and sizes sees the change.
enum ConditionalReply {
    /// What a reply's head says.
    enum Judgement: Equatable {
        /// The facts a probe would have found.
        case facts(RemoteFacts)
        /// A 304 that names another version than the one asked about: it proves nothing, and
        /// the attempt asks again with a probe.
        case inconclusive(String)
    }

    /// - Parameter recorded: the validators the GET was made conditional on.
    ///
    /// A 304 says the file is still the recorded version, and carries the validators a 200
    /// would have (RFC 9110 §15.4.5): the facts are those, the record's where it sent none; a
    /// 304 whose validators contradict the record is `inconclusive`. A 200 carries the file:
    /// its Content-Length, ETag and Last-Modified are the facts, as a HEAD's would have been (a
    /// server that ignored the condition and sent the recorded version again is then recognised
    /// by the planner, which compares ETags weakly). Any other reply is a failure, the same a
    /// probe would have met.
    static func judge(_ head: ResponseHead, recorded: RemoteValidators) -> Judgement {
        guard head.status == 304 else { return .facts(remoteFacts(of: head, recorded: recorded)) }
        let sent = RemoteValidators(etag: head.etag ?? recorded.etag, lastModified: head.lastModified ?? recorded.lastModified,
                                    size: recorded.size)
        if let change = recorded.difference(from: sent) {
            return .inconclusive("304 Not Modified naming another version (\(change))")
        }
        return .facts(.available(RemoteFile(size: sent.size, etag: sent.etag, lastModified: sent.lastModified)))
    }

    /// The facts of a reply other than an inconclusive 304 (see `judge`).
    static func remoteFacts(of head: ResponseHead, recorded: RemoteValidators) -> RemoteFacts {
        switch head.status {
        case 304:
            return .available(RemoteFile(size: recorded.size, etag: head.etag ?? recorded.etag,
                                          lastModified: head.lastModified ?? recorded.lastModified))
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
