import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Over plain HTTP (always HTTP/1.1), concurrent transfers to one host each get a connection
/// at once: a slow download started first does not hold back the others.
@Suite(.timeLimit(.minutes(2)))
struct PlainHTTPConcurrencyTests {
    @Test func aSlowFirstDownloadDoesNotHoldBackTheOthersToTheSameHost() async throws {
        // 4 MiB at 64 KiB/s: about a minute, while the small files take milliseconds.
        let slow = randomData(count: 4 << 20, seed: 820)
        let small = ["a.bin": randomData(count: 100_000, seed: 821), "b.bin": randomData(count: 300_000, seed: 822)]
        let scenario = try SyncScenario(.nginx(
            site: small.merging(["slow.bin": slow]) { first, _ in first },
            options: NginxOptions(extraServerConfiguration: "location = /slow.bin { limit_rate 64k; }")))
        try scenario.write(ManifestText(top: ["concurrency: 3"], entries: [
            .init(scenario.url("/slow.bin"), dest: "slow.bin"),
            .init(scenario.url("/a.bin"), dest: "a.bin"),
            .init(scenario.url("/b.bin"), dest: "b.bin"),
        ]))
        let running = try scenario.start(["sync", "m.yaml"], timeout: .seconds(90))

        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline, small.keys.contains(where: { scenario.local($0) == nil }) {
            try await Task.sleep(for: .milliseconds(20))
        }
        let slowStillRunning = scenario.local("slow.bin") == nil
        kill(running.pid, SIGTERM)
        let result = try running.wait()
        for (name, data) in small {
            #expect(scenario.local(name) == data, "\(name) finished while slow.bin was still downloading")
        }
        #expect(slowStillRunning)
        #expect(result.status == 143, "\(result)")
        let smallGets = try scenario.nginxRequests().filter { $0.method == "GET" && $0.uri != "/slow.bin" }
        #expect(smallGets.count == 2, "\(smallGets)")
    }
}
