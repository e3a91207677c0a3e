import Foundation
import Testing
@testable import MirrorCore

/// Requests on one engine end as their own, whatever ended before them: libcurl 7.88 keeps
/// state in an easy handle across `curl_easy_reset` (the last OS error), so a handle reset for
/// another request after one that could not connect would report that request's error as its
/// own (`EasyHandleKeeper.reusable`).
struct EngineRequestSequenceTests {
    @Test func requestsAfterOnesThatFailedBeforeConnectingEndAsTheirOwn() async throws {
        let body = randomData(count: 20_000, seed: 41)
        let scenario = try SyncScenario(.nginx(site: ["a.bin": body]))
        let closed = try ClosedPort()
        defer { withExtendedLifetime(closed) {} }
        let engine = TransferEngine()
        let good = TransferRequest(url: scenario.url("/a.bin"), method: .get)
        let refused = TransferRequest(url: "http://127.0.0.1:\(closed.port)/a.bin", method: .get)
        for round in 0..<5 {
            // Two that end well in a row, then one refused.
            for order in 0..<2 {
                let outcome = await Self.fetch(good, on: engine)
                #expect(outcome.succeeded && outcome.head?.status == 200, "round \(round), \(order): \(outcome)")
                #expect(outcome.osErrno == 0, "round \(round), \(order): no error of an earlier request: \(outcome)")
            }
            let outcome = await Self.fetch(refused, on: engine)
            #expect(outcome.curlCode == 7, "couldn't connect, round \(round): \(outcome)")
            #expect(outcome.osErrno == ECONNREFUSED, "round \(round): \(outcome)")
        }
        let requests = try scenario.nginxRequests()
        #expect(requests.count == 10 && requests.allSatisfy { $0.status == 200 }, "\(requests)")
    }

    /// Many requests that could not connect at once, a batch the keeper takes in one wake:
    /// their handles are cleaned up (each once) rather than reset, and the requests after
    /// them, on reset or new handles, report no error of theirs.
    @Test func handlesLeftWithAnOSErrorAreCleanedUpAndNotReused() async throws {
        let scenario = try SyncScenario(.nginx(site: ["a.bin": randomData(count: 2_000, seed: 42)]))
        let closed = try ClosedPort()
        defer { withExtendedLifetime(closed) {} }
        let engine = TransferEngine()
        let good = TransferRequest(url: scenario.url("/a.bin"), method: .get)
        let refused = TransferRequest(url: "http://127.0.0.1:\(closed.port)/a.bin", method: .get)
        for round in 0..<3 {
            let failed = await Self.fetchAll(Array(repeating: refused, count: 3 * EasyHandleKeeper.retiredBatch), on: engine)
            #expect(failed.allSatisfy { $0.curlCode == 7 && $0.osErrno == ECONNREFUSED }, "round \(round): \(failed)")
            let fetched = await Self.fetchAll(Array(repeating: good, count: 3 * EasyHandleKeeper.retiredBatch), on: engine)
            #expect(fetched.allSatisfy { $0.succeeded && $0.head?.status == 200 && $0.osErrno == 0 }, "round \(round): \(fetched)")
        }
    }

    /// Batches of requests over HTTPS to an HTTP/2 nginx, streams of one connection, one batch
    /// after another through one engine: every request is answered. A handle whose request was
    /// a stream of a connection still in use keeps libcurl's receive buffer across a reset, and
    /// set on it again `CURLOPT_BUFFERSIZE` is refused, so such handles are not reset for
    /// another request (`EasyHandleKeeper.reusable`).
    @Test func requestsAfterStreamsOfASharedConnectionEndAsTheirOwn() async throws {
        let ca = try PrivateCA()
        let site = Dictionary(uniqueKeysWithValues: (0..<8).map { ("f\($0).bin", randomData(count: 3_000, seed: 43 + UInt64($0))) })
        let scenario = try SyncScenario(.nginx(site: site, options: NginxOptions(tls: ca.serverTLS, http2: true)))
        let engine = TransferEngine()
        var request = TransferRequest(url: scenario.url("/f0.bin"), method: .get)
        request.certificateAuthorities = CertificateAuthorities(file: ca.caCertificate)
        let batch = 3 * EasyHandleKeeper.retiredBatch
        for round in 0..<4 {
            let requests = (0..<batch).map { index -> TransferRequest in
                var each = request
                each.url = scenario.url("/f\(index % 8).bin")
                return each
            }
            let outcomes = await Self.fetchAll(requests, on: engine)
            let failed = outcomes.filter { !($0.succeeded && $0.head?.status == 200) }
            #expect(failed.count == 0, "round \(round): \(failed.count) of \(batch) failed: \(failed.prefix(3))")
        }
        let served = try scenario.nginxRequests()
        #expect(served.count == 4 * batch && served.allSatisfy { $0.protocol == "HTTP/2.0" }, "\(served.count) requests")
    }

