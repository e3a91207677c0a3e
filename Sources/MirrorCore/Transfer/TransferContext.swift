import CCurl
import CLinux
import Glibc

/// The state of one request while the engine runs it. Lives on the engine's thread; curl's
/// callbacks find it through the `Unmanaged` userdata pointer.
final class TransferContext {
    let id: UInt64
    let request: TransferRequest
    /// Whether the request goes over TLS (`TransferRequest.usesTLS`) and is FTP, worked out once
    /// from one reading of its URL's scheme: asked when the request is added, configured and
    /// retired.
    let usesTLS: Bool
    let isFTP: Bool
    let sink: (any ResponseBodySink)?
    let easy: EasyHandle
    /// Called once, on the engine's thread, when the request ends, with the request itself (so
    /// that its caller need keep no copy of it).
    let completion: (TransferOutcome, TransferRequest) -> Void

    /// Freed only after the easy handle is cleaned up: libcurl keeps these pointers.
    private var headerList: UnsafeMutablePointer<curl_slist>?
    /// The request's URL as parsed here for libcurl (`CURLOPT_CURLU`) when it came without
    /// one, freed by the keeper with the handle's other request data; nil otherwise.
    private var parsedURL: OpaquePointer?
    /// libcurl's message of a failure (`CURLOPT_ERRORBUFFER`); the handle's, emptied for each
    /// request.
    private var errorBuffer: UnsafeMutablePointer<CChar> { easy.errorBuffer }

    private var headers = HeaderLineParser()
    private var watchdog: StallWatchdog
    private var disposition: BodyDisposition?
    private var abortedBySink = false
    /// For a `file:` URL, a readable descriptor of the checked file, which libcurl opens again
    /// through /proc (see `fileSourceURL`). Closed in `releaseHandle`.
    private var fileSource: Int32 = -1
    /// Why the request was refused before libcurl saw it.
    private var refusal: String?
    /// Paused by its rate limits: the body waits in libcurl until `resumeIfAllowed` lets it on.
    private(set) var heldByThrottle = false

    static let receiveBufferSize = 512 * 1024
    /// The smallest receive buffer: what libcurl hands over at a time anyway.
    static let smallestReceiveBuffer = 16 * 1024

    /// libcurl's receive buffer for `request`: `receiveBufferSize` (fewer reads of a large
    /// body), or less for a body known to be short, or what its rate limits allow. libcurl
    /// allocates it per transfer: hundreds of HEADs or conditional GETs in flight on HTTP/2
    /// streams held 512 KiB each, 64 MiB for replies of a few hundred bytes.
    static func receiveBuffer(for request: TransferRequest) -> Int {
        var size = request.throttle?.receiveBufferSize ?? receiveBufferSize
        if let expected = request.expectedBody, expected < Int64(size) {
            // Room for the reply's head too: a body that fills the buffer exactly leaves its
            // last bytes for another read.
            let wanted = Int(max(expected, 0)) + replyHeadAllowance
            let rounded = (wanted + smallestReceiveBuffer - 1) / smallestReceiveBuffer * smallestReceiveBuffer
            size = min(size, rounded)
        }
        return size
    }

    /// What a reply's status line and header fields usually take, at most.
    static let replyHeadAllowance = 4 * 1024
    static let userAgent = "mirror/\(MirrorVersion.string)"
    /// The User-Agent line, sent as one of the request's own headers rather than through
    /// `CURLOPT_USERAGENT`: libcurl 7.88 formats that option into a line of its own for every
    /// request, a character at a time, and then copies the line into the request the same way
    /// (about 2,000 instructions); a header of the list it copies once.
    static let userAgentLine = "User-Agent: \(userAgent)"
    /// A list of that line alone, for the requests with no header of their own (a plan's HEAD,
    /// a download's first GET): made once, never freed, never handed to the keeper.
    private static let userAgentOnly = UncheckedList(mirror_curl_slist_append(nil, userAgentLine))

