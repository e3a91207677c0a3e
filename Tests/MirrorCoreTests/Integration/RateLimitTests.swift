import Foundation
import Testing
@testable import MirrorCore

/// `rate_limit` and `--rate-limit`, measured where the bytes leave: nginx's access log says when
/// each response began and ended and how many body bytes it sent. nginx's send buffer is kept
/// small (`sndbuf`) so that "sent" is close to "read by mirror". Each run lasts about 10 s.
///
/// The bound is 5 %: the token buckets keep to the rate over any stretch longer than a receive
/// buffer (1/16 s of the rate), so the error left is one buffer at the start and the bytes
/// queued in the sockets at the end (about 200 KiB; under 2 % of the 10 MiB to 20 MiB sent here).
@Suite(.serialized)
struct RateLimitTests {
    static let tolerance = 0.05

    /// Body bytes per second over `requests` together: from the first one's start to the last
    /// one's end, as nginx logged them.
    static func rate(of requests: [LoggedRequest]) -> Double {
        let gets = requests.filter { $0.method == "GET" }
        guard let start = gets.map(\.startedAt).min(), let end = gets.map(\.endedAt).max(), end > start else { return 0 }
        return Double(gets.reduce(0) { $0 + $1.bodyBytesSent }) / (end - start)
    }

