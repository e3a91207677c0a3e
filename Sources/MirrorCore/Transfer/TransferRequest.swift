/// One request for the transfer engine: a single hop, no redirects followed (see `Fetcher`).
struct TransferRequest: Sendable {
    enum Method: Sendable { case head, get }

    var url: String
    /// `url` as libcurl parses it, made ahead (`ParsedURL`); used only while it is `url`'s.
    var parsed: ParsedURL?
    var method: Method
    /// Headers from the manifest. They may hold secrets and are dropped on cross-origin redirects.
    var headers: [HTTPHeader]
    /// First byte wanted (`Range: bytes=first-` or `first-last`); nil for the whole file.
    var rangeFirst: Int64?
    var rangeLast: Int64?
    /// Validator sent as `If-Range` with a range request.
    var ifRange: String?
    /// The condition of a GET that wants the file only if it is not the version this ETag
    /// names, sent as `If-None-Match` (see `ConditionalReply` for why never a date). It names
    /// no secret and goes to every hop of a redirect.
    var ifNoneMatch: String?
    /// How long the body is expected to be, when that is known before the reply (0 for a HEAD,
    /// the recorded size for a conditional GET): the receive buffer is no larger than it needs
    /// (see `TransferContext.receiveBuffer`).
    var expectedBody: Int64?
    /// A segment of a segmented download: over a connection of its own (HTTP/1.1), never
    /// multiplexed onto an HTTP/2 connection with the others.
    var ownConnection = false
    /// The request goes over HTTP/1.1, never as a stream of a shared HTTP/2 connection: a
    /// segment (`ownConnection`), or one under rate limits (see `TransferContext.configure`).
    var heldToHTTP1: Bool { throttle != nil || ownConnection }
    var timeout: Duration
    /// Stall guard: abandon the transfer when it averages under `minSpeed` bytes/s over a
    /// `minSpeedTime` window.
    var minSpeed: Int64?
    var minSpeedTime: Duration = .seconds(30)
    var insecure: Bool
    /// The CAs to trust; parts left nil keep libcurl's.
    var certificateAuthorities: CertificateAuthorities
    /// The netrc login for this request's origin. A secret, dropped on cross-origin redirects.
    var login: NetrcLogin?
    /// Whether an `ftp://` request asks for TLS (`ftps://` is TLS from the start).
    var ftpTLS: FTPTLS
    /// Comma-separated libcurl protocol names this request may use.
    var protocols: String
    /// The proxy to go through (libcurl's syntax); nil: direct, whatever the environment says.
    var proxy: String?
    /// The rate limits the body is received under; nil: none.
    var throttle: Throttle?
    /// Told, on the engine's thread, which HTTP version the server answered with, once the
    /// head of its reply is in.
    var onReplyProtocol: (@Sendable (RequestBudget.OriginProtocol) -> Void)?
    /// Told, on the engine's thread, when the TLS handshake of a connection the request opens
    /// chose HTTP/2 (ALPN), before any reply (`HandshakeWatch`): `onReplyProtocol`, for a
    /// request without a proxy. Through a proxy the handshake libcurl reports may be the
    /// proxy's own, and only the reply tells.
    var onHandshakeProtocol: (@Sendable (RequestBudget.OriginProtocol) -> Void)? {
        proxy == nil ? onReplyProtocol : nil
    }
    /// A request that may share an HTTP/2 connection waits for one being set up to its origin
    /// (`CURLOPT_PIPEWAIT`) rather than opening its own; false: it opens one (see
    /// `RequestBudget.waitsForConnection`).
    var waitsForConnection = true

    /// Whether the request's bytes may pass through TLS: its URL's scheme or its proxy's, or
    /// an `ftp:` URL asked to `AUTH TLS` (`ftp_tls`).
    var usesTLS: Bool { usesTLS(scheme: RemoteProbe.scheme(of: url)) }

    /// `usesTLS`, `url`'s scheme (`RemoteProbe.scheme(of:)`) read already.
    func usesTLS(scheme: String) -> Bool {
        func tls(_ scheme: String) -> Bool { scheme == "https" || scheme == "ftps" }
        return tls(scheme) || (Self.isFTP(scheme: scheme) && ftpTLS != .no) || proxy.map { tls(RemoteProbe.scheme(of: $0)) } == true
    }