    init(
        id: UInt64, request: consuming TransferRequest, sink: (any ResponseBodySink)?, easy: EasyHandle,
        completion: @escaping (TransferOutcome, TransferRequest) -> Void
    ) {
        self.id = id
        self.easy = easy
        let scheme = RemoteProbe.scheme(of: request.url)
        usesTLS = request.usesTLS(scheme: scheme)
        isFTP = TransferRequest.isFTP(scheme: scheme)
        self.sink = sink
        self.completion = completion
        watchdog = StallWatchdog(timeout: request.timeout, minSpeed: request.minSpeed, minSpeedTime: request.minSpeedTime)
        // Last: moved in, not copied.
        self.request = request
        easy.errorBuffer[0] = 0
    }

    /// A new easy handle with the options every request sets alike, set on the thread that
    /// makes it (the `EasyHandleKeeper`'s, nearly always): the engine's thread then sets only
    /// each request's own (`configure`). An option refused here fails the request that takes
    /// the handle. The callbacks' data (the context) is set by `configure`: a handle whose
    /// `configure` fails is retired without a transfer, so no callback runs without it.
    static func makeHandle() -> EasyHandle {
        let easy = EasyHandle()
        prepare(easy)
        return easy
    }

    /// Sets the options every request sets alike on a new or reset handle; one libcurl refuses
    /// is kept as the handle's `setupError`.
    static func prepare(_ easy: EasyHandle) {
        do {
            // An empty no-proxy list means no exceptions (see `CURLOPT_PROXY` in `configure`).
            try easy.set(CURLOPT_NOPROXY, "", "CURLOPT_NOPROXY")
            // Redirects are followed by `Fetcher`, which decides per hop which headers may go along.
            try easy.set(CURLOPT_FOLLOWLOCATION, 0, "CURLOPT_FOLLOWLOCATION")
            try easy.set(CURLOPT_NOSIGNAL, 1, "CURLOPT_NOSIGNAL")
            try easy.set(CURLOPT_TCP_KEEPALIVE, 1, "CURLOPT_TCP_KEEPALIVE")
            // A silent peer is caught by the progress callback: libcurl's own low-speed check
            // averages over several seconds, so a stall right after a burst would go unnoticed.
            try easy.set(CURLOPT_NOPROGRESS, 0, "CURLOPT_NOPROGRESS")
            // Called by libcurl at least once a second; a non-zero return aborts the transfer.
            try easy.check(mirror_easy_setopt_xferinfo_callback(easy.raw) { userdata, _, received, _, sent in
                let verdict = Unmanaged<TransferContext>.fromOpaque(userdata!)._withUnsafeGuaranteedRef { context in
                    context.watchdog.observe(
                        now: MonotonicClock.milliseconds(), received: Int64(received), sent: Int64(sent),
                        heldByThrottle: context.heldByThrottle)
                }
                return verdict == .keepGoing ? 0 : 1
            }, "CURLOPT_XFERINFOFUNCTION")
            // The context is held by the engine while libcurl runs its request: borrowed here,
            // not retained and released again for every call.
            try easy.set(CURLOPT_HEADERFUNCTION, callback: { data, size, count, userdata in
                Unmanaged<TransferContext>.fromOpaque(userdata!)._withUnsafeGuaranteedRef { context in
                    context.headers.receive(UnsafeRawBufferPointer(start: data, count: size * count))
                }
                return size * count
            }, "CURLOPT_HEADERFUNCTION")
            try easy.set(CURLOPT_WRITEFUNCTION, callback: { data, size, count, userdata in
                let context = Unmanaged<TransferContext>.fromOpaque(userdata!).takeUnretainedValue()
                switch context.receiveBody(UnsafeRawBufferPointer(start: data, count: size * count)) {
                case .taken: return size * count
                // Any count other than the one offered makes libcurl stop with CURLE_WRITE_ERROR.
                case .refused: return 0
                // libcurl keeps the bytes and offers them again once the transfer is resumed.
                case .held: return Int(CURL_WRITEFUNC_PAUSE)
                }
            }, "CURLOPT_WRITEFUNCTION")
        } catch {
            easy.setupError = error
        }
    }

