import Foundation
import Testing
@testable import MirrorCore

/// `hosts:` against two real nginx servers, observed at the servers: how many requests each had
/// under way at once, and which headers arrived.
struct HostSettingsTests {
    /// The most requests nginx had under way at one moment, from when it read each one to when
    /// it logged it (its last byte handed to the socket, which is no later than mirror read it).
    static func mostAtOnce(_ requests: [LoggedRequest]) -> Int {
        LoggedRequest.mostOverlapping(requests, widenedBy: 0)
    }

    /// `concurrency: 2` on one host holds its requests (HEAD probes and GETs) to 2 at once at
    /// that server, while the run's `concurrency: 8` goes on for the other host, whose entries,
    /// listed after the limited host's, start before those are done.
    @Test func aHostsConcurrencyBoundsItsRequestsAtTheServer() async throws {
        // nginx sends the first second's worth of a response at once, then 512 KiB/s: each
        // 1 MiB file takes about a second.
        let slow = NginxOptions(rateLimit: 512 * 1024)
        var limitedSite: [String: Data] = [:]
        for index in 0..<8 { limitedSite["a\(index).bin"] = randomData(count: 1024 * 1024, seed: UInt64(3_000 + index)) }
        let scenario = try SyncScenario(.nginx(site: limitedSite, options: slow))
        let otherSite = try TemporaryDirectory(prefix: "mirror-second-host")
        var otherFiles: [String: Data] = [:]
        for index in 0..<8 { otherFiles["b\(index).bin"] = randomData(count: 1024 * 1024, seed: UInt64(3_100 + index)) }
        for (name, data) in otherFiles { try otherSite.write(data, to: name) }
        let otherHost = try NginxServer.start(serving: otherSite, options: slow)
        defer { otherHost.stop() }

        let manifest = ManifestText(top: [
            "concurrency: 8",
            "hosts:",
            "  127.0.0.1:\(scenario.nginx.port):",
            "    concurrency: 2",
        ], entries: limitedSite.keys.sorted().map { ManifestText.Entry(scenario.url("/" + $0)) }
            + otherFiles.keys.sorted().map { ManifestText.Entry(otherHost.url("/" + $0), dest: "other/" + $0) })
        let reports = try await scenario.sync(manifest)
        #expect(reports.allSatisfy { $0.outcome == .transferred }, "\(reports.map(\.outcome))")
        for (name, data) in limitedSite { #expect(scenario.local(name)?.fingerprint == data.fingerprint) }
        for (name, data) in otherFiles { #expect(scenario.local("other/" + name)?.fingerprint == data.fingerprint) }

        let limited = try scenario.nginxRequests()
        let other = try otherHost.requests(atLeast: 8)
        #expect(limited.count(where: { $0.method == "GET" }) == 8)
        #expect(Self.mostAtOnce(limited) == 2, "host with concurrency 2: \(limited.map { "\($0.method) \($0.uri) \($0.startedAt)-\($0.endedAt)" })")
        #expect(Set(limited.map(\.connection)).count <= 2, "no more connections to it than its concurrency: \(limited)")
        #expect(Self.mostAtOnce(other) >= 4, "the other host has the rest of the run's 8")
        let lastLimitedEnd = try #require(limited.map(\.endedAt).max())
        let firstOtherStart = try #require(other.map(\.startedAt).min())
        #expect(firstOtherStart < lastLimitedEnd, "entries after the limited host's are not held up behind them")
    }

    /// Headers: `defaults`' first, then the host's (`hosts:`), then the entry's own, a later
    /// one replacing an earlier one of the same name; on probes and downloads alike. A host
    /// named without a port matches any port of it.
    @Test func hostHeadersGoBetweenDefaultsAndTheEntrysOwn() async throws {
        let site = ["a.bin": randomData(count: 10_000, seed: 3_200), "b.bin": randomData(count: 10_000, seed: 3_201)]
        let scenario = try SyncScenario(.nginx(site: site))
        let otherSite = try TemporaryDirectory(prefix: "mirror-second-host")
        try otherSite.write(randomData(count: 10_000, seed: 3_202), to: "c.bin")
        try otherSite.write(randomData(count: 10_000, seed: 3_203), to: "d.bin")
        let otherHost = try NginxServer.start(serving: otherSite)
        defer { otherHost.stop() }

        let manifest = ManifestText(top: [
            "defaults:",
            "  headers:",
            "    X-Test: from-defaults",
            "hosts:",
            "  127.0.0.1:\(scenario.nginx.port):",
            "    headers:",
            "      X-Test: from-host",
            "  localhost:",
            "    headers:",
            "      X-Test: from-host-by-name",
        ], entries: [
            .url(scenario.url("/a.bin")),
            .url(scenario.url("/b.bin"), "headers:", "  X-Test: from-entry"),
            .url(otherHost.url("/c.bin")),
            .url("http://localhost:\(otherHost.port)/d.bin"),
        ])
        let reports = try await scenario.sync(manifest)
        #expect(reports.allSatisfy { $0.outcome == .transferred }, "\(reports.map(\.outcome))")
        // A plan probes each entry with HEAD: the same headers go with it.
        let planned = await scenario.runner(try scenario.load(manifest)).plan()
        #expect(planned.allSatisfy { $0.action == .skip }, "\(planned.map(\.action))")

        let seen = try scenario.nginxRequests() + otherHost.requests(atLeast: 4)
        func headers(_ uri: String) -> Set<String?> { Set(seen.filter { $0.uri == uri }.map(\.xTest)) }
        #expect(headers("/a.bin") == ["from-host"], "\(seen)")
        #expect(headers("/b.bin") == ["from-entry"])
        #expect(headers("/c.bin") == ["from-defaults"], "a rule for another port of 127.0.0.1 does not apply")
        #expect(headers("/d.bin") == ["from-host-by-name"])
        #expect(Set(seen.map(\.method)) == ["HEAD", "GET"], "probes and downloads both")
    }
}
