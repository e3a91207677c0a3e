import Foundation
import Testing
@testable import MirrorCore

/// Many short new files, whose bodies are held in memory until their group commit writes them,
/// killed with SIGKILL at seeded random moments, some files replaced on the server between
/// runs: after every kill each `DEST` is one whole version the server served, and the last run
/// leaves every file as the server has it now, never a mix of two versions.
@Suite(.serialized)
struct HeldBodyCrashTests {
    static let count = 160
    static let size = 24 * 1024

    /// Every version served of each file, and the current one.
    final class Versions: @unchecked Sendable {
        var served: [String: [Data]] = [:]
        var current: [String: Data] = [:]
        let site: String
        var serial = 0

        init(site: String) { self.site = site }

        /// Serves `data` under `name` as a new version: written aside, dated a new second, and
        /// renamed into place.
        func publish(_ data: Data, as name: String) throws {
            serial += 1
            let aside = site + "/.next"
            try data.write(to: URL(fileURLWithPath: aside))
            let date = Date(timeIntervalSince1970: 1_700_000_000 + Double(serial * 10))
            try FileManager.default.setAttributes([.modificationDate: date], ofItemAtPath: aside)
            #expect(rename(aside, site + "/" + name) == 0)
            served[name, default: []].append(data)
            current[name] = data
        }
    }

    static func name(_ index: Int) -> String { "s\(index).bin" }

    @Test func shortFilesKilledAtRandomMomentsEndWholeAndCurrent() throws {
        // 24 KiB at 64 KiB/s a connection: the run takes about 7 s on 8 connections.
        let scenario = try SyncScenario(.nginx(site: [:], options: NginxOptions(rateLimit: 64 * 1024)))
        let versions = Versions(site: scenario.directory.path("site"))
        for index in 0..<Self.count {
            try versions.publish(randomData(count: Self.size, seed: UInt64(1_000 + index)), as: Self.name(index))
        }
        try scenario.write(ManifestText(top: ["concurrency: 8"], entries: (0..<Self.count).map { .init(scenario.url("/" + Self.name($0))) }))
        var random = SeededGenerator(seed: 2411)
        for round in 0..<5 {
            if round % 2 == 1 {
                // Every third file gets new bytes of the same length and a later date.
                for index in stride(from: round, to: Self.count, by: 3) {
                    try versions.publish(randomData(count: Self.size, seed: UInt64(5_000 + round * 1_000 + index)), as: Self.name(index))
                }
            }
            let victim = try scenario.start(["sync", "--quiet", "m.yaml"])
            Thread.sleep(forTimeInterval: Double.random(in: 0.3...2.5, using: &random))
            kill(victim.pid, SIGKILL)
            _ = try? victim.wait()
            for index in 0..<Self.count {
                let name = Self.name(index)
                if let dest = scenario.local(name) {
                    #expect(versions.served[name]?.contains(dest) == true, "after kill \(round): \(name) is not one whole served version")
                }
            }
        }
        let last = try scenario.run(["sync", "--quiet", "m.yaml"])
        #expect(last.status == 0, "\(last)")
        for index in 0..<Self.count {
            let name = Self.name(index)
            #expect(scenario.local(name) == versions.current[name], "\(name) is the server's current version")
        }
        #expect(scenario.files().allSatisfy { !$0.hasSuffix(".part") }, "no partial file is left: \(scenario.files())")
    }
}
