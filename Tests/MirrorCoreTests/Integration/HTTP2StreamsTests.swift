import Foundation
import Testing
@testable import MirrorCore

/// `concurrency` counts connections and large transfers: to an HTTP/2 server, probes and small
/// files ride on one connection as streams, far more than `concurrency` at once, while over
/// HTTP/1.1 and under a rate limit nothing changes. nginx on loopback behind the link emulator
/// (`LinkProxy`, 20 ms each way), so that requests in flight together reach nginx together.
struct HTTP2StreamsTests {
    static let delay = Duration.milliseconds(20)

    /// The most requests nginx read within `window` seconds of each other. A request sent after
    /// another's reply reaches nginx at least one round trip (40 ms) after that one: requests that
    /// arrive closer together than that were in flight at once.
    static func mostArrivingWithin(_ window: Double, _ requests: [LoggedRequest]) -> Int {
        let starts = requests.map(\.startedAt).sorted()
        var most = 0
        var low = 0
        for high in starts.indices {
            while starts[high] - starts[low] >= window { low += 1 }
            most = max(most, high - low + 1)
        }
        return most
    }

    /// The most requests the client had in flight at once, as nginx's log proves it: a request
    /// nginx began reading at `startedAt` left the client at least `oneWay` earlier, and its
    /// reply, finished at `endedAt`, reached the client at least `oneWay` later. Each request
    /// was therefore in flight for at least [startedAt - oneWay, endedAt + oneWay], and the
    /// most of these spans that overlap is a lower bound on what the client really had in
    /// flight. A loaded machine only makes the real spans longer, so a bound on it does not
    /// flake the way a count of arrivals within a fixed window does.
    static func mostInFlight(_ requests: [LoggedRequest], oneWay: Duration = delay) -> Int {
        LoggedRequest.mostOverlapping(requests, widenedBy: Double(oneWay.components.seconds) + Double(oneWay.components.attoseconds) / 1e18)
    }

    private static func smallSite(_ count: Int, seed: UInt64) -> [String: Data] {
        var site: [String: Data] = [:]
        for index in 0..<count { site[String(format: "f%03d.bin", index)] = randomData(count: 2_000, seed: seed + UInt64(index)) }
        return site
    }

    /// An HTTPS nginx with HTTP/2 serving small files behind the link emulator, and a manifest
    /// of them that trusts its private CA (kept here, with its files, as long as this is).
    private struct OverHTTP2 {
        let ca: PrivateCA
        let site: [String: Data]
        let scenario: SyncScenario
        /// To be stopped by the test.
        let link: LinkProxy
        let manifest: ManifestText
    }

    /// `count` small files (`smallSite`) over HTTP/2 through a link of `oneWay` each way, listed
    /// with `concurrency`.
    private static func overHTTP2(_ count: Int, seed: UInt64, concurrency: Int, oneWay: Duration = delay) async throws -> OverHTTP2 {
        let ca = try PrivateCA()
        let site = smallSite(count, seed: seed)
        let scenario = try SyncScenario(.nginx(site: site, options: NginxOptions(tls: ca.serverTLS, http2: true)))
        let link = try await LinkProxy.start(upstreamPort: scenario.nginx.port, delay: oneWay)
        let manifest = ManifestText(top: ["concurrency: \(concurrency)", "defaults:", "  ca_file: \(ca.caCertificate)"],
                                    entries: site.keys.sorted().map { .url(link.url("/" + $0)) })
        return OverHTTP2(ca: ca, site: site, scenario: scenario, link: link, manifest: manifest)
    }

    private static func describe(_ requests: [LoggedRequest]) -> String {
        "\(requests.count) requests on connections \(Set(requests.map(\.connection)).sorted()), "
            + "at most \(mostArrivingWithin(0.03, requests)) arriving within 30 ms, at least \(mostInFlight(requests)) in flight at once: "
            + requests.prefix(12).map { "\($0.method) \($0.uri) \($0.protocol) @\($0.startedAt)" }.joined(separator: "; ")
    }

