import Foundation
import Glibc
import Testing
@testable import MirrorCore

/// `sync` takes its run lock and opens its state store while libcurl still loads
/// (`ManifestRunner.open`), in a root a run has made before; a first run makes nothing before
/// its runner, and a lock another run holds is left to the run, which waits for it or says why.
@Suite(.serialized)
struct EarlyOpeningTests {
    static let body = Data((0..<40_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })

    private static func scenario() throws -> (SyncScenario, ManifestText) {
        let scenario = try SyncScenario(.nginx(site: ["a.bin": body]))
        return (scenario, .files(.url(scenario.url("/a.bin"))))
    }

    @Test func aFirstRunMakesNothingBeforeItsRunner() async throws {
        let (scenario, text) = try Self.scenario()
        let manifest = try scenario.load(text)
        let opened = await ManifestRunner.open(manifest: manifest, options: scenario.runOptions(manifest))
        #expect(opened == nil)
        #expect(!FileManager.default.fileExists(atPath: scenario.root + "/.mirror"), "no state directory made before libcurl is known to load")
        #expect(scenario.files().isEmpty)
        let reports = try await scenario.runner(manifest).sync()
        #expect(reports.map(\.outcome) == [.transferred])
    }

    @Test func inARootMadeBeforeTheLockIsHeldFromTheOpeningToTheEndOfTheRun() async throws {
        let (scenario, text) = try Self.scenario()
        let manifest = try scenario.load(text)
        #expect(try await scenario.runner(manifest).sync().map(\.outcome) == [.transferred])
        scenario.nginx.clearLog()

        var opened = await ManifestRunner.open(manifest: manifest, options: scenario.runOptions(manifest))
        #expect(opened != nil)
        await #expect(throws: RunLockError.self, "held from the opening on") { _ = try await RunLock.acquire(root: scenario.root) }
        let runner = ManifestRunner(manifest: manifest, options: scenario.runOptions(manifest), opened: opened)
        opened = nil
        let reports = try await runner.sync()
        // The store it opened is the run's: the record of the first run makes it one
        // conditional GET, answered 304.
        #expect(reports.map(\.outcome) == [.skipped])
        let requests = try scenario.nginxRequests()
        #expect(requests.map(\.method) == ["GET"] && requests.map(\.status) == [304], "\(requests)")
        let again = try await RunLock.acquire(root: scenario.root)
        withExtendedLifetime(again) {}
    }

    @Test func aLockAnotherRunHoldsIsLeftToTheRun() async throws {
        let (scenario, text) = try Self.scenario()
        let manifest = try scenario.load(text)
        _ = try await scenario.runner(manifest).sync()

        let held = try await RunLock.acquire(root: scenario.root)
        let opened = await ManifestRunner.open(manifest: manifest, options: scenario.runOptions(manifest))
        #expect(opened == nil)
        do {
            _ = try await scenario.runner(manifest).sync()
            Issue.record("the run went on under a lock another run holds")
        } catch {
            #expect("\(error)".contains("process \(getpid())"), "the run says who holds it: \(error)")
        }
        withExtendedLifetime(held) {}
    }
}
