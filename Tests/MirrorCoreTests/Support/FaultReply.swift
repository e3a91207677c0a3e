import Foundation

/// One scripted answer of `FaultServer`: what to send (a file with static-server semantics, any
/// status, raw bytes, or nothing at all) and how to deliver it (late, in drips, cut short, with
/// lying headers).
///
/// Build one with a static constructor and chain delivery faults onto it:
/// ```swift
/// .file(data, etag: "\"v1\"")                       // a well-behaved static file
/// .status(503, headers: ["Retry-After": "1"])
/// .file(data).cut(afterBodyBytes: 1000)              // Content-Length says all, then the socket closes
/// .file(data).dripped(bytes: 100, every: .milliseconds(50))
/// ```
/// Whenever a fault leaves the response's framing wrong (a cut, a Content-Length that does not
/// match the body, a body delimited by closing), the server closes the connection after it, so a
/// fault never leaks into the next response on a reused connection.
struct FaultReply: Sendable {
    /// What the reply says, before delivery faults.
    enum Content: Sendable {
        case file(StaticFile)
        case status(code: Int, headers: HeaderFields, body: Data)
        /// Bytes written verbatim, whatever the request; then the connection closes.
        case raw(Data)
        /// Close the connection (FIN) without sending a byte.
        case closeWithoutResponse
        /// Abort the connection (RST, via SO_LINGER 0) without sending a byte.
        case resetConnection
    }

    /// A representation served the way a careful static file server serves it: HEAD, single byte
    /// ranges, `If-Range`, `If-None-Match` and `If-Modified-Since`, as RFC 9110 describes.
    struct StaticFile: Sendable {
        var data: Data
        var etag: String?
        var lastModified: String?
        /// False: every Range header is ignored and the whole file comes back with 200.
        var honorRange: Bool
        /// Whether responses advertise `Accept-Ranges: bytes`.
        var acceptRanges: Bool
        /// False: the range is served even when `If-Range` names another version, the way a
        /// broken cache or server splices new bytes onto an old partial file.
        var honorIfRange: Bool
        /// False: `If-None-Match` and `If-Modified-Since` are ignored and the file comes back
        /// with 200, as from a server (or cache) that does not implement conditional GETs.
        var honorConditions = true
    }

    /// Stop sending for `duration` once `afterBodyBytes` bytes of the body are out.
    struct Pause: Sendable {
        var afterBodyBytes: Int
        var duration: Duration
    }

    /// Send the body `bytes` at a time with `interval` between writes.
    struct Drip: Sendable {
        var bytes: Int
        var interval: Duration
    }

    /// Values a 206 claims instead of the true ones; nil keeps the true value.
    struct RangeMisreport: Sendable {
        var start: Int?
        var total: Int?
    }

    /// A header to set (or, with a nil value, remove) after the reply's own headers are built.
    struct HeaderOverride: Sendable {
        var name: String
        var value: String?
    }

    var content: Content
    var headerOverrides: [HeaderOverride] = []
    var delayBeforeHeaders: Duration = .zero
    var pause: Pause?
    var drip: Drip?
    var cutAfterBodyBytes: Int?
    var chunkSize: Int?
    var rangeMisreport: RangeMisreport?

    init(_ content: Content) {
        self.content = content
    }
}

// MARK: - What to send

extension FaultReply {
    /// `data` with static-file semantics: HEAD gets the headers and Content-Length only; GET gets
    /// 200, or 206 with `Content-Range: bytes N-M/TOTAL` for a satisfiable `bytes=N-`, `bytes=N-M`
    /// or `bytes=-SUFFIX`, or 416 with `Content-Range: bytes */TOTAL` for an unsatisfiable one.
    /// `If-Range` must match strongly (ETag) or exactly (Last-Modified) for the range to apply;
    /// otherwise the whole file comes back with 200. Multi-range requests get the whole file.
    static func file(_ data: Data, etag: String? = nil, lastModified: String? = nil,
                     honorRange: Bool = true, acceptRanges: Bool = true,
                     honorIfRange: Bool = true, honorConditions: Bool = true) -> FaultReply {
        // Rebased so that offsets into the file are offsets into the Data, even for a slice.
        let rebased = data.startIndex == 0 ? data : Data(data)
        return FaultReply(.file(StaticFile(data: rebased, etag: etag, lastModified: lastModified,
                                           honorRange: honorRange, acceptRanges: acceptRanges,
                                           honorIfRange: honorIfRange, honorConditions: honorConditions)))
    }