    static func expectNear(_ measured: Double, _ limit: Double, _ what: String, sourceLocation: Testing.SourceLocation = #_sourceLocation) {
        let error = abs(measured - limit) / limit
        #expect(error <= tolerance, "\(what): \(Int(measured)) B/s measured at nginx against a limit of \(Int(limit)) B/s (\(String(format: "%.1f", error * 100)) % off)",
                sourceLocation: sourceLocation)
    }

    /// The child's user and system CPU seconds, from the `times` line the launcher prints.
    static func cpuSeconds(fromTimesOutput stderr: String) -> Double? {
        guard let line = stderr.split(separator: "\n").last else { return nil }
        let fields = line.split(separator: " ")
        guard fields.count == 2 else { return nil }
        var total = 0.0
        for field in fields {
            // "0m0.190s"
            let parts = field.dropLast().split(separator: "m")
            guard field.hasSuffix("s"), parts.count == 2, let minutes = Double(parts[0]), let seconds = Double(parts[1]) else { return nil }
            total += minutes * 60 + seconds
        }
        return total
    }

    /// `--rate-limit 2MiB` holds 20 files of 1 MiB on two hosts, 4 at a time, to 2 MiB/s together,
    /// replacing the manifest's `rate_limit: 8MiB`; while held the process sleeps (its CPU
    /// time stays a small part of the 10 s).
    @Test func theRunLimitHoldsEveryTransferTogether() throws {
        let sizes = 1024 * 1024
        var site: [String: Data] = [:]
        for index in 0..<20 { site["r\(index).bin"] = randomData(count: sizes, seed: UInt64(1_000 + index)) }
        let firstHalf = site.filter { Int($0.key.dropFirst().prefix { $0.isNumber })! < 10 }
        let secondHalf = site.filter { Int($0.key.dropFirst().prefix { $0.isNumber })! >= 10 }
        let scenario = try SyncScenario(.nginx(site: firstHalf, options: NginxOptions(sendBuffer: 32 * 1024)))
        let otherSite = try TemporaryDirectory(prefix: "mirror-second-host")
        for (name, data) in secondHalf { try otherSite.write(data, to: name) }
        let otherHost = try NginxServer.start(serving: otherSite, options: NginxOptions(sendBuffer: 32 * 1024))
        defer { otherHost.stop() }

        let entries = firstHalf.keys.sorted().map { ManifestText.Entry(scenario.url("/" + $0)) }
            + secondHalf.keys.sorted().map { ManifestText.Entry(otherHost.url("/" + $0)) }
        try scenario.write(ManifestText(top: ["concurrency: 4", "rate_limit: 8MiB"], entries: entries))
        let result = try scenario.run(
            ["sync", "m.yaml", "--no-fsync", "--rate-limit", "2MiB"],
            launcher: ["/bin/sh", "-c", "\"$0\" \"$@\"; status=$?; times >&2; exit $status"])
        #expect(result.status == 0, "\(result)")
        for (name, data) in site { #expect(scenario.local(name)?.fingerprint == data.fingerprint, "\(name)") }

        let requests = try scenario.nginxRequests() + otherHost.requests(atLeast: 10)
        Self.expectNear(Self.rate(of: requests), 2 * 1024 * 1024, "two hosts together under --rate-limit 2MiB")
        let cpu = try #require(Self.cpuSeconds(fromTimesOutput: result.stderr), "no `times` line in \(result.stderr)")
        #expect(cpu < 2.5, "mirror used \(cpu) s of CPU in a ~10 s throttled run: it should sleep while held")
    }

    /// A host's `rate_limit` (`hosts:`) holds its transfers together, and an entry's own holds
    /// that entry, each to its rate; the other host's entries without limits run at full speed
    /// beside them.
    @Test func hostAndEntryLimitsHoldEachTheirOwn() async throws {
        var limitedSite: [String: Data] = [:]
        for index in 0..<10 { limitedSite["h\(index).bin"] = randomData(count: 2 * 1024 * 1024, seed: UInt64(2_000 + index)) }
        let scenario = try SyncScenario(.nginx(site: limitedSite, options: NginxOptions(sendBuffer: 32 * 1024)))
        let otherSite = try TemporaryDirectory(prefix: "mirror-second-host")
        let slowEntry = randomData(count: 10 * 1024 * 1024, seed: 2_100)
        try otherSite.write(slowEntry, to: "entry.bin")
        var freeFiles: [String: Data] = [:]
        for index in 0..<4 { freeFiles["free\(index).bin"] = randomData(count: 2 * 1024 * 1024, seed: UInt64(2_200 + index)) }
        for (name, data) in freeFiles { try otherSite.write(data, to: name) }
        let otherHost = try NginxServer.start(serving: otherSite, options: NginxOptions(sendBuffer: 32 * 1024))
        defer { otherHost.stop() }

        let entries = [ManifestText.Entry(otherHost.url("/entry.bin"), "rate_limit: 1MiB/s")]
            + freeFiles.keys.sorted().map { ManifestText.Entry(otherHost.url("/" + $0)) }
            + limitedSite.keys.sorted().map { ManifestText.Entry(scenario.url("/" + $0)) }
        let manifest = ManifestText(top: [
            "concurrency: 8",
            "hosts:",
            "  127.0.0.1:\(scenario.nginx.port):",
            "    rate_limit: 2MiB",
        ], entries: entries)
        let reports = try await scenario.sync(manifest)
        #expect(reports.allSatisfy { $0.outcome == .transferred }, "\(reports.map(\.outcome))")
        #expect(scenario.local("entry.bin")?.fingerprint == slowEntry.fingerprint)

        let limitedHost = try scenario.nginxRequests()
        Self.expectNear(Self.rate(of: limitedHost), 2 * 1024 * 1024, "host 127.0.0.1:\(scenario.nginx.port) with rate_limit 2MiB")
        let other = try otherHost.requests(atLeast: 5)
        let entry = try #require(other.first { $0.uri == "/entry.bin" && $0.method == "GET" })
        Self.expectNear(Self.rate(of: [entry]), 1024 * 1024, "the entry with rate_limit 1MiB/s")
        let free = other.filter { $0.uri.hasPrefix("/free") && $0.method == "GET" }
        #expect(free.count == 4)
        #expect(free.allSatisfy { $0.duration < 2 }, "entries with no limit of their own are not held: \(free.map(\.duration))")
    }

    /// Transfers that share a limit take turns at it: four files under one run limit all move
    /// together and end together, none waiting for the others to finish (nor starved until the
    /// server gives up on it).
    @Test func transfersSharingALimitTakeTurns() async throws {
        var site: [String: Data] = [:]
        for index in 0..<4 { site["t\(index).bin"] = randomData(count: 1024 * 1024, seed: UInt64(4_000 + index)) }
        let scenario = try SyncScenario(.nginx(site: site, options: NginxOptions(sendBuffer: 32 * 1024)))
        let manifest = ManifestText(top: ["concurrency: 4", "rate_limit: 1MiB"],
                                    entries: site.keys.sorted().map { ManifestText.Entry(scenario.url("/" + $0)) })
        let reports = try await scenario.sync(manifest)
        #expect(reports.allSatisfy { $0.outcome == .transferred }, "\(reports.map(\.outcome))")
        let gets = try scenario.nginxRequests().filter { $0.method == "GET" }
        try #require(gets.count == 4)
        let start = gets.map(\.startedAt).min()!, end = gets.map(\.endedAt).max()!
        let firstEnd = gets.map(\.endedAt).min()!
        #expect(firstEnd - start >= 0.75 * (end - start),
                "sharing 1 MiB/s, each of 4 files should take most of the ~4 s: ends at \(gets.map { $0.endedAt - start })")
    }

    /// Time a transfer is held back by its limit is neither a stall (`timeout`) nor slowness of
    /// the server (`min_speed`): two transfers taking turns at 16 KiB/s are each held a second at
    /// a time, past a 500 ms timeout and under a 1 MiB/s minimum, and succeed at the first try.
    @Test func heldTimeIsNeitherAStallNorSlowness() async throws {
        let site = ["p0.bin": randomData(count: 32 * 1024, seed: 4_100), "p1.bin": randomData(count: 32 * 1024, seed: 4_101)]
        let scenario = try SyncScenario(.nginx(site: site))
        let manifest = ManifestText(
            top: ["concurrency: 2", "rate_limit: 16KiB", "defaults:", "  retries: 0", "  timeout: 500ms",
                  "  min_speed: 1MiB", "  min_speed_time: 1s"],
            entries: site.keys.sorted().map { ManifestText.Entry(scenario.url("/" + $0)) })
        let started = ContinuousClock.now
        let reports = try await scenario.sync(manifest)
        // The first 16 KiB chunk goes through at once: 48 KiB wait for the limit.
        #expect(ContinuousClock.now - started >= .milliseconds(2_800), "64 KiB at 16 KiB/s")
        #expect(reports.allSatisfy { $0.outcome == .transferred && $0.attempts == 1 }, "\(reports.map { "\($0.outcome) \($0.attempts)" })")
        for (name, data) in site { #expect(scenario.local(name)?.fingerprint == data.fingerprint) }
    }
}
