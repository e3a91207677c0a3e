/// Where the body of a GET goes in the partial file, given what was asked and what came back.
///
/// The rules that keep a resumed file from being spliced out of two versions:
/// - a 206 is appended only if its Content-Range starts exactly at the requested offset and,
///   when a total was expected, its total equals it;
/// - a 200 to a range request means the range was ignored or the file changed: start from 0;
/// - a 416 whose `bytes */N` equals the local size means the file is already complete.
///
/// A body with a Content-Encoding (a `.tar.gz` served as `Content-Encoding: gzip`) is stored as
/// sent, and its Content-Length and Content-Range count those bytes (RFC 9110 §14: a range is
/// of the selected representation, content coding included). A server that codes responses
/// no one asked it to code may also code each range on its own, though, so a coded 206 is
/// appended only when the partial file was started from the same strong ETag, a promise of
/// the very same bytes; otherwise the file is fetched again from 0.
enum BodyPlacement: Equatable, Sendable {
    /// Write from `offset`; `total` is the file's full size when the response says it.
    case write(from: Int64, total: Int64?)
    /// Nothing to write: the bytes on disk are already the whole file of `total` bytes.
    case alreadyComplete(total: Int64)
    /// Do not write; the failure says why and whether to retry.
    case reject(TransferFailure)

    /// - Parameters:
    ///   - offset: the first byte requested (0 for a plain GET).
    ///   - expectedTotal: the file size the transfer was planned with, if known.
    ///   - startedFrom: the validators of the version the bytes on disk came from, when known;
    ///     a 206 of another version is refused even if the server ignored `If-Range`.
    ///
    /// A body that is written must end where the file ends: `total` is always given when the
    /// file's size is known from the reply, the probe or a pin, and a range that stops short of
    /// it is refused.
    ///   - rangeRequested: a `Range` was sent; implied when `offset` is past 0.
    static func decide(
        offset: Int64, head: ResponseHead, expectedTotal: Int64?, startedFrom: RemoteValidators? = nil,
        rangeRequested: Bool = false
    ) -> BodyPlacement {
        if [200, 206, 416].contains(head.status), let contradiction = head.contradiction {
            return .reject(.contradictoryReply(contradiction))
        }
        switch head.status {
        case 200:
            if let length = head.contentLength, let expectedTotal, length != expectedTotal {
                return .reject(.contradictoryReply("Content-Length \(length), but the file was reported as \(expectedTotal) bytes"))
            }
            return .write(from: 0, total: head.contentLength ?? expectedTotal)
        case 206:
            guard offset > 0 || rangeRequested else {
                // No Range was sent: a part is not the file, whatever it says.
                return .reject(.contradictoryReply("206 Partial Content to a request for the whole file"))
            }
            guard let range = head.contentRange, let first = range.first, let last = range.last else {
                return .reject(.rangeMismatch("206 without a usable Content-Range"))
            }
            guard first == offset else {
                return .reject(.rangeMismatch("asked for bytes from \(offset), server sent bytes from \(first)"))
            }
            if let expectedTotal, let total = range.total, total != expectedTotal {
                return .reject(.rangeMismatch("file size changed from \(expectedTotal) to \(total) bytes"))
            }
            guard let total = range.total ?? expectedTotal else {
                return .reject(.rangeMismatch("206 with no total size (`*`) and none known, so the file's end cannot be checked"))
            }
            guard last == total - 1 else {
                return .reject(.rangeMismatch("asked for bytes \(offset) to the end (\(total) bytes), server sent bytes \(first)-\(last)"))
            }
            if let startedFrom, let difference = differs(head, from: startedFrom) {
                return .reject(.rangeMismatch("the server sent part of another version (\(difference))"))
            }
            if head.isEncoded, !isVouchedByStrongETag(head, startedFrom: startedFrom) {
                let coding = head["content-encoding"] ?? ""
                return .reject(.rangeMismatch("a part coded as \(coding) without a strong ETag that vouches it continues the same bytes"))
            }
            return .write(from: offset, total: total)
        case 416:
            // Complete only if the server's size is the local size *and* the size the
            // transfer was planned with, and the response is not of another version.
            if let total = head.contentRange?.total, total == offset, offset > 0,
               expectedTotal == nil || expectedTotal == total,
               startedFrom.map({ differs(head, from: $0) == nil }) ?? true {
                return .alreadyComplete(total: total)
            }
            let told = head.contentRange?.total.map { "the file has \($0) bytes" } ?? "no size given"
            return .reject(.rangeMismatch("range from \(offset) not satisfiable (\(told))"))
        default:
            return .reject(.httpStatus(head.status, retryAfter: head["retry-after"]))
        }
    }

    /// The partial file was started from a strong ETag and the response carries the same one.
    private static func isVouchedByStrongETag(_ head: ResponseHead, startedFrom: RemoteValidators?) -> Bool {
        guard let recorded = startedFrom?.strongETag, let sent = head.etag else { return false }
        return EntityTag.stronglyMatch(recorded, sent)
    }

    /// How `head`'s validators contradict those of the version on disk, if they do: the same
    /// judgement as the planner's (`RemoteValidators.difference`), ETags compared weakly (the
    /// server has already judged the `If-Range`, and a tag that lost its `W/` as the file aged
    /// names the same version). A reply that names no version leaves the judgement to that
    /// `If-Range`; one that names it only in a way the record cannot be compared with does not.
    private static func differs(_ head: ResponseHead, from startedFrom: RemoteValidators) -> String? {
        guard head.validators.namesVersion else { return nil }
        return startedFrom.difference(from: head.validators)
    }
}