    /// A request hands libcurl the URL parsed ahead (`ParsedURL`, `CURLOPT_CURLU`) only when it
    /// is that request's URL: one whose URL changed since (a redirect's next hop) goes where its
    /// URL says, as does one that came with none. libcurl takes the host, port and path from
    /// the parsed URL, so a parse of another URL would send the request there.
    @Test func requestsGoWhereTheirURLSaysWhateverWasParsedAhead() async throws {
        let a = randomData(count: 3_000, seed: 44)
        let b = randomData(count: 4_000, seed: 45)
        let scenario = try SyncScenario(.nginx(site: ["a.bin": a, "b.bin": b]))
        let engine = TransferEngine()
        let parsedA = try #require(ParsedURL(scenario.url("/a.bin")))
        var own = TransferRequest(url: scenario.url("/a.bin"), method: .get)
        own.parsed = parsedA
        var moved = TransferRequest(url: scenario.url("/b.bin"), method: .get)
        moved.parsed = parsedA
        let plain = TransferRequest(url: scenario.url("/b.bin?x=1"), method: .get)
        for (request, expected) in [(own, a), (moved, b), (plain, b)] {
            let sink = CollectingSink()
            let outcome = await Self.fetch(request, sink: sink, on: engine)
            #expect(outcome.succeeded && outcome.head?.status == 200, "\(request.url): \(outcome)")
            #expect(sink.bytes == expected, "\(request.url): \(sink.bytes.count) bytes")
        }
        let served = try scenario.nginxRequests().map(\.uri)
        #expect(served == ["/a.bin", "/b.bin", "/b.bin?x=1"], "\(served)")
        #expect(ParsedURL("http://[::1") == nil, "libcurl refuses it: the request lets libcurl say so")
    }

    /// Through a proxy, an https request's CONNECT names mirror as its User-Agent, with or
    /// without a User-Agent of the manifest's (which goes to the server only): libcurl sends
    /// the request's own header lines to the server, not to the proxy. The fault server plays
    /// the proxy here, records the CONNECT, and refuses it.
    @Test func aProxysConnectNamesMirror() async throws {
        let proxy = try FaultServer.start()
        let engine = TransferEngine()
        var plain = TransferRequest(url: "https://origin.mirror.test:8443/a.bin", method: .get)
        plain.proxy = "http://127.0.0.1:\(proxy.port)"
        var named = plain
        named.headers = [HTTPHeader(name: "User-Agent", value: "fetcher/2")]
        for request in [plain, named] {
            let outcome = await Self.fetch(request, on: engine)
            #expect(!outcome.succeeded, "the proxy refuses the tunnel: \(outcome)")
        }
        let connects = proxy.requests.filter { $0.method == "CONNECT" }
        #expect(connects.count == 2, "\(proxy.requests)")
        for connect in connects {
            #expect(connect.headers.values("User-Agent") == ["mirror/\(MirrorVersion.string)"], "\(connect)")
        }
    }

    /// Sends `requests` at once on the engine's thread and waits for all their outcomes.
    private static func fetchAll(_ requests: [TransferRequest], on engine: TransferEngine) async -> [TransferOutcome] {
        await withTaskGroup(of: TransferOutcome.self) { group in
            for request in requests { group.addTask { await fetch(request, on: engine) } }
            var outcomes: [TransferOutcome] = []
            for await outcome in group { outcomes.append(outcome) }
            return outcomes
        }
    }

    /// Sends `request` on the engine's thread and waits for its outcome.
    private static func fetch(_ request: TransferRequest, sink: (any ResponseBodySink)? = nil, on engine: TransferEngine) async -> TransferOutcome {
        await withCheckedContinuation { continuation in
            engine.post {
                engine.start(request, sink: sink) { continuation.resume(returning: $0) }
            }
        }
    }
}

/// Keeps a reply's body, on the engine's thread; read once the request ended.
private final class CollectingSink: ResponseBodySink, @unchecked Sendable {
    private(set) var bytes = Data()

    func begin(_ head: ResponseHead) -> BodyDisposition { .write }

    func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
        self.bytes.append(contentsOf: bytes)
        return true
    }
}
