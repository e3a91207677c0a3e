/// Asks the server for a file's size and validators without downloading it.
///
/// HEAD first. When HEAD is refused (405, 501, 403) or answers without a usable length, a `GET`
/// with `Range: bytes=0-0` follows, and the total is read from its Content-Range. The same GET
/// follows a HEAD that names no version (no ETag, no Last-Modified): some servers send
/// validators with GET replies only, and without them the entry would be fetched again on every
/// run. The sizes are those of the bytes as the server sends them, Content-Encoding and all:
/// they are stored so.
struct RemoteProbe: Sendable {
    let fetcher: Fetcher

    /// Call on the engine's thread; `completion` runs there. `onStart` is told each request's
    /// transfer id, for cancelling it.
    func probe(
        _ url: RemoteURL, parsed: ParsedURL? = nil, settings: TransferSettings, headers: [HTTPHeader]? = nil,
        onStart: @escaping (UInt64) -> Void = { _ in }, completion: @escaping (RemoteFacts) -> Void
    ) {
        var head = Self.headRequest(url, settings: settings)
        head.parsed = parsed
        if let headers { head.headers = headers }
        fetcher.fetch(head, sink: nil, onStart: onStart) { [fetcher] result in
            switch Self.afterHead(result, of: head, url: url) {
            case .known(let facts):
                completion(facts)
            case .askForRange(let request, let response):
                let recorder = ProbeRecorder()
                fetcher.fetch(request, sink: recorder, onStart: onStart) { result in
                    completion(Self.afterRange(result, recorder: recorder, head: response, url: url))
                }
            }
        }
    }

    private static func headRequest(_ url: RemoteURL, settings: TransferSettings) -> TransferRequest {
        var request = TransferRequest(
            url: url.string, method: .head, headers: settings.headers, timeout: settings.timeout,
            insecure: settings.insecure, certificateAuthorities: settings.certificateAuthorities,
            login: url.login, ftpTLS: settings.ftpTLS, protocols: RedirectRule.protocols(forScheme: Self.scheme(of: url.string))
        )
        request.expectedBody = 0
        return request
    }

    private enum AfterHead {
        case known(RemoteFacts)
        /// HEAD did not say enough: ask with a one-byte GET, keeping HEAD's reply.
        case askForRange(TransferRequest, head: ResponseHead)
    }

    private static func afterHead(_ headResult: Fetcher.Result, of head: TransferRequest, url: RemoteURL) -> AfterHead {
        if let failure = headResult.redirectFailure { return .known(.unavailable(failure)) }
        if let failure = headResult.outcome.transportFailure { return .known(.unavailable(failure.redactingHost(of: url))) }
        guard let response = headResult.outcome.head else {
            return .known(.unavailable(.curl(code: 0, message: "no response", osErrno: 0)))
        }
        if response.isSuccess, let contradiction = response.contradiction {
            return .known(.unavailable(.contradictoryReply(contradiction)))
        }
        let headLength = response.isSuccess ? response.contentLength : nil
        let validators = response.validators
        if let headLength, validators.namesVersion {
            return .known(.available(RemoteFile(size: headLength, etag: validators.etag, lastModified: validators.lastModified)))
        }
        if !response.isSuccess && ![403, 405, 501].contains(response.status) {
            return .known(.unavailable(.httpStatus(response.status, retryAfter: response["retry-after"])))
        }
        var rangeProbe = head
        rangeProbe.method = .get
        rangeProbe.rangeFirst = 0
        rangeProbe.rangeLast = 0
        return .askForRange(rangeProbe, head: response)
    }

    private static func afterRange(_ getResult: Fetcher.Result, recorder: ProbeRecorder, head response: ResponseHead, url: RemoteURL) -> RemoteFacts {
        let headLength = response.isSuccess ? response.contentLength : nil
        if let headLength {
            let answered = getResult.redirectFailure == nil && getResult.outcome.transportFailure == nil
            guard answered, let answer = recorder.head ?? getResult.outcome.head, [200, 206, 416].contains(answer.status) else {
                // The GET was asked only for validators: HEAD's answer stands without them.
                return .available(RemoteFile(size: headLength))
            }
        }
        if let failure = getResult.redirectFailure { return .unavailable(failure) }
        if let failure = getResult.outcome.transportFailure { return .unavailable(failure.redactingHost(of: url)) }
        guard let answer = recorder.head ?? getResult.outcome.head else {
            return .unavailable(.curl(code: 0, message: "no response", osErrno: 0))
        }
        switch answer.status {
        case 200, 206, 416:
            if let contradiction = answer.contradiction { return .unavailable(.contradictoryReply(contradiction)) }
            // 416 to bytes=0-0 is how an empty file answers: `bytes */0`.
            let size = (answer.status == 416 ? answer.contentRange?.total : answer.totalSize) ?? headLength
            return .available(RemoteFile(size: size, etag: answer.etag ?? response.etag,
                                         lastModified: answer.lastModified ?? response.lastModified))
        default:
            return .unavailable(.httpStatus(answer.status, retryAfter: answer["retry-after"]))
        }
    }

    /// The scheme of `url`, lowercased: what comes before its first `:`. Asked several times
    /// for every request, so read as bytes when the scheme and the byte after its colon are
    /// ASCII (then a byte is a Character, and the answer is the same); otherwise, Characters.
    static func scheme(of url: String) -> String {
        var url = url
        let ascii: String?? = url.withUTF8 { bytes in
            guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")) else { return .some(nil) }
            let scheme = UnsafeBufferPointer(rebasing: bytes[..<colon])
            guard scheme.allSatisfy({ $0 < 0x80 }), colon + 1 == bytes.count || bytes[colon + 1] < 0x80 else { return nil }
            // The schemes of nearly every URL, as literals: no String made.
            if scheme.count >= 4, scheme[0] == 0x68, scheme[1] == 0x74, scheme[2] == 0x74, scheme[3] == 0x70 { // "http"
                if scheme.count == 4 { return "http" }
                if scheme.count == 5, scheme[4] == 0x73 { return "https" }
            }
            if !scheme.contains(where: { $0.asciiLowercased != $0 }) { return String(decoding: scheme, as: UTF8.self) }
            return String(decoding: scheme.map(\.asciiLowercased), as: UTF8.self)
        }
        if let ascii { return ascii ?? "" }
        guard let colon = url.firstIndex(of: ":") else { return "" }
        return url[..<colon].lowercased()
    }
}

/// Keeps the head of a range probe and stops a body that is more than the one byte asked for.
private final class ProbeRecorder: ResponseBodySink, @unchecked Sendable {
    private(set) var head: ResponseHead?

    func begin(_ head: ResponseHead) -> BodyDisposition {
        self.head = head
        // A 200 here is the whole file: its headers are all that is wanted.
        return head.status == 200 ? .abort : .discard
    }

    func write(_ bytes: UnsafeRawBufferPointer) -> Bool { true }
}