    private static let httpProtocols = RedirectRule.protocols(forScheme: "http")
    private static let fileProtocols = RedirectRule.protocols(forScheme: "file")

    /// Sets the request's own options (`prepare` set the rest). `self` must stay alive (the
    /// engine holds it) until `finish`.
    func configure() throws(CurlSetupError) {
        if let refused = easy.setupError { throw refused }
        let userdata = Unmanaged.passUnretained(self).toOpaque()
        let url = request.protocols == Self.fileProtocols ? try fileSourceURL() : request.url
        try easy.set(CURLOPT_URL, url, "CURLOPT_URL")
        if request.protocols == Self.httpProtocols {
            // Given the URL both as text and parsed, libcurl 7.88 takes the parts from the
            // parsed one and the text as the request's URL: it neither parses the text again
            // nor rebuilds it from the parts, which it formats a character at a time (about
            // 11,000 instructions a request; see docs/PERFORMANCE.md). Parsed ahead with the
            // entry's source, or here (a redirect's next hop).
            // Byte for byte: two texts `==` calls equal may be two URLs (a precomposed é and a
            // decomposed one are percent-encoded differently).
            if let parsed = request.parsed, SameBytes.of(parsed.text, url) {
                try easy.set(CURLOPT_CURLU, pointer: UnsafeMutableRawPointer(parsed.handle), "CURLOPT_CURLU")
            } else if let parsed = ParsedURL.parse(url) {
                parsedURL = parsed
                try easy.set(CURLOPT_CURLU, pointer: UnsafeMutableRawPointer(parsed), "CURLOPT_CURLU")
            }
        }
        try easy.set(CURLOPT_PROTOCOLS_STR, request.protocols, "CURLOPT_PROTOCOLS_STR")
        if request.protocols != Self.httpProtocols {
            // The file's date (FTP's MDTM, a local file's mtime): for protocols without HTTP
            // headers it is the only validator (see `currentHead`). Not over HTTP, where the
            // reply's own Last-Modified is read (`HeaderLineParser`) and libcurl would parse it
            // again with its date parser, a third of a request's `sscanf` calls.
            try easy.set(CURLOPT_FILETIME, 1, "CURLOPT_FILETIME")
        }
        // The proxy was chosen with `no_proxy` already applied (see `ProxyEnvironment`): libcurl
        // must not read the environment again, so that the connectivity check and the transfer
        // agree. An empty string means no proxy.
        try easy.set(CURLOPT_PROXY, request.proxy ?? "", "CURLOPT_PROXY")
        try easy.set(CURLOPT_BUFFERSIZE, Self.receiveBuffer(for: request), "CURLOPT_BUFFERSIZE")
        // To an HTTP/2 server, wait for a connection being set up and multiplex over it rather
        // than open one connection per request, except the few that open the origin's first
        // connections (`RequestBudget.waitsForConnection`). Only over TLS, the one way HTTP/2 is
        // offered here (ALPN): to an http:// host libcurl would hold every request after the
        // first until that one ended, a connection at a time.
        if request.heldToHTTP1 {
            // A paused HTTP/2 stream (libcurl 7.88) keeps its flow-control window open: the
            // server would go on sending at full speed into memory, and the limit would hold
            // back only the disk. Over HTTP/1.1 a pause stops reading the socket, and TCP stops
            // the server. A segment needs a connection of its own: servers cap each one.
            try easy.set(CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1, "CURLOPT_HTTP_VERSION")
        } else if request.waitsForConnection, RequestBudget.multiplexes(url: request.url, rateLimited: false) {
            try easy.set(CURLOPT_PIPEWAIT, 1, "CURLOPT_PIPEWAIT")
        }
        try easy.set(CURLOPT_ERRORBUFFER, pointer: UnsafeMutableRawPointer(errorBuffer), "CURLOPT_ERRORBUFFER")
        if request.method == .head {
            try easy.set(CURLOPT_NOBODY, 1, "CURLOPT_NOBODY")
        }
        if let first = request.rangeFirst {
            let range = request.rangeLast.map { "\(first)-\($0)" } ?? "\(first)-"
            try easy.set(CURLOPT_RANGE, range, "CURLOPT_RANGE")
        }
        let timeoutMilliseconds = max(1, Int(request.timeout.milliseconds))
        try easy.set(CURLOPT_CONNECTTIMEOUT_MS, timeoutMilliseconds, "CURLOPT_CONNECTTIMEOUT_MS")
        try easy.set(CURLOPT_XFERINFODATA, pointer: userdata, "CURLOPT_XFERINFODATA")
        if request.insecure {
            try easy.set(CURLOPT_SSL_VERIFYPEER, 0, "CURLOPT_SSL_VERIFYPEER")
            try easy.set(CURLOPT_SSL_VERIFYHOST, 0, "CURLOPT_SSL_VERIFYHOST")
        }
        if let file = request.certificateAuthorities.file {
            try easy.set(CURLOPT_CAINFO, file, "CURLOPT_CAINFO")
        }
        if let directory = request.certificateAuthorities.directory {
            try easy.set(CURLOPT_CAPATH, directory, "CURLOPT_CAPATH")
        }
        if request.onHandshakeProtocol != nil, usesTLS, HandshakeWatch.isAvailable {
            // Called for each connection the request opens, before its handshake. Refused, the
            // request goes on without it: its reply tells the protocol then.
            let refused = mirror_easy_setopt_ssl_ctx_callback(easy.raw) { _, sslContext, userdata in
                guard let sslContext, let userdata else { return CURLE_OK }
                let context = Unmanaged<TransferContext>.fromOpaque(userdata).takeUnretainedValue()
                if let heard = context.request.onHandshakeProtocol { HandshakeWatch.watch(sslContext, heard: heard) }
                return CURLE_OK
            } != CURLE_OK
            if !refused { try easy.set(CURLOPT_SSL_CTX_DATA, pointer: userdata, "CURLOPT_SSL_CTX_DATA") }
        }
        // libcurl's own netrc lookup would hand a host's login to any port and scheme of it;
        // `Fetcher` decides per hop instead, and libcurl only sends what it is given.
        if let login = request.login {
            try easy.set(CURLOPT_USERNAME, login.user, "CURLOPT_USERNAME")
            try easy.set(CURLOPT_PASSWORD, login.password, "CURLOPT_PASSWORD")
        }
        if isFTP {
            try easy.set(CURLOPT_USE_SSL, Self.useSSL(request.ftpTLS), "CURLOPT_USE_SSL")
            // AUTH TLS, the command RFC 4217 names; libcurl would try the older AUTH SSL first.
            try easy.set(CURLOPT_FTPSSLAUTH, Int(CURLFTPAUTH_TLS.rawValue), "CURLOPT_FTPSSLAUTH")
        }
        // mirror's User-Agent, unless the manifest names one (libcurl sends a header of the
        // list in place of its own).
        let ownAgent = request.headers.contains { $0.name.utf8.count == 10 && $0.name.lowercased() == "user-agent" }
        let ifRange = request.rangeFirst != nil ? request.ifRange : nil
        if request.headers.isEmpty, ifRange == nil, request.ifNoneMatch == nil, !ownAgent, let shared = Self.userAgentOnly.list {
            try easy.set(CURLOPT_HTTPHEADER, list: shared, "CURLOPT_HTTPHEADER")
        } else {
            // Each line handed to libcurl as it is made (it copies it), not gathered first.
            for header in request.headers {
                // libcurl drops a header written "Name:" with no value; "Name;" is how it sends
                // one empty.
                try appendHeader(header.value.isEmpty ? "\(header.name);" : "\(header.name): \(header.value)")
            }
            if let ifRange { try appendHeader("If-Range: \(ifRange)") }
            if let etag = request.ifNoneMatch { try appendHeader("If-None-Match: \(etag)") }
            if !ownAgent { try appendHeader(Self.userAgentLine) }
            try easy.set(CURLOPT_HTTPHEADER, list: headerList, "CURLOPT_HTTPHEADER")
        }
        if let proxy = request.proxy, !proxy.isEmpty {
            // A proxy's CONNECT names the client by `CURLOPT_USERAGENT` alone: libcurl 7.88
            // sends the request's own header list to the server only (separate lists are its
            // default). The request itself still sends the list's line (or the manifest's).
            try easy.set(CURLOPT_USERAGENT, Self.userAgent, "CURLOPT_USERAGENT")
        }
        try easy.set(CURLOPT_HEADERDATA, pointer: userdata, "CURLOPT_HEADERDATA")
        try easy.set(CURLOPT_WRITEDATA, pointer: userdata, "CURLOPT_WRITEDATA")
    }

