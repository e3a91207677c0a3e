import Foundation
import Testing
@testable import MirrorCore

/// Interrupting a run ends every entry promptly and reports it as interrupted, whatever the
/// entry was doing: against the fault server, with transfers held open by a stalled reply. The
/// replies stall for 10 minutes and the entries' `timeout` is 5: a run that does not stop the
/// transfer itself waits the 5 minutes out, which the 150 s bound tells from a stop (which takes
/// well under a second, plus whatever a loaded test machine adds).
struct CancellationTests {
    static let data = randomData(count: 400_000, seed: 4_400)

    /// A file: source refused before its request starts, then a mirror whose download stalls:
    /// the stop must reach the mirror's download, the request the entry is waiting on.
    @Test func aStopReachesTheDownloadThatFollowsARefusedSource() async throws {
        let scenario = try SyncScenario(.faultServer)
        scenario.server.route("/slow.bin", replies: [.file(Self.data).stalled(afterBodyBytes: 100_000, for: .seconds(600))])
        let manifest = try scenario.load(ManifestText(top: ["allow_file: true", "defaults:", "  timeout: 300s"], entries: [
            .url("file:///nonexistent/mirror-test/missing.bin", dest: "m.bin",
                 "mirrors: [\"\(scenario.server.url("/slow.bin"))\"]"),
        ]))
        let runner = scenario.runner(manifest)
        let work = Task { try await runner.sync() }
        // Wait (bounded) until the mirror's GET has reached the server.
        for _ in 0..<2400 where scenario.server.requests(for: "/slow.bin").isEmpty {
            try await Task.sleep(for: .milliseconds(25))
        }
        #expect(!scenario.server.requests(for: "/slow.bin").isEmpty, "the mirror's download began")
        let cancelled = ContinuousClock.now
        work.cancel()
        let reports = try await work.value
        #expect(ContinuousClock.now - cancelled < .seconds(150), "the stalled download was stopped, not waited out")
        #expect(reports.map(\.outcome) == [.failed(.cancelled)], "\(reports.map(\.outcome))")
    }

    /// A plan whose task is cancelled while its probes wait returns a fail row per entry;
    /// it never traps.
    @Test func anInterruptedPlanReportsEveryEntryAsAFailRow() async throws {
        let scenario = try SyncScenario(.faultServer)
        for index in 0..<6 {
            scenario.server.route("/p\(index).bin", replies: [.file(Self.data).delayed(by: .seconds(600))])
        }
        let manifest = try scenario.load(ManifestText(top: ["concurrency: 2", "defaults:", "  timeout: 300s"], entries: (0..<6).map {
            .url(scenario.server.url("/p\($0).bin"))
        }))
        let runner = scenario.runner(manifest)
        let work = Task { await runner.plan() }
        for _ in 0..<2400 where scenario.server.requests.isEmpty {
            try await Task.sleep(for: .milliseconds(25))
        }
        let cancelled = ContinuousClock.now
        work.cancel()
        let plan = await work.value
        #expect(ContinuousClock.now - cancelled < .seconds(150), "the waiting probes were stopped, not waited out")
        #expect(plan.count == 6)
        #expect(plan.allSatisfy { if case .fail = $0.action { return true } else { return false } }, "\(plan.map(\.action))")
    }
}
