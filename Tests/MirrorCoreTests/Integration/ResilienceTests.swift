import Foundation
import Synchronization
import Testing
@testable import MirrorCore

/// Servers misbehaving and the connectivity gate: Retry-After, outages shared by entries.
/// Real outages are in `OutageTests`, inside a network namespace.
@Suite(.serialized)
struct ResilienceTests {
    /// A run that checks an unreachable host four times a second.
    static func settings(concurrency: Int) -> SyncScenario.Settings {
        SyncScenario.Settings(concurrency: concurrency, connectivityCheckInterval: .milliseconds(250))
    }

    @Test func retryAfterPausesEveryTransferToTheHost() async throws {
        let scenario = try SyncScenario(.faultServer)
        let server = scenario.server
        let data = randomData(count: 1_000, seed: 61)
        server.route("/a.bin", replies: [.status(503, headers: ["Retry-After": "2"]), .file(data)])
        server.route("/b.bin", reply: .file(data).delayed(by: .milliseconds(500)))
        server.route("/c.bin", reply: .file(data))
        let manifest = ManifestText(entries: ["a", "b", "c"].map { .url(server.url("/\($0).bin")) })
        let reports = try await scenario.sync(manifest, Self.settings(concurrency: 2))

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
        let scenario = try SyncScenario(.faultServer)
        let paused = scenario.server
        let other = try FaultServer.start()
        let data = randomData(count: 1_000, seed: 62)
        // Two entries of the paused host share one script: whichever asks first is told to
        // wait 3 s, and that pause holds for both.
        paused.route("/a.bin", replies: [.status(503, headers: ["Retry-After": "3"]), .file(data)])
        other.route("/b1.bin", reply: .file(data))
        let manifest = ManifestText.files(
            .url(paused.url("/a.bin"), dest: "a1.bin"), .url(paused.url("/a.bin"), dest: "a2.bin"), .url(other.url("/b1.bin")))
        let reports = try await scenario.sync(manifest, Self.settings(concurrency: 1))

        #expect(reports.allSatisfy { $0.outcome == .transferred })
        let asked = paused.requests(for: "/a.bin").map(\.receivedAt)
        let b1 = try #require(other.requests(for: "/b1.bin").first?.receivedAt)
        #expect(asked.count == 3)
        #expect(asked.count == 3 && asked[1] - asked[0] >= .milliseconds(2_900), "the paused host's entries waited")
        // Ordered, not timed: on a loaded machine the test's threads may run late, but the other
        // host's entry still goes before the pause ends.
        #expect(asked.count == 3 && b1 < asked[1], "the other host's entry did not wait for the pause")
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

    static let target = ConnectivityTarget(endpoint: HostKey(host: "h", port: 1), role: .host)

    @Test func theGateLetsAHealthyHostThroughAtOnce() async throws {
        let gate = ConnectivityGate(wait: .seconds(5), check: { _ in .reachable })
        #expect(try await gate.afterFailure(talkingTo: Self.target) == .reachable)
    }

    /// A refused connection or an authoritative "no such host" proves the network works: no
    /// outage starts, and the entry's own failure stands.
    @Test func anAnswerThatIsNoIsNotAnOutage() async throws {
        let outages = Mutex(0)
        for answer in [Reachability.refused("connection refused"), .refused("no such host")] {
            let gate = ConnectivityGate(wait: .seconds(5), check: { _ in answer }, onOutage: { _, _ in outages.withLock { $0 += 1 } })
            #expect(try await gate.afterFailure(talkingTo: Self.target) == .reachable)
            #expect(!gate.hasTrouble(Self.target))
        }
        #expect(outages.withLock { $0 } == 0)
    }

    /// Two entries failing at once both check the host; the first check ends after the
    /// second one started the outage. There is still one outage, told once, and both wait on it.
    @Test func entriesFailingTogetherShareOneOutage() async throws {
        let outages = Mutex(0)
        let checks = Mutex(0)
        let gate = ConnectivityGate(
            wait: .milliseconds(300), interval: .milliseconds(50),
            check: { _ in
                let first = checks.withLock { count in
                    defer { count += 1 }
                    return count == 0
                }
                // The first entry's check answers only after the second one's has.
                if first { try? await Task.sleep(for: .milliseconds(100)) }
                return .noAnswer("timed out")
            },
            onOutage: { _, _ in outages.withLock { $0 += 1 } }
        )
        async let a: Void = { _ = try? await gate.afterFailure(talkingTo: Self.target) }()
        try await Task.sleep(for: .milliseconds(10))
        async let b: Void = { _ = try? await gate.afterFailure(talkingTo: Self.target) }()
        _ = await (a, b)
        #expect(outages.withLock { $0 } == 1)
    }
}
