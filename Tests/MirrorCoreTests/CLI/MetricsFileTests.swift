import Foundation
import Testing
@testable import MirrorCore

/// `sync --metrics-file`, read back by Debian's real node_exporter through its textfile
/// collector: the values, the `manifest` label's escaping, and a file on every way out.
@Suite(.serialized)
struct MetricsFileTests {
    static let payload = randomData(count: 200_000, seed: 60)

    /// A scenario with a textfile directory watched by a node_exporter of its own.
    struct Monitored {
        let scenario: SyncScenario
        let exporter: NodeExporter
        var textfiles: String { scenario.directory.path("textfile") }
        var metricsFile: String { textfiles + "/mirror.prom" }

        init(_ scenario: SyncScenario) async throws {
            self.scenario = scenario
            try FileManager.default.createDirectory(atPath: scenario.directory.path("textfile"), withIntermediateDirectories: true)
            exporter = try await NodeExporter.start(textfileDirectory: scenario.directory.path("textfile"))
        }

        /// A scrape that node_exporter read the file for without complaint.
        func scrape() throws -> NodeExporter.Scrape {
            let scrape = try exporter.scrape()
            #expect(scrape.value("node_textfile_scrape_error") == 0, "node_exporter could not read the file:\n\(scrape.text)")
            return scrape
        }
    }

    /// The `manifest="…"` label of `path` as the exposition format escapes it.
    static func label(_ path: String) -> String {
        "manifest=\"" + path.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }

    @Test func successThenFailureReportsExitCodesAndCarriesTheLastSuccess() async throws {
        let scenario = try SyncScenario(.nginx(site: ["a.bin": Self.payload], options: NginxOptions(
            extraServerConfiguration: "location = /busy.bin { return 503; }")))
        let monitored = try await Monitored(scenario)
        defer { monitored.exporter.stop() }
        // A name that needs escaping in a label value: a double quote and a backslash.
        let name = "we\"ird\\name.yaml"
        let manifest = try scenario.write(.files(.url(scenario.url("/a.bin"), dest: "a.bin")), to: name)
        let label = Self.label(manifest)

        let first = try scenario.run(["sync", "--quiet", "--metrics-file", monitored.metricsFile, name])
        #expect(first.status == 0, "\(first)")
        let afterSuccess = try monitored.scrape()
        #expect(afterSuccess.value("mirror_exit_code", label) == 0, "\(afterSuccess)")
        #expect(afterSuccess.value("mirror_entries", label + ",result=\"transferred\"") == 1)
        #expect(afterSuccess.value("mirror_entries", label + ",result=\"skipped\"") == 0)
        #expect(afterSuccess.value("mirror_entries", label + ",result=\"failed\"") == 0)
        #expect(afterSuccess.value("mirror_bytes_transferred", label) == Double(Self.payload.count))
        #expect(afterSuccess.value("mirror_retries", label) == 0)
        let lastRun = try #require(afterSuccess.value("mirror_last_run_timestamp_seconds", label))
        #expect(abs(lastRun - Date().timeIntervalSince1970) < 600, "a Unix time of about now")
        #expect(afterSuccess.value("mirror_last_success_timestamp_seconds", label) == lastRun)
        #expect(try #require(afterSuccess.value("mirror_run_duration_seconds", label)) >= 0)
        #expect(afterSuccess.mirrorLines.contains("# TYPE mirror_entries gauge"))

        // The same manifest, now with an entry the server refuses: 503, then once more.
        try scenario.write(ManifestText(entries: [
            .init(scenario.url("/a.bin"), dest: "a.bin"),
            .init(scenario.url("/busy.bin"), dest: "busy.bin", "retries: 1"),
        ]), to: name)
        let second = try scenario.run(["sync", "--quiet", "--metrics-file", monitored.metricsFile, name])
        #expect(second.status == 1, "\(second)")
        let afterFailure = try monitored.scrape()
        #expect(afterFailure.value("mirror_exit_code", label) == 1, "\(afterFailure)")
        #expect(afterFailure.value("mirror_entries", label + ",result=\"skipped\"") == 1)
        #expect(afterFailure.value("mirror_entries", label + ",result=\"failed\"") == 1)
        #expect(afterFailure.value("mirror_bytes_transferred", label) == 0)
        #expect(afterFailure.value("mirror_retries", label) == 1)
        #expect(afterFailure.value("mirror_last_success_timestamp_seconds", label) == lastRun, "carried over from the first run")
        #expect(try #require(afterFailure.value("mirror_last_run_timestamp_seconds", label)) > lastRun)
        // Only the renamed file is left: no temporary file for the collector to trip on.
        #expect(try FileManager.default.contentsOfDirectory(atPath: monitored.textfiles) == ["mirror.prom"])
    }

    @Test func aManifestErrorStillWritesTheFileWithExitCodeTwo() async throws {
        let monitored = try await Monitored(try SyncScenario())
        defer { monitored.exporter.stop() }
        let manifest = try monitored.scenario.write(text: "version: 1\nfilez: []\n")
        let result = try monitored.scenario.run(["sync", "--metrics-file", monitored.metricsFile, "m.yaml"])
        #expect(result.status == 2, "\(result)")
        let scrape = try monitored.scrape()
        let label = Self.label(manifest)
        #expect(scrape.value("mirror_exit_code", label) == 2, "\(scrape)")
        for outcome in ["transferred", "skipped", "failed"] {
            #expect(scrape.value("mirror_entries", label + ",result=\"\(outcome)\"") == 0)
        }
        #expect(scrape.value("mirror_last_run_timestamp_seconds", label) != nil)
        #expect(scrape.value("mirror_last_success_timestamp_seconds", label) == nil, "no run has succeeded yet")
    }

