import FoundationEssentials

/// Sends a request through the engine and follows redirects itself, hop by hop, so that it
/// decides what travels to each new location: at most `maxRedirects` hops, only to http/https
/// (ftp/ftps only when the original URL was ftp), and the manifest's headers, any URL
/// credentials and the netrc login only while scheme, host and port stay the same (default
/// ports filled in): to that same origin they go along, to any other none. A GET's conditions
/// (`If-None-Match`, `If-Modified-Since`, `Range` with `If-Range`) go to every hop. Each hop
/// goes through the proxy that `proxies` chooses for its URL.
///
/// A class: every probe and download captures it in its completion, and a reference is one
/// retain where the struct retained its engine, proxy environment and two closures.
final class Fetcher: Sendable {
    let engine: TransferEngine
    let proxies: ProxyEnvironment
    /// Told which protocol each hop's origin (through its proxy) answered with, when the hop
    /// could have shared a connection (`RequestBudget.multiplexes`).
    let onOriginProtocol: (@Sendable (OriginKey, RequestBudget.OriginProtocol) -> Void)?
    /// Asked, for each such hop, whether it waits for a connection being set up to its origin
    /// rather than opening its own (`TransferRequest.waitsForConnection`); nil: it waits.
    let waitsForConnection: (@Sendable (OriginKey) -> Bool)?
    /// The manifest's `rewrite:` rules: a redirect to a URL an `only: true` rule forbids is
    /// refused, so that a mirror that sends a client upstream cannot take the run there.
    let rewrites: RewriteRules
    static let maxRedirects = 10

    init(
        engine: TransferEngine, proxies: ProxyEnvironment,
        onOriginProtocol: (@Sendable (OriginKey, RequestBudget.OriginProtocol) -> Void)? = nil,
        waitsForConnection: (@Sendable (OriginKey) -> Bool)? = nil, rewrites: RewriteRules = RewriteRules()
    ) {
        self.engine = engine
        self.proxies = proxies
        self.rewrites = rewrites
        self.onOriginProtocol = onOriginProtocol
        self.waitsForConnection = waitsForConnection
    }

    struct Result: Sendable {
        var outcome: TransferOutcome
        /// Set when a redirect was refused; `outcome` is then the redirect's response.
        var redirectFailure: TransferFailure?
    }

    /// Call on the engine's thread: each hop starts there at once, and `completion` runs there.
    /// `onStart` is told each hop's transfer id, for cancelling it.
    func fetch(
        _ original: consuming TransferRequest, sink: (any ResponseBodySink)?, onStart: @escaping (UInt64) -> Void = { _ in },
        completion: @escaping (Result) -> Void
    ) {
        var hops = 0
        // Only its scheme is asked for after a redirect.
        let originalURL = original.url
        func hop(_ request: consuming TransferRequest) {
            request.proxy = proxies.proxy(for: request.url)?.url
            request.onReplyProtocol = nil
            // A request forced to HTTP/1.1 (a rate limit, a segment on its own connection) says
            // nothing of what its origin would speak.
            if let onOriginProtocol, !request.heldToHTTP1, RequestBudget.multiplexes(url: request.url, rateLimited: false),
               let origin = OriginKey(url: request.url, proxy: request.proxy) {
                request.onReplyProtocol = { onOriginProtocol(origin, $0) }
                request.waitsForConnection = waitsForConnection?(origin) ?? true
            }
            // The engine hands the request back with its outcome: none is kept here meanwhile.
            let id = engine.start(request, sink: sink) { [rewrites] outcome, request in
                switch Self.next(after: outcome, of: request, originalURL: originalURL, hops: &hops, rewrites: rewrites) {
                case .done(let result): completion(result)
                case .follow(let next): hop(next)
                }
            }
            onStart(id)
        }
        hop(original)
    }

    private enum Step {
        case done(Result)
        case follow(TransferRequest)
    }

    /// What follows a hop's outcome: the result, or the request for the next location.
    private static func next(
        after outcome: TransferOutcome, of request: TransferRequest, originalURL: String, hops: inout Int, rewrites: RewriteRules
    ) -> Step {
        guard let head = outcome.head, head.isRedirect, outcome.succeeded, let target = outcome.redirectURL else {
            return .done(Result(outcome: outcome, redirectFailure: nil))
        }
        hops += 1
        if hops > maxRedirects {
            return .done(Result(outcome: outcome, redirectFailure: .redirectRefused("more than \(maxRedirects) redirects")))
        }
        // Parsed only when a redirect needs it: most requests have none.
        let scheme = URLComponents(string: originalURL)?.scheme?.lowercased() ?? ""
        switch RedirectRule.next(from: request.url, to: target, originalScheme: scheme) {
        case .refuse(let reason):
            return .done(Result(outcome: outcome, redirectFailure: .redirectRefused(reason)))
        case .follow(let url, let sameOrigin):
            if rewrites.forbids(url) {
                let reason = "to \(RemoteURL.redactingUserinfo(in: url)), which an `only: true` rewrite rule keeps the run away from"
                return .done(Result(outcome: outcome, redirectFailure: .redirectRefused(reason)))
            }
            var next = request
            next.url = url
            next.parsed = nil
            if !sameOrigin {
                next.headers = []
                next.login = nil
            }
            next.protocols = RedirectRule.protocols(forScheme: URLComponents(string: url)?.scheme ?? "")
            return .follow(next)
        }
    }
}

/// The redirect policy as a pure function, so it is tested as a table.
enum RedirectRule: Equatable {
    case follow(url: String, sameOrigin: Bool)
    case refuse(String)

    static func next(from current: String, to target: String, originalScheme: String) -> RedirectRule {
        guard let from = URLComponents(string: current), var to = URLComponents(string: target),
              let scheme = to.scheme?.lowercased()
        else { return .refuse("unusable Location") }
        let allowed: Set<String> = ["ftp", "ftps"].contains(originalScheme)
            ? ["http", "https", "ftp", "ftps"] : ["http", "https"]
        guard allowed.contains(scheme) else {
            return .refuse("to a \(scheme): URL; only \(allowed.sorted().joined(separator: ", ")) are followed")
        }
        guard let host = to.host, !host.isEmpty else { return .refuse("unusable Location") }
        // Byte for byte: Swift's == would take two hosts spelled with "é" and "e\u{301}" for
        // one, and hand the second the first one's headers.
        let sameOrigin = origin(of: from).utf8.elementsEqual(origin(of: to).utf8)
        if !sameOrigin {
            // Credentials written into the manifest's URL are for that host only.
            to.user = nil
            to.password = nil
        } else if to.percentEncodedUser == nil && to.percentEncodedPassword == nil {
            // The same server: the credentials it was given go along, as `curl -L` sends them.
            // A Location (or libcurl's resolution of a relative one) carries none of its own.
            to.percentEncodedUser = from.percentEncodedUser
            to.percentEncodedPassword = from.percentEncodedPassword
        }
        guard let url = to.string else { return .refuse("unusable Location") }
        return .follow(url: url, sameOrigin: sameOrigin)
    }

    static func protocols(forScheme scheme: String) -> String {
        switch scheme.lowercased() {
        case "ftp", "ftps": return "ftp,ftps"
        case "file": return "file"
        default: return "http,https"
        }
    }

    private static func origin(of url: URLComponents) -> String {
        let scheme = url.scheme?.lowercased() ?? ""
        let defaultPort = ["http": 80, "https": 443, "ftp": 21, "ftps": 990][scheme]
        let port = url.port ?? defaultPort ?? 0
        return "\(scheme)://\(url.host?.lowercased() ?? ""):\(port)"
    }
}