    /// Any status with these headers and body. Content-Length is added unless `headers` has one
    /// (or Transfer-Encoding); HEAD gets the same headers without the body.
    static func status(_ code: Int, headers: HeaderFields = [:], body: Data = Data()) -> FaultReply {
        FaultReply(.status(code: code, headers: headers, body: body.startIndex == 0 ? body : Data(body)))
    }

    /// A redirect to `location` (absolute URL, or any string a test wants to send).
    static func redirect(to location: String, code: Int = 302) -> FaultReply {
        .status(code, headers: ["Location": location], body: Data("Redirecting to \(location)\n".utf8))
    }

    /// `bytes` written verbatim, then the connection closes: for malformed responses.
    static func raw(_ bytes: Data) -> FaultReply {
        FaultReply(.raw(bytes))
    }

    /// `text` written verbatim as UTF-8, then the connection closes.
    static func raw(_ text: String) -> FaultReply {
        FaultReply(.raw(Data(text.utf8)))
    }

    /// The connection closes (FIN) without any response.
    static let closeWithoutResponse = FaultReply(.closeWithoutResponse)

    /// The connection is reset (RST) without any response.
    static let resetConnection = FaultReply(.resetConnection)
}

// MARK: - How to deliver it

extension FaultReply {
    /// Waits `delay` after reading the request before sending anything.
    func delayed(by delay: Duration) -> FaultReply {
        var copy = self
        copy.delayBeforeHeaders = delay
        return copy
    }

    /// Stalls for `duration` once `afterBodyBytes` bytes of the body have been sent, then goes on.
    func stalled(afterBodyBytes: Int, for duration: Duration) -> FaultReply {
        var copy = self
        copy.pause = Pause(afterBodyBytes: afterBodyBytes, duration: duration)
        return copy
    }

    /// Sends the body `bytes` at a time, waiting `interval` between writes.
    func dripped(bytes: Int, every interval: Duration) -> FaultReply {
        precondition(bytes > 0, "a drip needs at least one byte per write")
        var copy = self
        copy.drip = Drip(bytes: bytes, interval: interval)
        return copy
    }

    /// Sends the headers unchanged (Content-Length still the full size) and only the first
    /// `afterBodyBytes` bytes of the body, then closes the connection.
    func cut(afterBodyBytes: Int) -> FaultReply {
        var copy = self
        copy.cutAfterBodyBytes = afterBodyBytes
        return copy
    }

    /// Sends the body with `Transfer-Encoding: chunked` and no Content-Length, as dynamic servers
    /// do: the client learns the size only at the end.
    func chunked(chunkSize: Int = 16 * 1024) -> FaultReply {
        precondition(chunkSize > 0, "chunks need at least one byte")
        var copy = self
        copy.chunkSize = chunkSize
        return copy
    }

    /// Sets header `name` to `value` after the reply's own headers are built (replacing any of that
    /// name), or removes it when `value` is nil. Removing Content-Length makes the body end at
    /// connection close.
    func header(_ name: String, _ value: String?) -> FaultReply {
        var copy = self
        copy.headerOverrides.append(HeaderOverride(name: name, value: value))
        return copy
    }

    /// Claims a Content-Length of `length` whatever the body is; the body itself is unchanged.
    func contentLength(_ length: Int) -> FaultReply {
        header("Content-Length", String(length))
    }

    /// Makes a 206 claim a different start and/or total in Content-Range. With a different start
    /// the body really holds the bytes from that start (a server that chose another range than
    /// asked); with a different total only the label lies. Other statuses are unaffected.
    func misreportingRange(start: Int? = nil, total: Int? = nil) -> FaultReply {
        var copy = self
        copy.rangeMisreport = RangeMisreport(start: start, total: total)
        return copy
    }
}
