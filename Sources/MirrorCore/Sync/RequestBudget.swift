import Synchronization

/// Which budget a request of `sync` or `plan` takes: one of the run's `concurrency` permits
/// (`connection`), or a stream on the HTTP/2 connection its origin already speaks (`stream`).
/// The one place that decides it; `TransferSlots` counts what it decides.
///
/// `concurrency` (and a host's, under `hosts:`) counts connections and large transfers. A
/// light request to an origin known to speak HTTP/2 rides on that origin's connection as one
/// more stream, up to `streamCap` at once per origin (libcurl keeps to the server's own
/// SETTINGS_MAX_CONCURRENT_STREAMS when it is lower): a re-check of thousands of files is then
/// a handful of round trips instead of thousands divided by `concurrency`. Everything else takes
/// a connection permit, as before: HTTP/1.1, `http://`, FTP and `file:` (one request per
/// connection), a transfer under a rate limit (forced to HTTP/1.1), any request to an origin
/// not heard yet (its first connection's handshake, or through a proxy its first reply), and a
/// GET whose body is expected to be large.
enum RequestBudget: Equatable, Sendable {
    case connection
    case stream

    /// How an origin (scheme, host, port and the proxy in between) was last heard to answer.
    enum OriginProtocol: Equatable, Sendable {
        /// No reply yet: its requests are held to the connection budget.
        case unknown
        case http1
        case http2
    }

    /// The request about to be made, as far as its weight is known before it is sent.
    enum Request: Equatable, Sendable {
        /// The first request of an attempt: a probe (a HEAD, or a one-byte range GET), or the GET
        /// of a file whose size nothing says yet (a new file). Light until its reply's head says
        /// otherwise (`staysOnStream`).
        case light
        /// A GET expected to bring this many bytes (the probe's size less the resume offset, or
        /// the entry's `size` pin).
        case body(Int64)

        /// A GET expected to bring `largeBody` bytes or more: a large transfer.
        var isLarge: Bool {
            guard case .body(let bytes) = self else { return false }
            return bytes >= RequestBudget.largeBody
        }
    }

    /// Streams at once per HTTP/2 connection, at most: libcurl's
    /// `CURLMOPT_MAX_CONCURRENT_STREAMS`, which the engine sets to it (libcurl keeps to the
    /// server's own limit when it is lower, nginx's 128 by default).
    static let streamCap = 100
    /// Connections an origin's streams spread over, at most: when one carries `streamCap`,
    /// libcurl opens another, within the origin's connection budget (`concurrency`, or its
    /// host's). A re-check of thousands of files then has a few hundred requests in flight, as
    /// wget2 keeps 30 on each of its connections.
    static let streamConnections = 4

    /// Stream permits at once for an origin whose connection budget is `connections`.
    static func streamBudget(connections: Int, streamCap: Int = streamCap, spread: Int = streamConnections) -> Int {
        max(1, streamCap) * max(1, min(connections, spread))
    }
    /// A body of this many bytes or more is a large transfer: it takes a connection permit.
    static let largeBody: Int64 = 1 << 20

    /// The budget for `request` to an origin heard to answer as `origin`; `multiplexable`: the
    /// request may share a connection at all (`multiplexes(url:rateLimited:)`).
    static func choose(_ request: Request, origin: OriginProtocol, multiplexable: Bool) -> RequestBudget {
        guard multiplexable, origin == .http2 else { return .connection }
        return request.isLarge ? .connection : .stream
    }

    /// Once the head of a reply to a GET sent on a stream is in, before its first body byte:
    /// whether the body may come on that stream. A success whose body is large, or of no stated
    /// length, needs a connection permit: it takes a free one, or the request is stopped there
    /// and sent again once it holds one. Other replies (304, a redirect, an error page) bring
    /// nothing worth a permit.
    static func staysOnStream(status: Int, bodyLength: Int64?) -> Bool {
        guard (200..<300).contains(status) else { return true }
        guard let bodyLength else { return false }
        return bodyLength < largeBody
    }

    /// Whether a request that may share a connection (`multiplexes`) waits for one being set
    /// up to its origin rather than opening its own (libcurl's `CURLOPT_PIPEWAIT`), given what
    /// the origin was heard to speak and how many of its requests opened connections while
    /// that was not known. Until an origin has answered, its first `streamConnections` requests
    /// each open a connection: once it turns out to speak HTTP/2, the stream permits it is then
    /// granted find that many connections ready, instead of filling the first one and waiting a
    /// handshake for each further one (libcurl opens one at a time for requests that wait). The
    /// others wait, and ride on one of those if it speaks HTTP/2.
    static func waitsForConnection(origin: OriginProtocol, openedWhileUnknown: Int, spread: Int = streamConnections) -> Bool {
        origin != .unknown || openedWhileUnknown >= max(1, spread)
    }

    /// Whether a request may share a connection with others: over TLS (`https`, where ALPN
    /// offers HTTP/2) and not under a rate limit (a paused HTTP/2 stream keeps its window open,
    /// so a limited transfer goes over HTTP/1.1). `TransferContext` asks for multiplexing, or
    /// forces HTTP/1.1, by the same answer.
    static func multiplexes(url: String, rateLimited: Bool) -> Bool {
        !rateLimited && isHTTPS(url)
    }

    /// `RemoteProbe.scheme(of: url) == "https"`, on the first six bytes: asked for every request
    /// and, before a run starts, for every entry of the manifest (`SyncRun.mayRideOnStreams`,
    /// which looks through the whole list when none is https: 1.4 ms for 20,000 entries by way
    /// of the scheme's text). Only ASCII letters lowercase to the ASCII of `https`, as
    /// `asciiLowercased` folds them.
    static func isHTTPS(_ url: String) -> Bool {
        var url = url
        return url.withUTF8 { bytes in
            guard bytes.count >= 6, bytes[5] == UInt8(ascii: ":") else { return false }
            return bytes[0].asciiLowercased == UInt8(ascii: "h") && bytes[1].asciiLowercased == UInt8(ascii: "t")
                && bytes[2].asciiLowercased == UInt8(ascii: "t") && bytes[3].asciiLowercased == UInt8(ascii: "p")
                && bytes[4].asciiLowercased == UInt8(ascii: "s")
        }
    }
}

/// What a request's protocol is learned for: scheme, host and port of its URL, and the proxy it
/// goes through (a tunnel to the same origin may answer otherwise).
struct OriginKey: Hashable, Sendable, CustomStringConvertible {
    let description: String

    /// Nil for a URL with no host (`file:`).
    init?(url: String, proxy: String?) {
        // Asked for every entry and every request; without a proxy it depends only on the
        // URL's `scheme://authority`, so a run's URLs to one server share one (as `HostKey`'s).
        let prefix = proxy == nil ? HostKey.schemeAndAuthority(of: url) : nil
        if let prefix, let known = Self.known.withLock({ $0.find(prefix) }) {
            self = known
            return
        }
        guard let host = HostKey(url: url) else { return nil }
        let scheme = RemoteProbe.scheme(of: url)
        description = "\(scheme)://\(host.host.lowercased()):\(host.port)" + (proxy.map { " via \($0)" } ?? "")
        if let prefix { Self.known.withLock { $0.remember(self, for: prefix) } }
    }

    /// Origins without a proxy already made, by `scheme://authority`.
    private static let known = Mutex(KnownByPrefix<OriginKey>())
}
