import Foundation
import Testing

/// To an HTTP/2 server, concurrent requests share one connection as multiplexed streams
/// (`CURLOPT_PIPEWAIT`) instead of opening a connection each. nginx with TLS and HTTP/2 on
/// loopback, its certificate signed by a private CA the test makes.
struct HTTP2Tests {
    @Test func concurrentRequestsToAnHTTP2ServerShareOneConnection() async throws {
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
        #expect(Set(requests.map(\.connection)).count == 1,
                "6 at a time over HTTP/2 should be streams of one connection: \(requests)")
    }
}