    init(
        url: String, method: Method, headers: [HTTPHeader] = [], rangeFirst: Int64? = nil,
        rangeLast: Int64? = nil, ifRange: String? = nil, timeout: Duration = .seconds(30),
        minSpeed: Int64? = nil, minSpeedTime: Duration = .seconds(30),
        insecure: Bool = false, certificateAuthorities: CertificateAuthorities = .init(),
        login: NetrcLogin? = nil, ftpTLS: FTPTLS = .no, protocols: String = "http,https"
    ) {
        self.certificateAuthorities = certificateAuthorities
        self.login = login
        self.ftpTLS = ftpTLS
        self.minSpeed = minSpeed
        self.minSpeedTime = minSpeedTime
        self.url = url
        self.method = method
        self.headers = headers
        self.rangeFirst = rangeFirst
        self.rangeLast = rangeLast
        self.ifRange = ifRange
        self.timeout = timeout
        self.insecure = insecure
        self.protocols = protocols
    }

    /// A GET of `url` with an entry's transfer settings: its timeout, stall guard, TLS and FTP
    /// settings, and the URL's own netrc login.
    /// - Parameter headers: the request's headers; nil: those of `settings`.
    init(get url: RemoteURL, parsed: ParsedURL? = nil, settings: TransferSettings, headers: [HTTPHeader]? = nil, protocols: String) {
        self.init(
            url: url.string, method: .get, headers: headers ?? settings.headers, timeout: settings.timeout,
            minSpeed: settings.minSpeed, minSpeedTime: settings.minSpeedTime, insecure: settings.insecure,
            certificateAuthorities: settings.certificateAuthorities, login: url.login, ftpTLS: settings.ftpTLS,
            protocols: protocols)
        self.parsed = parsed
    }

    /// Whether a URL of `scheme` is ftp or ftps: no HTTP headers come back, and the file's time
    /// needs asking for.
    static func isFTP(scheme: String) -> Bool {
        scheme == "ftp" || scheme == "ftps"
    }
}

/// What a response's body should become, decided once its headers are known.
enum BodyDisposition: Sendable {
    /// Hand the bytes to the sink.
    case write
    /// Read and drop the bytes (an error page, a redirect body).
    case discard
    /// Stop the transfer now; the sink keeps the reason.
    case abort
}

/// Receives one response on the transfer engine's thread.
///
/// Conforming types are used by one thread at a time: by the caller before the request is
/// submitted and after it completes, by the engine in between, so `@unchecked Sendable` is
/// sound for them.
protocol ResponseBodySink: AnyObject, Sendable {
    /// Called once per request with the final response's head, before its first body byte,
    /// or when the transfer ends if the response had no body. Not called for redirects.
    func begin(_ head: ResponseHead) -> BodyDisposition
    /// Body bytes, in order. Returning false aborts the transfer.
    func write(_ bytes: UnsafeRawBufferPointer) -> Bool
    /// Called when the request is over, after its last `write` and before its caller hears
    /// back, however it ended.
    func end()
}

extension ResponseBodySink {
    func end() {}
}

/// How one request ended, as libcurl saw it.
struct TransferOutcome: Sendable {
    /// The response's status and headers; nil if no response arrived.
    var head: ResponseHead?
    /// libcurl's result code (0 is CURLE_OK) and its error text.
    var curlCode: Int
    var curlMessage: String
    var osErrno: Int32
    /// Where a redirect points, resolved against the request URL.
    var redirectURL: String?
    /// The sink asked to stop; its own state says why.
    var abortedBySink: Bool
    var cancelled: Bool

    var succeeded: Bool { curlCode == 0 && !cancelled }

    /// The failure at the transport level, if any: curl errors and interruption. HTTP statuses
    /// are judged by the caller, which knows what it asked for.
    var transportFailure: TransferFailure? {
        if cancelled { return .cancelled }
        if curlCode == 0 || abortedBySink { return nil }
        return .curl(code: curlCode, message: curlMessage, osErrno: osErrno)
    }
}
