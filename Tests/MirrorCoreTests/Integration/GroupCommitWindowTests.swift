import Foundation
import Synchronization
import Testing
@testable import MirrorCore

/// A file that waits for its group commit holds no connection: while a group is being written,
/// the downloads after it go on (up to a group's worth of files waiting), rather than stopping
/// once the entries in flight (4 a transfer) are all files waiting for the disk. Files of 1,000
/// bytes wait with their bodies held in memory (the group writes them), files of 100,000 as
/// `.part` files.
struct GroupCommitWindowTests {
    @Test(arguments: [1_000, 100_000])
    func downloadsGoOnWhileAGroupIsWritten(size: Int) async throws {
        let count = 40
        var site: [String: Data] = [:]
        for index in 0..<count { site["f\(index)"] = Data(repeating: UInt8(index), count: size) }
        let scenario = try SyncScenario(.nginx(site: site))
        let manifest = try scenario.load(ManifestText(
            top: ["concurrency: 1"], entries: (0..<count).map { .url(scenario.url("/f\($0)"), dest: "f\($0)") }))
        var options = scenario.runOptions(manifest)
        let root = scenario.root
        let held = size <= PartialFileWriter.defaultHoldLimit
        let firstGroup = Mutex(true)
        let mostWaiting = Mutex(0)
        let partsSeen = Mutex(0)
        options.beforeGroupCommit = {
            guard firstGroup.withLock({ first in defer { first = false }; return first }) else { return }
            // The first group is held until every other file has come and waits for its own
            // (at most 5 s): then every file of the run is downloaded (held in memory, or a
            // `.part`) at once.
            let deadline = ContinuousClock.now + .seconds(5)
            while ContinuousClock.now < deadline {
                let parts = (try? FileManager.default.contentsOfDirectory(atPath: root))?.filter { $0.hasSuffix(".part") }.count ?? 0
                partsSeen.withLock { $0 = max($0, parts) }
                let waiting = held ? ((try? scenario.nginx.requests().count) ?? 0) : parts
                mostWaiting.withLock { $0 = max($0, waiting) }
                if waiting == count { break }
                Thread.sleep(forTimeInterval: 0.01)
            }
        }
        let reports = try await ManifestRunner(manifest: manifest, options: options).sync()
        #expect(reports.count == count)
        #expect(reports.allSatisfy { $0.outcome == .transferred })
        #expect(mostWaiting.withLock { $0 } == count, "files downloaded while the first group was held")
        // A held body makes no file before its group writes it: only the first group's was.
        #expect(partsSeen.withLock { $0 } == (held ? 0 : count), "partial files seen while the first group was held")
        for index in 0..<count { #expect(scenario.local("f\(index)") == site["f\(index)"]) }
    }
}