    /// Appends a copy of `line` to the request's header list (`curl_slist_append` copies it).
    private func appendHeader(_ line: String) throws(CurlSetupError) {
        guard let appended = line.withCString({ mirror_curl_slist_append(headerList, $0) }) else {
            throw CurlSetupError(option: "CURLOPT_HTTPHEADER", code: CURLE_OUT_OF_MEMORY)
        }
        headerList = appended
    }

    /// Lets libcurl take a connection of `early` where it would open a socket to the same
    /// address (`EarlyConnections.take`); elsewhere it opens one as it would have itself.
    /// `early` must outlive the request (the engine holds it).
    func offer(_ early: EarlyConnections) throws(CurlSetupError) {
        try easy.check(mirror_easy_setopt_opensocket_callback(easy.raw) { userdata, purpose, address in
            guard let address else { return CURL_SOCKET_BAD }
            if purpose == CURLSOCKTYPE_IPCXN, let userdata,
               let taken = Unmanaged<EarlyConnections>.fromOpaque(userdata).takeUnretainedValue().take(UnsafePointer(address)) {
                return taken
            }
            return socket(address.pointee.family, address.pointee.socktype, address.pointee.protocol)
        }, "CURLOPT_OPENSOCKETFUNCTION")
        try easy.set(CURLOPT_OPENSOCKETDATA, pointer: Unmanaged.passUnretained(early).toOpaque(), "CURLOPT_OPENSOCKETDATA")
    }

