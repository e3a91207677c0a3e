import CCurl
import Glibc

/// Why a probe or a transfer did not produce a good file. Classified once, here: every retry
/// decision and every exit code derives from `isRetryable` and `isNetworkLevel`.
public enum TransferFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// The server answered with an HTTP status that is not a success.
    case httpStatus(Int, retryAfter: String? = nil)
    /// libcurl failed below HTTP: DNS, connect, TLS, timeout, reset, protocol.
    case curl(code: Int, message: String, osErrno: Int32)
    /// The connection ended before the announced body was complete.
    case partialBody(received: Int64, expected: Int64)
    /// A reply to a range request that cannot be appended safely (wrong start, wrong total).
    case rangeMismatch(String)
    /// A reply that contradicts itself or what the server said before (two different
    /// lengths, a part for a request of the whole, a length other than the probe's).
    case contradictoryReply(String)
    /// The server's file changed during a segmented download, and again during the one
    /// download started over because of it: not retried in this run.
    case unstableRemote(String)
    /// The body grew past the expected size or the `max_size` guard.
    case bodyTooLarge(limit: Int64)
    /// The finished file is not the size the server or the manifest promised.
    case sizeMismatch(expected: Int64, actual: Int64)
    /// The finished file's digest is not the pinned one (the manifest's, or its checksum
    /// file's); hex of either algorithm, the length says which. Retried: the bytes may come
    /// right another time (see `pinMismatch`).
    case checksumMismatch(expected: String, actual: String)
    /// As `checksumMismatch`, for a download of the whole file during which the server's
    /// version did not move: its reply named the version the attempt started from (`served`,
    /// its validators and the body's size). The server holds other bytes than the pin names,
    /// and another attempt would fetch the same ones again. See `pinMismatch`.
    case checksumMismatchUnchanged(expected: String, actual: String, served: RemoteValidators)
    /// The entry's checksum file (`checksums:`) could not be fetched: the failure of its last
    /// attempt. `url` is its printable form.
    indirect case checksumFileUnavailable(url: String, TransferFailure)
    /// The entry's checksum file was fetched but cannot pin it: too large, or not a checksum file.
    case checksumFileUnusable(url: String, reason: String)
    /// The entry's checksum file does not list the entry's name.
    case checksumNotListed(url: String, name: String)
    /// The server's reported size contradicts the manifest's `size` pin.
    case sizePinConflict(pinned: Int64, remote: Int64)
    /// A redirect that `mirror` refuses to follow.
    case redirectRefused(String)
    /// What is on disk is in the way (a directory where a file belongs) and is not mirror's to remove.
    case localConflict(String)
    /// Reading or writing a local file failed.
    case localIO(path: String, operation: String, errno: Int32)
    /// The network stayed unreachable for the whole `connectivity.wait`.
    case unreachable(host: String, waited: Duration)
    /// `--offline`: the entry needs a request, and none may be made.
    case offline(String)
    /// The run was interrupted before this transfer finished.
    case cancelled

    /// libcurl's messages name the host they tried. When the manifest wrote that host as a
    /// `${VAR}`, its value stays out of the message, as it stays out of every printed URL.
    func redactingHost(of url: RemoteURL) -> TransferFailure {
        guard case .curl(let code, let message, let osErrno) = self, let host = HostKey(url: url.string)?.host,
              !url.display.contains(host), message.contains(host)
        else { return self }
        return .curl(code: code, message: message.replacing(host, with: "<host>"), osErrno: osErrno)
    }

    /// A file that is not there (`ENOENT`): for the blob cache, a miss rather than a problem.
    var isMissingFile: Bool {
        if case .localIO(_, _, let code) = self { return code == ENOENT }
        return false
    }

    /// Worth another attempt: the same request may well succeed later.
    public var isRetryable: Bool {
        switch self {
        case .httpStatus(let status, _):
            return status == 408 || status == 429 || (500...599).contains(status)
        case .curl(let code, _, _):
            return !Self.permanentCurlCodes.contains(code)
        case .partialBody, .rangeMismatch, .contradictoryReply, .sizeMismatch, .checksumMismatch:
            // A cut or inconsistent body, or bytes that do not hash right, may be a passing
            // fault; the next attempt starts clean. Checksum and size failures are turned
            // permanent once their retries are spent.
            return true
        case .bodyTooLarge, .sizePinConflict, .redirectRefused, .localConflict, .unreachable, .cancelled, .unstableRemote, .offline:
            return false
        case .checksumMismatchUnchanged:
            // The same request would bring the same bytes, however large the file.
            return false
        case .checksumFileUnavailable, .checksumFileUnusable, .checksumNotListed:
            // Fetched once for the run, with its own retries: the entry cannot start without it.
            return false
        case .localIO(_, _, let errno):
            // Disk full, permission denied, read-only file system: retrying cannot help.
            return errno == EINTR || errno == EAGAIN
        }
    }

    /// A failure below HTTP, after which the network itself is in doubt: the connectivity
    /// check runs before such a failure is retried. A refused connection is not one: the
    /// network carried the refusal, so the host (or the proxy) is up and said no. A failed name
    /// lookup is, as libcurl does not tell an authoritative "no such host" from a resolver that
    /// did not answer; the check's own lookup does (see `Reachability`).
    public var isNetworkLevel: Bool {
        guard case .curl(let code, _, let osErrno) = self else { return false }
        if code == Int(CURLE_COULDNT_CONNECT.rawValue) && osErrno == ECONNREFUSED { return false }
        return Self.networkCurlCodes.contains(code)
    }

    public var description: String {
        switch self {
        case .httpStatus(let status, _):
            return "HTTP \(status) \(HTTPStatusText.phrase(for: status))"
        case .curl(_, let message, let osErrno):
            if osErrno != 0 {
                return "\(message) (\(String(cString: strerror(osErrno))))"
            }
            return message
        case .partialBody(let received, let expected):
            return "connection closed after \(received) of \(expected) bytes"
        case .rangeMismatch(let detail):
            return "unusable reply to a range request: \(detail)"
        case .contradictoryReply(let detail):
            return "the server's reply contradicts itself: \(detail); refused"
        case .unstableRemote(let detail):
            return "the file changed on the server during the download, and again after it was started over (\(detail)); try later"
        case .bodyTooLarge(let limit):
            return "body exceeds the expected \(limit) bytes; transfer stopped"
        case .sizeMismatch(let expected, let actual):
            return "size mismatch: expected \(expected) bytes, got \(actual)"
        case .checksumMismatch(let expected, let actual):
            let name = (DigestAlgorithm(hexDigest: expected) ?? .sha256).key
            return "\(name) mismatch: expected \(expected), download has \(actual)"
        case .checksumMismatchUnchanged(let expected, let actual, let served):
            let mismatch = TransferFailure.checksumMismatch(expected: expected, actual: actual).description
            // A reply that names no version cannot show it stayed the same, only that nothing
            // showed it moved.
            let unnamed = served.etag == nil && served.lastModified == nil
            let stayed = unnamed ? "nothing showed the server's file change during the download"
                : "the server's file did not change during the download"
            return "\(mismatch); \(stayed) (\(served.summary)), "
                + "so it was not fetched again: the pin (or the checksum file) and the server disagree"
        case .checksumFileUnavailable(let url, let failure):
            return "checksum file \(url) could not be fetched: \(failure)"
        case .checksumFileUnusable(let url, let reason):
            return "checksum file \(url) \(reason)"
        case .checksumNotListed(let url, let name):
            return "checksum file \(url) does not list `\(name)`; set checksum_name if it lists the file under another name"
        case .sizePinConflict(let pinned, let remote):
            return "server reports \(remote) bytes but the manifest pins size \(pinned)"
        case .redirectRefused(let reason):
            return "redirect refused: \(reason)"
        case .localConflict(let detail):
            return detail
        case .localIO(let path, let operation, let errno):
            return "\(operation) \(path): \(String(cString: strerror(errno)))"
        case .unreachable(let host, let waited):
            return "the network stayed unreachable: no connection to \(host) for \(DurationSyntax.text(waited))"
        case .offline(let reason):
            return "offline: \(reason)"
        case .cancelled:
            return "interrupted"
        }
    }

    /// The failure of a download whose digest is not the pinned one (`expected`), and the one
    /// decision of whether it is worth another attempt: not when the attempt fetched the whole
    /// file and the server's version did not move during it, for then the server holds other
    /// bytes than the pin names (upstream re-published the file, or the pin is wrong) and
    /// another attempt would fetch them again.
    ///
    /// - Parameters:
    ///   - served: the validators of the reply that carried the bytes (the probe's where the
    ///     reply names none: a reply that is silent about a validator does not show it moved),
    ///     with the body's size.
    ///   - before: the newest version known before that reply, on the same source: the
    ///     attempt's probe, else the reply of the attempt before. Nil when there was none (a
    ///     first download with no probe): then nothing shows the version moved.
    ///   - wholeFile: the attempt fetched the file from byte 0 as one version. A resumed one,
    ///     or one joined from ranges no precondition tied to a version (a pinned file whose
    ///     server names none), may hold bytes of two versions, and the next attempt starts
    ///     over: that is retried.
    static func pinMismatch(
        expected: String, actual: String, served: RemoteValidators, before: RemoteValidators?, wholeFile: Bool
    ) -> TransferFailure {
        if !wholeFile { return .checksumMismatch(expected: expected, actual: actual) }
        if let before, before.difference(from: served) != nil { return .checksumMismatch(expected: expected, actual: actual) }
        return .checksumMismatchUnchanged(expected: expected, actual: actual, served: served)
    }

    /// Codes that mean the request itself is wrong or the peer is not trusted.
    private static let permanentCurlCodes: Set<Int> = [
        Int(CURLE_UNSUPPORTED_PROTOCOL.rawValue), Int(CURLE_URL_MALFORMAT.rawValue),
        Int(CURLE_NOT_BUILT_IN.rawValue), Int(CURLE_PEER_FAILED_VERIFICATION.rawValue),
        Int(CURLE_SSL_CACERT_BADFILE.rawValue), Int(CURLE_SSL_CERTPROBLEM.rawValue),
        Int(CURLE_SSL_ISSUER_ERROR.rawValue), Int(CURLE_SSL_PINNEDPUBKEYNOTMATCH.rawValue),
        Int(CURLE_LOGIN_DENIED.rawValue), Int(CURLE_REMOTE_ACCESS_DENIED.rawValue),
        Int(CURLE_REMOTE_FILE_NOT_FOUND.rawValue), Int(CURLE_FILESIZE_EXCEEDED.rawValue),
        Int(CURLE_TOO_MANY_REDIRECTS.rawValue), Int(CURLE_FILE_COULDNT_READ_FILE.rawValue),
    ]

    /// Codes after which the network (not the server's answer) is in doubt.
    private static let networkCurlCodes: Set<Int> = [
        Int(CURLE_COULDNT_RESOLVE_HOST.rawValue), Int(CURLE_COULDNT_RESOLVE_PROXY.rawValue),
        Int(CURLE_COULDNT_CONNECT.rawValue), Int(CURLE_OPERATION_TIMEDOUT.rawValue),
        Int(CURLE_SEND_ERROR.rawValue), Int(CURLE_RECV_ERROR.rawValue),
        Int(CURLE_GOT_NOTHING.rawValue), Int(CURLE_PARTIAL_FILE.rawValue),
        Int(CURLE_SSL_CONNECT_ERROR.rawValue), Int(CURLE_HTTP2.rawValue),
        Int(CURLE_HTTP2_STREAM.rawValue),
    ]
}

/// Reason phrases for the statuses a user of a mirroring tool meets.
enum HTTPStatusText {
    static func phrase(for status: Int) -> String {
        switch status {
        case 300: return "Multiple Choices"
        case 301: return "Moved Permanently"
        case 302: return "Found"
        case 303: return "See Other"
        // Not a redirect: the server answered a condition mirror never sets.
        case 304: return "Not Modified"
        case 307: return "Temporary Redirect"
        case 308: return "Permanent Redirect"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 408: return "Request Timeout"
        case 410: return "Gone"
        case 416: return "Range Not Satisfiable"
        case 429: return "Too Many Requests"
        case 500: return "Internal Server Error"
        case 501: return "Not Implemented"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 504: return "Gateway Timeout"
        default:
            switch status {
            case 300..<400: return "Redirection"
            case 400..<500: return "Client Error"
            case 500..<600: return "Server Error"
            default: return "Unexpected Status"
            }
        }
    }
}
