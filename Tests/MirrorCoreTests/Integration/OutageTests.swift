import Foundation
import Testing
@testable import MirrorCore

/// Real outages, real name lookups and a real proxy, each inside a network namespace the test
/// makes: `mirror` runs in there (`NetworkNamespace.launcher(in:)`), with the servers. Taking `lo`
/// down drops every packet, so connects time out as on a cut network; a server that stops
/// would only refuse, which proves the network works and is no outage at all.
struct OutageTests {
    static let data = randomData(count: 400_000, seed: 60)

    /// Waits (bounded) until `condition` holds; false when it never did.
    static func eventually(within limit: Duration = .seconds(20), _ condition: () -> Bool) -> Bool {
        let deadline = ContinuousClock.now + limit
        while !condition() {
            if ContinuousClock.now > deadline { return false }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return true
    }

    @Test func aNetworkThatGoesAwayMidBodyAndComesBackDoesNotCostTheRetries() throws {
        let namespace = try NetworkNamespace()
        let scenario = try SyncScenario(.faultServerInside(namespace))
        let server = scenario.server
        defer { server.stop() }
        server.route("/a.bin", method: "GET", replies: [
            .file(Self.data, etag: "\"e\"").stalled(afterBodyBytes: 150_000, for: .seconds(30)),
            .file(Self.data, etag: "\"e\""),
        ])
        server.route("/a.bin", method: "HEAD", reply: .file(Self.data, etag: "\"e\""))
        // No retries at all: only an outage that is forgiven lets the entry finish.
        try scenario.write(ManifestText(top: ["connectivity:", "  wait: 60s"], entries: [
            .url(server.url("/a.bin"), "retries: 0", "timeout: 2s"),
        ]))
        let run = try scenario.start(["sync", "m.yaml"], launcher: namespace.launcher(in: scenario.directory.path))
        #expect(Self.eventually { (scenario.local("a.bin.part")?.count ?? 0) >= 150_000 })
        try namespace.setLoopback(up: false)
        let said = Self.eventually { String(decoding: run.scratch.contents(of: "stderr") ?? Data(), as: UTF8.self).contains("is unreachable") }
        #expect(said, "the outage is announced")
        try namespace.setLoopback(up: true)
        let result = try run.wait()

        #expect(result.status == 0, "\(result)")
        #expect(scenario.local("a.bin")?.fingerprint == Self.data.fingerprint)
        #expect(result.stderr.components(separatedBy: "mirror: 127.0.0.1:\(server.port) is unreachable;").count == 2, "said once: \(result)")
        let gets = server.requests(for: "/a.bin").filter { $0.method == "GET" }
        #expect(gets.count == 2)
        #expect(gets.last?.headers["If-Range"] == "\"e\"", "resumed, not restarted")
    }

    @Test func aNetworkThatStaysAwayEndsTheRunAsUnreachable() throws {
        let namespace = try NetworkNamespace()
        let scenario = try SyncScenario(.faultServerInside(namespace))
        let server = scenario.server
        defer { server.stop() }
        server.route("/a.bin", reply: .file(Self.data))
        try namespace.setLoopback(up: false)
        try scenario.write(ManifestText(
            top: ["concurrency: 1", "connectivity:", "  wait: 2s", "defaults:", "  timeout: 1s", "  retries: 3"],
            entries: ["a", "b", "c"].map { .url(server.url("/\($0).bin")) }))
        let result = try scenario.run(["sync", "m.yaml"], launcher: namespace.launcher(in: scenario.directory.path))

        #expect(result.status == 4, "\(result)")
        #expect(result.stderr.contains("127.0.0.1:\(server.port) is unreachable; transfers to it wait up to 2s"))
        #expect(result.stderr.contains("the network stayed unreachable: no connection to 127.0.0.1:\(server.port) for 2s"))
        // The queue behind the first entry does not wait all over again.
        #expect(result.stderr.components(separatedBy: "is unreachable;").count == 2, "\(result)")
        #expect(result.stderr.components(separatedBy: "FAILED").count == 4)
        #expect(result.stderr.contains("FAILED a.bin: the network stayed unreachable: no connection to 127.0.0.1:\(server.port) for 2s (\(server.url("/a.bin")), 1 attempt)"),
                "retries are not spent while the network is down: \(result)")
        #expect(scenario.files().isEmpty)
    }