    /// A scenario whose `slow.bin` stalls after 150 kB for far longer than any test runs: a
    /// sync of it is surely still transferring when the test acts, however busy the machine.
    static func stallingScenario() throws -> SyncScenario {
        let scenario = try SyncScenario(.faultServer)
        let payload = randomData(count: 400_000, seed: 61)
        scenario.server.route("/slow.bin", method: "GET", reply: .file(payload, etag: "\"s\"").stalled(afterBodyBytes: 150_000, for: .seconds(120)))
        scenario.server.route("/slow.bin", method: "HEAD", reply: .file(payload, etag: "\"s\""))
        return scenario
    }

    /// Waits (bounded) until the partial file holds the bytes sent before the stall.
    static func waitForPartial(_ scenario: SyncScenario) {
        let deadline = ContinuousClock.now + .seconds(30)
        while (scenario.local("slow.bin.part")?.count ?? 0) < 150_000 && ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.02)
        }
    }

    @Test(arguments: [(SIGINT, 130.0), (SIGTERM, 143.0)])
    func anInterruptedSyncWritesTheFileWithItsSignalStatus(_ signal: Int32, _ expected: Double) async throws {
        let scenario = try Self.stallingScenario()
        defer { scenario.server.stop() }
        let monitored = try await Monitored(scenario)
        defer { monitored.exporter.stop() }
        let manifest = try scenario.write(.files(.url(scenario.url("/slow.bin"), dest: "slow.bin")), to: "mirror.yaml")

        let running = try scenario.start(["sync", "--metrics-file", monitored.metricsFile, "mirror.yaml"])
        Self.waitForPartial(scenario)
        kill(running.pid, signal)
        let result = try running.wait()
        #expect(Double(result.status) == expected, "\(result)")

        let scrape = try monitored.scrape()
        let label = Self.label(manifest)
        #expect(scrape.value("mirror_exit_code", label) == expected, "\(scrape)")
        #expect(scrape.value("mirror_entries", label + ",result=\"failed\"") == 1, "the interrupted entry")
        #expect(scrape.value("mirror_bytes_transferred", label) == 150_000)
        #expect(scrape.value("mirror_last_success_timestamp_seconds", label) == nil)
    }

    /// Exit 4, from a real outage inside a network namespace; the JSON log says what is waited for.
    @Test func anUnreachableNetworkWritesExitCodeFourAndTheJSONLogSaysWhatItWaitsFor() async throws {
        let namespace = try NetworkNamespace()
        let scenario = try SyncScenario(.faultServerInside(namespace))
        let server = scenario.server
        defer { server.stop() }
        server.route("/a.bin", reply: .file(Self.payload))
        let monitored = try await Monitored(scenario)
        defer { monitored.exporter.stop() }
        try namespace.setLoopback(up: false)
        let manifest = try scenario.write(ManifestText(
            top: ["connectivity:", "  wait: 1s", "defaults:", "  timeout: 1s"], entries: [.url(server.url("/a.bin"))]))
        let result = try scenario.run(["sync", "--log-format", "json", "--metrics-file", monitored.metricsFile, "m.yaml"],
                                      launcher: namespace.launcher(in: scenario.directory.path))
        #expect(result.status == 4, "\(result)")
        let records = try LogFormatTests.records(result.stderr)
        let wait = try #require(records.first { $0["event"] as? String == "waiting_for_network" }, "\(result)")
        #expect(wait["host"] as? String == "127.0.0.1:\(server.port)" && wait["wait_ms"] as? Int == 1000, "\(wait)")
        #expect(LogFormatTests.isTimestamp(try #require(wait["until"] as? String)))

        let scrape = try monitored.scrape()
        #expect(scrape.value("mirror_exit_code", Self.label(manifest)) == 4, "\(scrape)")
        #expect(scrape.value("mirror_entries", Self.label(manifest) + ",result=\"failed\"") == 1)
    }

    /// Exit 3: another run holds the root's lock; nothing of this run's is counted.
    @Test func aHeldLockWritesExitCodeThree() async throws {
        let scenario = try Self.stallingScenario()
        defer { scenario.server.stop() }
        let monitored = try await Monitored(scenario)
        defer { monitored.exporter.stop() }
        let manifest = try scenario.write(.files(.url(scenario.url("/slow.bin"), dest: "slow.bin")), to: "mirror.yaml")
        let first = try scenario.start(["sync", "--quiet", "mirror.yaml"])
        Self.waitForPartial(scenario)
        let second = try scenario.run(["sync", "--metrics-file", monitored.metricsFile, "mirror.yaml"])
        #expect(second.status == 3, "\(second)")
        kill(first.pid, SIGTERM)
        #expect(try first.wait().status == 143)

        let scrape = try monitored.scrape()
        #expect(scrape.value("mirror_exit_code", Self.label(manifest)) == 3, "\(scrape)")
        #expect(scrape.value("mirror_entries", Self.label(manifest) + ",result=\"transferred\"") == 0)
    }
}