    /// `concurrency: 2` over HTTPS to nginx with HTTP/2: a first sync of 200 new small files, a
    /// no-op re-check of them, and a plan each have far more than 2 requests in flight at once,
    /// on at most 2 connections (100 streams on each: `RequestBudget.streamBudget`).
    @Test func overHTTP2ManyMoreThanConcurrencyRideOnItsConnections() async throws {
        let served = try await Self.overHTTP2(200, seed: 9_000, concurrency: 2)
        defer { served.link.stop() }
        let (site, scenario, manifest) = (served.site, served.scenario, served.manifest)

        let first = try await scenario.sync(manifest)
        #expect(first.allSatisfy { $0.outcome == .transferred }, "\(first.map(\.outcome))")
        for (name, data) in site { #expect(scenario.local(name)?.fingerprint == data.fingerprint, "\(name)") }
        let downloads = try scenario.nginxRequests()
        #expect(downloads.allSatisfy { $0.protocol == "HTTP/2.0" }, "\(Self.describe(downloads))")
        #expect(Set(downloads.map(\.connection)).count <= 2, "within concurrency: \(Self.describe(downloads))")
        #expect(Self.mostInFlight(downloads) >= 20, "new small files: \(Self.describe(downloads))")

        let again = try await scenario.sync(manifest)
        #expect(again.allSatisfy { $0.outcome == .skipped }, "\(again.map(\.outcome))")
        let recheck = Array(try scenario.nginxRequests().dropFirst(downloads.count))
        #expect(recheck.count == 200, "one request per entry: \(Self.describe(recheck))")
        #expect(Set(recheck.map(\.connection)).count <= 2, "within concurrency: \(Self.describe(recheck))")
        #expect(Self.mostInFlight(recheck) >= 50, "re-check: \(Self.describe(recheck))")

        let plan = await scenario.runner(try scenario.load(manifest)).plan()
        #expect(plan.allSatisfy { $0.action == .skip }, "\(plan.map(\.action))")
        let planned = Array(try scenario.nginxRequests().dropFirst(downloads.count + recheck.count))
        #expect(planned.count == 200 && planned.allSatisfy { $0.method == "HEAD" }, "\(Self.describe(planned))")
        #expect(Set(planned.map(\.connection)).count <= 2, "within concurrency: \(Self.describe(planned))")
        #expect(Self.mostInFlight(planned) >= 20, "plan: \(Self.describe(planned))")
    }

    /// Until an HTTPS origin has answered, its first `RequestBudget.streamConnections` requests
    /// each open a connection and the others wait for those: when it turns out to speak HTTP/2,
    /// the hundreds of streams it is then granted find that many connections ready, rather than
    /// filling one and waiting a handshake (two round trips) for each further one. With
    /// `concurrency: 8`, the whole run of 300 comes on exactly 4 connections; streams alone
    /// would need 3 (nginx grants 128 on each). Which connection carries the first requests is
    /// the handshakes' race: libcurl puts a stream on the first connection with room, so a
    /// connection whose opening request went on another one's stream may carry none for a
    /// while (its first request came 180 to 390 ms after the others in 6 of 11 runs).
    @Test func anHTTPSOriginsFirstRequestsOpenItsConnectionsTogether() async throws {
        let served = try await Self.overHTTP2(300, seed: 9_200, concurrency: 8)
        defer { served.link.stop() }
        let (scenario, manifest) = (served.scenario, served.manifest)

        let reports = try await scenario.sync(manifest)
        #expect(reports.allSatisfy { $0.outcome == .transferred }, "\(reports.map(\.outcome))")
        let requests = try scenario.nginxRequests()
        #expect(requests.count == 300 && requests.allSatisfy { $0.protocol == "HTTP/2.0" }, "\(Self.describe(requests))")
        #expect(Set(requests.map(\.connection)).count == RequestBudget.streamConnections, "\(Self.describe(requests))")
    }

    /// An origin's protocol is learned from the TLS handshake (ALPN) of its first connection, a
    /// round trip before its first reply would tell: the re-check's stream permits are granted
    /// then, and nginx sees far more than the first 8 requests (the `concurrency` that takes
    /// connection permits while nothing is known) before any reply could have reached the
    /// client. A link of 150 ms each way: a request sent after a reply arrives at least 300 ms
    /// after the first one, and building the 52 others takes far less even in a debug build on
    /// a loaded machine.
    @Test func anOriginsProtocolIsLearnedFromItsHandshake() async throws {
        let served = try await Self.overHTTP2(60, seed: 9_300, concurrency: 8, oneWay: .milliseconds(150))
        defer { served.link.stop() }
        let (scenario, manifest) = (served.scenario, served.manifest)
        let first = try await scenario.sync(manifest)
        #expect(first.allSatisfy { $0.outcome == .transferred }, "\(first.map(\.outcome))")
        let downloads = try scenario.nginxRequests()

        let again = try await scenario.sync(manifest)
        #expect(again.allSatisfy { $0.outcome == .skipped }, "\(again.map(\.outcome))")
        let recheck = Array(try scenario.nginxRequests().dropFirst(downloads.count))
        #expect(recheck.count == 60, "\(Self.describe(recheck))")
        let start = try #require(recheck.map(\.startedAt).min())
        let beforeAnyReply = recheck.filter { $0.startedAt < start + 0.29 }
        #expect(beforeAnyReply.count > 8, "\(beforeAnyReply.count) before a reply could have come back: \(Self.describe(recheck))")
    }

    /// Over HTTP/1.1 (plain http) and under a rate limit (forced to HTTP/1.1 even where HTTP/2
    /// is offered), `concurrency: 2` is still 2 requests in flight at most, on at most 2
    /// connections at a time.
    @Test(arguments: [false, true])
    func overHTTP1OrUnderARateLimitConcurrencyBoundsRequests(rateLimited: Bool) async throws {
        let ca = try PrivateCA()
        let site = Self.smallSite(40, seed: 9_400)
        let options = rateLimited ? NginxOptions(tls: ca.serverTLS, http2: true) : NginxOptions()
        let scenario = try SyncScenario(.nginx(site: site, options: options))
        let link = try await LinkProxy.start(upstreamPort: scenario.nginx.port, delay: Self.delay)
        defer { link.stop() }
        let top = ["concurrency: 2", "defaults:", "  ca_file: \(ca.caCertificate)"] + (rateLimited ? ["rate_limit: 100MiB"] : [])
        let manifest = ManifestText(top: top, entries: site.keys.sorted().map { .url(link.url("/" + $0, scheme: rateLimited ? "https" : "http")) })

        let first = try await scenario.sync(manifest)
        #expect(first.allSatisfy { $0.outcome == .transferred }, "\(first.map(\.outcome))")
        let again = try await scenario.sync(manifest)
        #expect(again.allSatisfy { $0.outcome == .skipped }, "\(again.map(\.outcome))")
        let requests = try scenario.nginxRequests()
        #expect(requests.count == 80, "\(Self.describe(requests))")
        #expect(Self.mostArrivingWithin(0.03, requests) <= 2, "\(Self.describe(requests))")
        #expect(Self.mostArrivingWithin(0.03, requests) == 2, "both permits in use: \(Self.describe(requests))")
        if rateLimited {
            #expect(requests.filter { $0.method == "GET" }.allSatisfy { $0.protocol == "HTTP/1.1" }, "\(Self.describe(requests))")
        }
    }

    /// A new file whose size nothing said goes out on a stream; when its reply shows a large
    /// body and no connection permit is free, it is stopped before its first byte and sent again
    /// once it holds one. With `concurrency: 1`, three 1.25 MiB files (nginx sends each at
    /// 1 MiB/s after the first MiB) listed before 30 small ones: the small ones all ride on the
    /// connection meanwhile, no two large bodies are sent at once, and no entry needs a second
    /// attempt.
    @Test func aStreamThatTurnsOutLargeWaitsForAConnectionPermit() async throws {
        let ca = try PrivateCA()
        var site = Self.smallSite(30, seed: 9_600)
        let large = 1_310_720
        for index in 0..<3 { site["large\(index).bin"] = randomData(count: large, seed: 9_700 + UInt64(index)) }
        let options = NginxOptions(rateLimit: 1024 * 1024, tls: ca.serverTLS, http2: true, sendBuffer: 32 * 1024)
        let scenario = try SyncScenario(.nginx(site: site, options: options))
        let link = try await LinkProxy.start(upstreamPort: scenario.nginx.port, delay: Self.delay)
        defer { link.stop() }
        let names = site.keys.filter { $0.hasPrefix("large") }.sorted() + site.keys.filter { !$0.hasPrefix("large") }.sorted()
        let manifest = ManifestText(top: ["concurrency: 1", "defaults:", "  ca_file: \(ca.caCertificate)"],
                                    entries: names.map { .url(link.url("/" + $0)) })
        let retries = Shared([String]())
        var settings = SyncScenario.Settings()
        settings.events = { event in
            if case .retrying(let dest, _, let failure, let attempt, _) = event {
                retries.withLock { $0.append("\(dest) attempt \(attempt): \(failure)") }
            }
        }
        let reports = try await scenario.sync(manifest, settings)
        #expect(reports.allSatisfy { $0.outcome == .transferred }, "\(reports.map(\.outcome))")
        for (name, data) in site { #expect(scenario.local(name)?.fingerprint == data.fingerprint, "\(name)") }

        let requests = try scenario.nginxRequests()
        let completeLarge = requests.filter { $0.uri.hasPrefix("/large") && $0.bodyBytesSent == large }
        #expect(completeLarge.count == 3, "\(requests)")
        #expect(HostSettingsTests.mostAtOnce(completeLarge) == 1,
                "one large body at a time: \(completeLarge.map { "\($0.uri) \($0.startedAt)-\($0.endedAt)" })")
        let small = requests.filter { !$0.uri.hasPrefix("/large") }
        let everything = requests.map { "\($0.method) \($0.uri) \($0.status) \($0.bodyBytesSent)B conn \($0.connection) \($0.startedAt)-\($0.endedAt)" }
            .joined(separator: "\n") + "\n--- retries ---\n" + retries.withLock { $0 }.joined(separator: "\n")
            + "\n--- attempts ---\n" + reports.filter { $0.attempts != 1 }.map { "\($0.dest): \($0.attempts)" }.joined(separator: ", ")
            + "\n--- nginx error log ---\n" + scenario.nginx.errorLog
        #expect(Self.mostInFlight(small) >= 10, "the small files ride on streams meanwhile: \(Self.describe(small))")
        // A stopped GET is sent again within its attempt: no entry took a second one.
        #expect(retries.withLock { $0 }.isEmpty && reports.allSatisfy { $0.attempts == 1 }, "\(everything)")
        // `concurrency: 1` is one connection at a time. libcurl may replace a connection that
        // went away, and send a request that had no answer yet again on the new one by itself;
        // it never holds two at once, and never sends a request twice on one connection.
        let spans = Dictionary(grouping: requests, by: \.connection).values
            .map { list in (first: list.map(\.startedAt).min() ?? 0, last: list.map(\.endedAt).max() ?? 0) }
            .sorted { $0.first < $1.first }
        for (earlier, later) in zip(spans, spans.dropFirst()) {
            #expect(later.first >= earlier.last, "two connections at once: \(everything)")
        }
        for (uri, sent) in Dictionary(grouping: small, by: \.uri) {
            #expect(Set(sent.map(\.connection)).count == sent.count, "\(uri) sent twice on one connection: \(everything)")
        }
        #expect(Set(small.map(\.uri)).count == 30, "\(everything)")
    }

    /// A host's `concurrency` holds its connections and large transfers, not the streams on its
    /// HTTP/2 connection: a plan of 100 entries of a host limited to 1 still has 20 or more
    /// requests in flight at once.
    @Test func aHostsConcurrencyDoesNotHoldBackItsStreams() async throws {
        let ca = try PrivateCA()
        let site = Self.smallSite(100, seed: 9_800)
        let scenario = try SyncScenario(.nginx(site: site, options: NginxOptions(tls: ca.serverTLS, http2: true)))
        let link = try await LinkProxy.start(upstreamPort: scenario.nginx.port, delay: Self.delay)
        defer { link.stop() }
        let manifest = ManifestText(top: [
            "concurrency: 4", "defaults:", "  ca_file: \(ca.caCertificate)", "hosts:", "  127.0.0.1:\(link.port):", "    concurrency: 1",
        ], entries: site.keys.sorted().map { .url(link.url("/" + $0)) })
        let plan = await scenario.runner(try scenario.load(manifest)).plan()
        #expect(plan.allSatisfy { $0.action == .download }, "\(plan.map(\.action))")
        let requests = try scenario.nginxRequests()
        #expect(requests.count == 100 && requests.allSatisfy { $0.method == "HEAD" }, "\(Self.describe(requests))")
        #expect(Set(requests.map(\.connection)).count == 1, "\(Self.describe(requests))")
        #expect(Self.mostInFlight(requests) >= 20, "\(Self.describe(requests))")
    }

    /// A Retry-After pause holds every request to the host, those that would ride on streams
    /// too: 40 entries that nginx answers 503 with `Retry-After: 1`, over HTTP/2. The first
    /// replies come back together; after them no request reaches nginx until the pause is over,
    /// and then each entry tries once more.
    @Test func aRetryAfterPauseHoldsStreamsToo() async throws {
        let ca = try PrivateCA()
        let site = Self.smallSite(40, seed: 9_900)
        let options = NginxOptions(extraServerConfiguration: """
                location /busy/ {
                    add_header Retry-After 1 always;
                    return 503;
                }
            """, tls: ca.serverTLS, http2: true)
        let scenario = try SyncScenario(.nginx(site: site, options: options))
        let link = try await LinkProxy.start(upstreamPort: scenario.nginx.port, delay: Self.delay)
        defer { link.stop() }
        let manifest = ManifestText(top: ["concurrency: 2", "defaults:", "  ca_file: \(ca.caCertificate)", "  retries: 1"],
                                    entries: site.keys.sorted().map { .url(link.url("/busy/" + $0), dest: $0) })
        let reports = try await scenario.sync(manifest)
        #expect(reports.allSatisfy { $0.failed }, "\(reports.map(\.outcome))")
        let requests = try scenario.nginxRequests().sorted { $0.startedAt < $1.startedAt }
        #expect(requests.count == 80, "two attempts each: \(Self.describe(requests))")
        let first = try #require(requests.first?.startedAt)
        // The first wave: requests sent before the first 503 came back (one round trip, and the
        // time to open the connection and learn that it multiplexes). The rest wait out the pause.
        let early = requests.filter { $0.startedAt < first + 0.5 }
        let late = requests.filter { $0.startedAt >= first + 0.5 }
        #expect(late.allSatisfy { $0.startedAt >= first + 0.95 }, "nothing during the pause: \(late.map { $0.startedAt - first })")
        #expect(early.count + late.count == 80)
        #expect(Self.mostInFlight(late) >= 20, "after the pause, the retries ride on streams: \(Self.describe(late))")
    }

    /// An entry whose GET waits on its stream permit for a connection permit (a `size` pin says
    /// its body is large) stops when the run is interrupted: it reports the interruption, sends
    /// nothing and leaves no partial file. With `concurrency: 1`, a slow 4 MiB download holds the
    /// one connection permit while four pinned 2 MiB entries wait. At 64 KiB/s it would take
    /// 64 s: a loaded machine that takes long to wind the run down (11.6 s was seen at 256 KiB/s,
    /// and once more than the 16 s that download took then, which let the first waiting entry
    /// have its turn) still stops it before it ends.
    @Test func anInterruptionStopsAGETWaitingForAConnectionPermit() async throws {
        let ca = try PrivateCA()
        let pinned = 2 * 1024 * 1024
        var site = ["big.bin": randomData(count: 4 * 1024 * 1024, seed: 9_950)]
        for index in 0..<4 { site["w\(index).bin"] = randomData(count: pinned, seed: 9_960 + UInt64(index)) }
        let options = NginxOptions(rateLimit: 64 * 1024, tls: ca.serverTLS, http2: true, sendBuffer: 32 * 1024)
        let scenario = try SyncScenario(.nginx(site: site, options: options))
        let link = try await LinkProxy.start(upstreamPort: scenario.nginx.port, delay: Self.delay)
        defer { link.stop() }
        let manifest = try scenario.load(ManifestText(top: ["concurrency: 1", "defaults:", "  ca_file: \(ca.caCertificate)"],
                                                      entries: [.url(link.url("/big.bin"))]
                                                          + (0..<4).map { .url(link.url("/w\($0).bin"), "size: \(pinned)") }))
        let started = Shared(Set<String>())
        var settings = SyncScenario.Settings()
        settings.events = { event in
            if case .started(let dest, _) = event { started.withLock { _ = $0.insert(dest) } }
        }
        let runner = scenario.runner(manifest, settings)
        let work = Task { try await runner.sync() }
        // Wait (bounded) until every pinned entry has its stream permit and asks for a connection.
        for _ in 0..<2400 where started.withLock({ $0.count }) < 5 {
            try await Task.sleep(for: .milliseconds(25))
        }
        #expect(started.withLock { $0.count } == 5, "every entry began an attempt: \(started.withLock { $0 })")
        try await Task.sleep(for: .milliseconds(300))
        let cancelled = ContinuousClock.now
        work.cancel()
        let reports = try await work.value
        // Waited out, big.bin would take 64 s, and the four 2 MiB entries their turns after it,
        // 32 s each. The bound leaves room for a loaded machine (a full parallel test run took
        // 11.6 s to wind the run down).
        #expect(ContinuousClock.now - cancelled < .seconds(30), "the waits were stopped, not waited out")
        #expect(reports.map(\.outcome) == Array(repeating: .failed(.cancelled), count: 5), "\(reports.map(\.outcome))")
        #expect(scenario.files().allSatisfy { !$0.hasPrefix("w") }, "no partial file of a waiting entry: \(scenario.files())")
        let requests = try scenario.nginxRequests()
        #expect(requests.allSatisfy { !$0.uri.hasPrefix("/w") }, "the waiting GETs were never sent: \(requests)")
    }
    /// A new file's GET on a stream, stopped at its reply's head because its body is large and
    /// the one connection permit is taken, waiting for that permit. It made no partial file: a
    /// new file's is made at its reply's head (its body may be short enough to be held in
    /// memory), and this head went no further than the permit's guard. `grantedFirst`: the
    /// permit is given back and the run interrupted in one turn of the engine's loop, the
    /// grant first, so the entry sends its GET again and is stopped before the turn ends;
    /// otherwise the run is interrupted while it waits. Either way the entry reports the
    /// interruption and leaves no file behind, not even one made after the entry ended.
    @Test(arguments: [false, true])
    func anInterruptedNewFileThatWaitedForAConnectionLeavesNoPartialFile(grantedFirst: Bool) async throws {
        let ca = try PrivateCA()
        let size = 2 * 1024 * 1024
        let site = ["new.bin": randomData(count: size, seed: 9_990)]
        let scenario = try SyncScenario(.nginx(site: site, options: NginxOptions(tls: ca.serverTLS, http2: true)))
        let link = try await LinkProxy.start(upstreamPort: scenario.nginx.port, delay: Self.delay)
        defer { link.stop() }
        let url = link.url("/new.bin")
        let manifest = try scenario.load(ManifestText(top: ["concurrency: 1", "defaults:", "  ca_file: \(ca.caCertificate)"],
                                                      entries: [.url(url)]))
        let runner = scenario.runner(manifest)
        // The origin is known to speak HTTP/2 (its GET goes on a stream, its size unknown), and
        // the test holds the one connection permit.
        runner.slots.learn(try #require(OriginKey(url: url, proxy: nil)), speaks: .http2)
        let held = try #require(await runner.slots.acquire())
        let work = Task { try await runner.sync() }
        for _ in 0..<800 where runner.slots.waiting == 0 {
            try await Task.sleep(for: .milliseconds(25))
        }
        #expect(runner.slots.waiting == 1, "the entry's GET was stopped and waits for a connection permit")
        #expect(scenario.files() == [], "the stopped GET made no partial file")
        if grantedFirst {
            runner.fetcher.engine.post {
                held.release()
                work.cancel()
            }
        } else {
            work.cancel()
        }
        let reports = try await work.value
        if !grantedFirst { held.release() }
        #expect(reports.map(\.outcome) == [.failed(.cancelled)], "\(reports.map(\.outcome))")
        // The run ended in the middle of a turn of the engine's loop (the runner, which keeps
        // it, keeps the loop going too): a partial file that turn's deferred work made would
        // appear only once the turn is over. Waited for: a later turn's deferred work.
        let engine = runner.fetcher.engine
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            engine.post { engine.afterSends { continuation.resume() } }
        }
        #expect(scenario.files() == [], "\(scenario.files())")
        let requests = try scenario.nginxRequests()
        #expect(requests.count <= 2 && requests.allSatisfy { $0.uri == "/new.bin" }, "\(requests)")
    }
}
