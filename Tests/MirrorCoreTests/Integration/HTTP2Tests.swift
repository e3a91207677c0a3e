import Foundation
import Testing
@testable import MirrorCore

/// To an HTTP/2 server, concurrent requests share connections as multiplexed streams
/// (`CURLOPT_PIPEWAIT`) instead of opening a connection each: the first
/// `RequestBudget.streamConnections` requests open one each, the others ride on those. nginx
/// with TLS and HTTP/2 on loopback, its certificate signed by a private CA the test makes.
struct HTTP2Tests {
    @Test func concurrentRequestsToAnHTTP2ServerShareItsFirstConnections() async throws {
        let ca = try PrivateCA()
        var site: [String: Data] = [:]
        for index in 0..<12 { site["h\(index).bin"] = randomData(count: 40_000, seed: UInt64(700 + index)) }
        let scenario = try SyncScenario(.nginx(site: site, options: NginxOptions(tls: ca.serverTLS, http2: true)))
        let manifest = ManifestText(top: ["concurrency: 6", "defaults:", "  ca_file: \(ca.caCertificate)"],
                                    entries: (0..<12).map { .url(scenario.url("/h\($0).bin")) })
        let reports = try await scenario.sync(manifest)
        #expect(reports.allSatisfy { $0.outcome == .transferred }, "\(reports.map(\.outcome))")
        for (name, data) in site { #expect(scenario.local(name)?.fingerprint == data.fingerprint, "\(name)") }

        let requests = try scenario.nginxRequests()
        #expect(requests.count == 12, "\(requests)")
        #expect(requests.allSatisfy { $0.protocol == "HTTP/2.0" }, "\(requests.map(\.protocol))")
        #expect(Set(requests.map(\.connection)).count == RequestBudget.streamConnections,
                "6 at a time over HTTP/2 should be streams of the 4 connections the first requests opened: \(requests)")
    }

    /// To an HTTP/1.1 server, concurrent downloads each get a connection at once: none waits for
    /// the first one to end in case it could be shared. Four slow responses (nginx sends each at
    /// 256 KiB/s after the first 256 KiB) are all under way together at the server, over plain
    /// HTTP and over TLS without HTTP/2.
    @Test(arguments: [false, true])
    func concurrentDownloadsFromAnHTTP1ServerRunTogether(overTLS: Bool) async throws {
        let ca = try PrivateCA()
        var site: [String: Data] = [:]
        for index in 0..<4 { site["s\(index).bin"] = randomData(count: 1024 * 1024, seed: UInt64(720 + index)) }
        let options = NginxOptions(rateLimit: 256 * 1024, tls: overTLS ? ca.serverTLS : nil, http2: false)
        let scenario = try SyncScenario(.nginx(site: site, options: options))
        let manifest = ManifestText(top: ["concurrency: 4", "defaults:", "  ca_file: \(ca.caCertificate)"],
                                    entries: site.keys.sorted().map { .url(scenario.url("/" + $0)) })
        let reports = try await scenario.sync(manifest)
        #expect(reports.allSatisfy { $0.outcome == .transferred }, "\(reports.map(\.outcome))")
        let requests = try scenario.nginxRequests()
        #expect(requests.allSatisfy { $0.protocol == "HTTP/1.1" })
        #expect(HostSettingsTests.mostAtOnce(requests) == 4,
                "all four under way at once: \(requests.map { "\($0.uri) \($0.startedAt)-\($0.endedAt)" })")
    }

    /// A rate limit holds the server back over HTTPS too. A paused HTTP/2 stream would keep its
    /// window open and the server would send at full speed into memory, so a limited download
    /// goes over HTTP/1.1, where a pause stops TCP: nginx (HTTP/2 on offer) takes the limit's
    /// time to send a 6 MiB entry held to 2 MiB/s, while an unlimited entry beside it still
    /// uses HTTP/2.
    @Test func aRateLimitHoldsTheServerBackOverHTTPS() async throws {
        let ca = try PrivateCA()
        let site = ["held.bin": randomData(count: 6 * 1024 * 1024, seed: 760), "free.bin": randomData(count: 1024 * 1024, seed: 761)]
        let scenario = try SyncScenario(.nginx(site: site, options: NginxOptions(tls: ca.serverTLS, http2: true, sendBuffer: 32 * 1024)))
        let manifest = ManifestText(top: ["concurrency: 2", "defaults:", "  ca_file: \(ca.caCertificate)"], entries: [
            .url(scenario.url("/held.bin"), "rate_limit: 2MiB"),
            .url(scenario.url("/free.bin")),
        ])
        let reports = try await scenario.sync(manifest)
        #expect(reports.allSatisfy { $0.outcome == .transferred }, "\(reports.map(\.outcome))")
        for (name, data) in site { #expect(scenario.local(name)?.fingerprint == data.fingerprint, "\(name)") }
        let requests = try scenario.nginxRequests()
        let held = try #require(requests.first { $0.uri == "/held.bin" && $0.method == "GET" })
        let free = try #require(requests.first { $0.uri == "/free.bin" && $0.method == "GET" })
        #expect(held.protocol == "HTTP/1.1")
        #expect(free.protocol == "HTTP/2.0")
        RateLimitTests.expectNear(RateLimitTests.rate(of: [held]), 2 * 1024 * 1024, "a 2 MiB/s entry over HTTPS, at nginx")
    }
}