    /// An authoritative NXDOMAIN proves the network works: a typo in a host name fails that
    /// entry with its cause after its retries (exit 1), with no wait and no outage.
    @Test func aHostThatDoesNotResolveFailsWithItsCauseInsteadOfWaiting() throws {
        let namespace = try NetworkNamespace()
        try Dnsmasq.start(in: namespace, domain: "mirror.test", addresses: ["good.mirror.test": "127.0.0.1"])
        let scenario = try SyncScenario(.faultServerInside(namespace))
        let server = scenario.server
        defer { server.stop() }
        server.route("/b.bin", reply: .file(Self.data))
        try scenario.write(ManifestText(top: ["connectivity:", "  wait: 20s"], entries: [
            .url("http://typo.mirror.test:\(server.port)/a.bin", "retries: 1"),
            .url("http://good.mirror.test:\(server.port)/b.bin"),
        ]))
        let result = try scenario.run(["sync", "m.yaml"], launcher: namespace.launcher(in: scenario.directory.path))

        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("FAILED a.bin: Could not resolve host: typo.mirror.test"), "\(result)")
        #expect(result.stderr.contains("2 attempts)"), "retried with backoff")
        #expect(!result.stderr.contains("unreachable"), "\(result)")
        #expect(scenario.local("b.bin")?.fingerprint == Self.data.fingerprint)
    }

    /// A resolver that cannot be reached is the network not answering: an outage (exit 4).
    @Test func aResolverThatCannotBeReachedIsAnOutage() throws {
        // Nothing listens on 127.0.0.2:53 in there.
        let namespace = try NetworkNamespace(nameserver: "127.0.0.2")
        let scenario = try SyncScenario()
        try scenario.write(ManifestText(top: ["connectivity:", "  wait: 2s"], entries: [.url("http://good.mirror.test:8080/a.bin")]))
        let result = try scenario.run(["sync", "m.yaml"], launcher: namespace.launcher(in: scenario.directory.path))

        #expect(result.status == 4, "\(result)")
        #expect(result.stderr.contains("good.mirror.test:8080 is unreachable"), "\(result)")
    }

    /// A connection refused proves the network works: exit 1 with the cause, not exit 4.
    @Test func aRefusedPortFailsWithItsCauseInsteadOfWaiting() throws {
        let closed = try ClosedPort()
        defer { withExtendedLifetime(closed) {} }
        let scenario = try SyncScenario()
        try scenario.write(ManifestText(top: ["connectivity:", "  wait: 20s"], entries: [
            .url("http://127.0.0.1:\(closed.port)/a.bin", "retries: 2"),
        ]))
        let result = try scenario.run(["sync", "--quiet", "m.yaml"])

        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("Connection refused"), "\(result)")
        #expect(result.stderr.contains("3 attempts)"), "\(result)")
        #expect(!result.stderr.contains("unreachable"), "\(result)")
    }

    /// With a proxy in use, the connectivity check connects to the proxy, not to an origin
    /// only the proxy can reach: a cut reply is retried through the proxy at once.
    @Test func theConnectivityCheckGoesThroughTheProxy() throws {
        // No resolver in there: only the proxy knows where origin.mirror.test is.
        let namespace = try NetworkNamespace(nameserver: "127.0.0.2")
        let scenario = try SyncScenario(.faultServerInside(namespace))
        let server = scenario.server
        defer { server.stop() }
        try TinyProxy.start(in: namespace, port: 3128, hosts: ["origin.mirror.test": "127.0.0.1"])
        server.route("/a.bin", method: "GET", replies: [.file(Self.data, etag: "\"p\"").cut(afterBodyBytes: 100_000), .file(Self.data, etag: "\"p\"")])
        server.route("/a.bin", method: "HEAD", reply: .file(Self.data, etag: "\"p\""))
        try scenario.write(ManifestText(top: ["connectivity:", "  wait: 3s"], entries: [
            .url("http://origin.mirror.test:\(server.port)/a.bin"),
        ]))
        let result = try scenario.run(
            ["sync", "m.yaml"],
            environment: ["http_proxy": "http://127.0.0.1:3128", "no_proxy": ""], launcher: namespace.launcher(in: scenario.directory.path))

        #expect(result.status == 0, "\(result)")
        #expect(!result.stderr.contains("unreachable"), "\(result)")
        #expect(scenario.local("a.bin")?.fingerprint == Self.data.fingerprint)
        #expect(server.requests(for: "/a.bin").filter { $0.method == "GET" }.count == 2, "both through the proxy")
    }

    /// A proxy that does not answer is an outage of the proxy, and the messages say so.
    @Test func aDeadProxyIsAnOutageOfTheProxy() throws {
        let namespace = try NetworkNamespace()
        try namespace.setLoopback(up: false)
        let scenario = try SyncScenario()
        try scenario.write(ManifestText(top: ["connectivity:", "  wait: 2s", "defaults:", "  timeout: 1s"], entries: [
            .url("http://origin.example:8080/a.bin"),
        ]))
        let result = try scenario.run(
            ["sync", "m.yaml"],
            environment: ["http_proxy": "http://127.0.0.1:3128", "no_proxy": ""], launcher: namespace.launcher(in: scenario.directory.path))

        #expect(result.status == 4, "\(result)")
        #expect(result.stderr.contains("mirror: proxy 127.0.0.1:3128 (from http_proxy) is unreachable;"), "\(result)")
        #expect(result.stderr.contains("no connection to proxy 127.0.0.1:3128 (from http_proxy) for 2s"), "\(result)")
        #expect(!result.stderr.contains("origin.example:8080 is unreachable"))
    }
}