    /// libcurl's level for `ftp_tls`: AUTH TLS for the login, PROT P for the data.
    private static func useSSL(_ policy: FTPTLS) -> Int {
        switch policy {
        case .no: Int(CURLUSESSL_NONE.rawValue)
        case .try: Int(CURLUSESSL_TRY.rawValue)
        case .required: Int(CURLUSESSL_ALL.rawValue)
        }
    }

    /// libcurl opens a `file:` URL's path itself, with a blocking open(2): a FIFO there would
    /// hold the engine's thread, and with it every transfer, timeout and cancellation, until
    /// something writes to it; a device could be read for ever. So the path is opened here
    /// first with O_PATH (which opens neither a FIFO nor a device), refused unless it is a
    /// regular file, and libcurl gets /proc/self/fd/N of a readable descriptor of that very
    /// file: whatever is put at the path after the check is never reached.
    private func fileSourceURL() throws(CurlSetupError) -> String {
        func refuse(_ reason: String) -> CurlSetupError {
            refusal = reason
            return CurlSetupError(option: "CURLOPT_URL", code: CURLE_FILE_COULDNT_READ_FILE)
        }
        guard let path = Self.filePath(of: request.url) else {
            throw refuse("cannot read a local path from \(request.url)")
        }
        let located = mirror_open_location(path)
        if located < 0 { throw refuse("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(located) }
        var info = stat()
        if fstat(located, &info) != 0 { throw refuse("cannot inspect \(path): \(String(cString: strerror(errno)))") }
        guard info.st_mode & S_IFMT == S_IFREG else {
            let kind = switch info.st_mode & S_IFMT {
            case S_IFIFO: "a FIFO"
            case S_IFDIR: "a directory"
            case S_IFCHR, S_IFBLK: "a device"
            case S_IFSOCK: "a socket"
            default: "not a regular file"
            }
            throw refuse("\(path) is \(kind); mirror reads only regular files from file URLs")
        }
        let readable = open("/proc/self/fd/\(located)", O_RDONLY | O_CLOEXEC)
        if readable < 0 {
            let reason = errno == ENOENT ? "/proc is not mounted, and file URLs are read through it" : String(cString: strerror(errno))
            throw refuse("cannot open \(path): \(reason)")
        }
        fileSource = readable
        return "file:///proc/self/fd/\(readable)"
    }

    /// The local path a `file:` URL names, percent-decoded as libcurl decodes it.
    private static func filePath(of url: String) -> String? {
        guard let parsed = mirror_curl_url() else { return nil }
        defer { mirror_curl_url_cleanup(parsed) }
        guard mirror_curl_url_set(parsed, CURLUPART_URL, url, 0) == CURLUE_OK else { return nil }
        var part: UnsafeMutablePointer<CChar>?
        guard mirror_curl_url_get(parsed, CURLUPART_PATH, &part, UInt32(CURLU_URLDECODE)) == CURLUE_OK, let part else { return nil }
        defer { mirror_curl_free(part) }
        return String(cString: part)
    }

    /// What became of bytes offered by libcurl.
    private enum BodyReceipt {
        case taken, refused
        /// Not taken yet: the rate limits ask to wait.
        case held
    }

    private func receiveBody(_ bytes: UnsafeRawBufferPointer) -> BodyReceipt {
        let disposition = self.disposition ?? decideDisposition()
        switch disposition {
        case .discard: return .taken
        case .abort: return .refused
        case .write:
            if let throttle = request.throttle {
                let now = MonotonicClock.milliseconds()
                if throttle.wait(now: now) > 0 {
                    heldByThrottle = true
                    return .held
                }
                throttle.spend(bytes.count, now: now)
            }
            if sink?.write(bytes) == false {
                abortedBySink = true
                return .refused
            }
            return .taken
        }
    }

    /// For a transfer held by its rate limits: resumes it when they let bytes through now
    /// (returning 0), else returns the milliseconds until they will. Nil when it is not held.
    /// On the engine's thread; resuming may offer the held bytes again at once.
    func resumeIfAllowed(now: Int64) -> Int64? {
        guard heldByThrottle, let throttle = request.throttle else { return nil }
        let wait = throttle.wait(now: now)
        if wait > 0 { return wait }
        heldByThrottle = false
        watchdog.restartClocks(now: now)
        mirror_curl_easy_pause(easy.raw, CURLPAUSE_CONT)
        return 0
    }

    private func decideDisposition() -> BodyDisposition {
        let head = currentHead()
        if headers.sawStatusLine, let onReplyProtocol = request.onReplyProtocol {
            // The final reply's, not a proxy's answer to CONNECT.
            switch easy.infoLong(CURLINFO_HTTP_VERSION) {
            case CURL_HTTP_VERSION_2_0: onReplyProtocol(.http2)
            case CURL_HTTP_VERSION_1_0, CURL_HTTP_VERSION_1_1: onReplyProtocol(.http1)
            default: break
            }
        }
        let decided: BodyDisposition
        if head.isRedirect || sink == nil {
            decided = .discard
        } else {
            decided = sink!.begin(head)
            if decided == .abort { abortedBySink = true }
        }
        disposition = decided
        return decided
    }

    /// The response head so far. Protocols without HTTP headers (file, ftp) get one made from
    /// what libcurl knows, so callers judge every response the same way: the size, and the
    /// file's time (FTP's MDTM) as a Last-Modified.
    private func currentHead() -> ResponseHead {
        if let head = headers.head { return head }
        let length = easy.infoOffset(CURLINFO_CONTENT_LENGTH_DOWNLOAD_T)
        var synthetic: [(name: String, value: String)] = []
        if let date = easy.infoOffset(CURLINFO_FILETIME_T).flatMap(HTTPDate.format) {
            synthetic.append((name: "last-modified", value: date))
        }
        if let first = request.rangeFirst, first > 0 {
            // The length is the server's word: a total past Int64.max is no usable range.
            if let length, length > 0, case let (total, overflow) = first.addingReportingOverflow(length), !overflow {
                synthetic.append((name: "content-range", value: "bytes \(first)-\(total - 1)/\(total)"))
            }
            return ResponseHead(status: 206, fields: synthetic)
        }
        if let length { synthetic.append((name: "content-length", value: "\(length)")) }
        return ResponseHead(status: 200, fields: synthetic)
    }

    /// Completes the request: consults the sink if the response had no body, then tells the
    /// caller. Call after the handle left the multi handle, before `releaseHandle`.
    func finish(code: CURLcode, cancelled: Bool) {
        let head: ResponseHead? = headers.sawStatusLine || code == CURLE_OK ? currentHead() : nil
        if disposition == nil, head != nil, !cancelled, code == CURLE_OK {
            _ = decideDisposition()
        }
        var code = code
        var message = errorBuffer.pointee != 0
            ? String(cString: errorBuffer)
            : String(cString: mirror_curl_easy_strerror(code))
        if let refusal {
            message = refusal
        } else if let stopped = watchdog.stopMessage {
            code = CURLE_OPERATION_TIMEDOUT
            message = stopped
        }
        let outcome = TransferOutcome(
            head: head,
            curlCode: Int(code.rawValue),
            curlMessage: message,
            osErrno: Int32(truncatingIfNeeded: easy.infoLong(CURLINFO_OS_ERRNO)),
            redirectURL: easy.infoString(CURLINFO_REDIRECT_URL),
            abortedBySink: abortedBySink,
            cancelled: cancelled
        )
        sink?.end()
        completion(outcome, request)
    }

    /// The handle, once it has left the multi handle and the request's end was told, with
    /// what libcurl points into, for `EasyHandleKeeper` to clean up; the context uses none of
    /// it again.
    func retire() -> EasyHandleKeeper.Retired {
        defer {
            fileSource = -1
            headerList = nil
            parsedURL = nil
        }
        return EasyHandleKeeper.Retired(
            handle: easy, headerList: headerList, parsedURL: parsedURL, fileSource: fileSource, mayHaveSharedConnection: mayShareConnection)
    }

    /// Whether the request may have gone on a connection other requests used at the same time:
    /// an HTTPS request libcurl was free to put on an HTTP/2 connection.
    private var mayShareConnection: Bool {
        usesTLS && !request.heldToHTTP1
    }
}

/// Milliseconds on a clock that never jumps.
public enum MonotonicClock {
    public static func milliseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }
}

extension Duration {
    var milliseconds: Int64 {
        let parts = components
        return parts.seconds.saturatingMultiplied(by: 1000).saturatingAdding(parts.attoseconds / 1_000_000_000_000_000)
    }
}

/// A libcurl header list made once and shared by every request that sends it as it is.
private struct UncheckedList: @unchecked Sendable {
    let list: UnsafeMutablePointer<curl_slist>?
    init(_ list: UnsafeMutablePointer<curl_slist>?) { self.list = list }
}
