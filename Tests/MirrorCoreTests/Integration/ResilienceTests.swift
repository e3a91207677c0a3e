import Foundation
import Synchronization
import Testing
@testable import MirrorCore

/// The network and servers misbehaving: outages, Retry-After, full disks.
@Suite(.serialized)
struct ResilienceTests {
    let directory: TemporaryDirectory

    init() throws {
        setenv("no_proxy", "*", 1)
        directory = try TemporaryDirectory(prefix: "mirror-resilience")
    }

    func runner(_ text: String, concurrency: Int = 2, events: (@Sendable (RunEvent) -> Void)? = nil) throws -> ManifestRunner {
        let manifest = try ManifestLoader.parse(text: text, path: "r.yaml", baseDirectory: directory.path, environment: [:])
        var options = RunOptions(concurrency: concurrency, retryPolicy: RetryPolicy(base: .milliseconds(5), cap: .milliseconds(20)), events: events)
        options.connectivityCheckInterval = .milliseconds(250)
        return ManifestRunner(manifest: manifest, options: options)
    }

    @Test func aServerThatDisappearsAndReturnsEightSecondsLaterDoesNotCostTheRetries() async throws {
        let data = randomData(count: 400_000, seed: 60)
        let first = try FaultServer.start()
        let port = first.port
        // The body stalls part-way; the server then goes away under it.
        first.route("/a.bin", method: "GET", reply: .file(data, etag: "\"e\"").stalled(afterBodyBytes: 150_000, for: .seconds(30)))
        first.route("/a.bin", method: "HEAD", reply: .file(data, etag: "\"e\""))
        let text = "version: 1\nroot: root\nconnectivity:\n  wait: 30s\nfiles:\n  - url: \(first.url("/a.bin"))\n    retries: 1\n"
        let waits = Mutex<[String]>([])
        let run = Task {
            try await runner(text, events: { event in
                if case .waitingForNetwork(let host, _) = event { waits.withLock { $0.append(host) } }
            }).sync()
        }
        // Mid-body, the server is gone: the connection drops and new ones are refused. (A full
        // test run can keep this run from starting for many seconds: the wait ends as soon as
        // the bytes are there, and the server holds the rest back for 30 s anyway.)
        let deadline = ContinuousClock.now + .seconds(60)
        while (directory.contents(of: "root/a.bin.part")?.count ?? 0) < 150_000 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        try #require((directory.contents(of: "root/a.bin.part")?.count ?? 0) >= 150_000, "the transfer never got going")
        first.stop()
        // While it is gone, the port stays refused: no other test's server may answer on it.
        try await Self.holdClosed(port, for: .seconds(8))
        let second = try FaultServer.start(port: port)
        defer { second.stop() }
        second.route("/a.bin", reply: .file(data, etag: "\"e\""))
        let reports = try await run.value

        #expect(reports[0].outcome == .transferred)
        #expect(directory.contents(of: "root/a.bin")?.fingerprint == data.fingerprint)
        #expect(waits.withLock { $0 } == ["127.0.0.1:\(port)"], "said once that it waits")
        let get = try #require(second.requests.first { $0.method == "GET" })
        #expect(get.headers["If-Range"] == "\"e\"", "resumed, not restarted")
    }

    /// Keeps `port` refusing connections for `duration`, then frees it.
    static func holdClosed(_ port: UInt16, for duration: Duration) async throws {
        let closed = try ClosedPort(port: port)
        try await Task.sleep(for: duration)
        withExtendedLifetime(closed) {}
    }

    @Test func aNetworkThatStaysAwayEndsTheRunAsUnreachable() async throws {
        let closed = try ClosedPort()
        defer { withExtendedLifetime(closed) {} }
        let port = closed.port
        let text = "version: 1\nroot: root\nconnectivity:\n  wait: 2s\nfiles:\n  - url: http://127.0.0.1:\(port)/a.bin\n    retries: 3\n  - url: http://127.0.0.1:\(port)/b.bin\n"
        let started = ContinuousClock.now
        let reports = try await runner(text).sync()

        for report in reports {
            #expect(report.outcome == .failed(.unreachable(host: "127.0.0.1:\(port)", waited: .seconds(2))))
        }
        #expect(reports[0].attempts == 1, "retries are not spent while the network is down")
        #expect(ContinuousClock.now - started >= .seconds(2))
        #expect(directory.files("root").isEmpty)
    }

    @Test func retryAfterPausesEveryTransferToTheHost() async throws {
        let server = try FaultServer.start()
        let data = randomData(count: 1_000, seed: 61)
        server.route("/a.bin", replies: [.status(503, headers: ["Retry-After": "2"]), .file(data)])
        server.route("/b.bin", reply: .file(data).delayed(by: .milliseconds(500)))
        server.route("/c.bin", reply: .file(data))
        let text = "version: 1\nroot: root\nfiles:\n" + ["a", "b", "c"].map { "  - url: \(server.url("/\($0).bin"))\n" }.joined()
        let reports = try await runner(text, concurrency: 2).sync()

        #expect(reports.allSatisfy { $0.outcome == .transferred })
        let first = try #require(server.requests(for: "/a.bin").first?.receivedAt)
        let retried = try #require(server.requests(for: "/a.bin").last?.receivedAt)
        let c = try #require(server.requests(for: "/c.bin").first?.receivedAt)
        #expect(retried - first >= .milliseconds(1_900), "the entry that was told waited")
        #expect(c - first >= .milliseconds(1_900), "an entry that started during the pause waited too")
    }

    /// A host's Retry-After pause is waited out without a transfer slot: with one slot, an
    /// entry for another host goes ahead while the paused host's entries wait.
    @Test func aPausedHostDoesNotHoldUpAnother() async throws {
        let paused = try FaultServer.start()
        let other = try FaultServer.start()
        let data = randomData(count: 1_000, seed: 62)
        paused.route("/a1.bin", replies: [.status(503, headers: ["Retry-After": "3"]), .file(data)])
        paused.route("/a2.bin", reply: .file(data))
        other.route("/b1.bin", reply: .file(data))
        let text = "version: 1\nroot: root\nfiles:\n"
            + "  - url: \(paused.url("/a1.bin"))\n  - url: \(paused.url("/a2.bin"))\n  - url: \(other.url("/b1.bin"))\n"
        let reports = try await runner(text, concurrency: 1).sync()

        #expect(reports.allSatisfy { $0.outcome == .transferred })
        let first = try #require(paused.requests(for: "/a1.bin").first?.receivedAt)
        let a2 = try #require(paused.requests(for: "/a2.bin").first?.receivedAt)
        let b1 = try #require(other.requests(for: "/b1.bin").first?.receivedAt)
        #expect(a2 - first >= .milliseconds(2_900), "the paused host's next entry waited")
        #expect(b1 - first < .milliseconds(1_500), "the other host's entry did not wait for the pause")
    }

    @Test(arguments: [("120", 120), ("0", 0), ("99999", 600), ("soon", -1)])
    func retryAfterSeconds(_ header: String, _ expected: Int) {
        let delay = RetryAfter.delay(header, now: 1_000_000, cap: .seconds(600))
        #expect(delay == (expected < 0 ? nil : .seconds(expected)))
    }

    @Test func retryAfterAsAnHTTPDate() {
        let now = HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT")!
        #expect(RetryAfter.delay("Sun, 06 Nov 1994 08:50:07 GMT", now: now, cap: .seconds(600)) == .seconds(30))
        #expect(RetryAfter.delay("Sun, 06 Nov 1994 08:00:00 GMT", now: now, cap: .seconds(600)) == .seconds(0))
    }

    @Test func theGateLetsAHealthyHostThroughAtOnce() async throws {
        let gate = ConnectivityGate(wait: .seconds(5), probe: nil, check: { _ in true })
        #expect(try await gate.afterFailure(talkingTo: HostKey(host: "h", port: 1)) == .reachable)
    }

    /// Two entries failing at once both check the host; the first check ends after the
    /// second one started the outage. There is still one outage, told once, and both wait on it.
    @Test func entriesFailingTogetherShareOneOutage() async throws {
        let outages = Mutex(0)
        let checks = Mutex(0)
        let gate = ConnectivityGate(
            wait: .milliseconds(300), probe: nil, interval: .milliseconds(50),
            check: { _ in
                let first = checks.withLock { count in
                    defer { count += 1 }
                    return count == 0
                }
                // The first entry's check answers only after the second one's has.
                if first { try? await Task.sleep(for: .milliseconds(100)) }
                return false
            },
            onOutage: { _, _ in outages.withLock { $0 += 1 } }
        )
        let host = HostKey(host: "h", port: 1)
        async let a: Void = { _ = try? await gate.afterFailure(talkingTo: host) }()
        try await Task.sleep(for: .milliseconds(10))
        async let b: Void = { _ = try? await gate.afterFailure(talkingTo: host) }()
        _ = await (a, b)
        #expect(outages.withLock { $0 } == 1)
    }

    @Test func aProbeHostStandsInForEveryEntry() async throws {
        let checked = Mutex<[HostKey]>([])
        let probe = HostKey(host: "probe.example", port: 443)
        let gate = ConnectivityGate(wait: .seconds(5), probe: probe, check: { host in
            checked.withLock { $0.append(host) }
            return true
        })
        _ = try await gate.afterFailure(talkingTo: HostKey(host: "a", port: 80))
        #expect(checked.withLock { $0 } == [probe])
    }
}
