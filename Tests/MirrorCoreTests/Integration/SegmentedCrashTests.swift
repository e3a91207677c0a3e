import Foundation
import Testing
@testable import MirrorCore

/// A segmented download killed with SIGKILL at any moment, and the server's file replaced
/// between runs or during one: the next run finishes, `DEST` is always one whole version the
/// server served, and a `.part` with a map holds, in every range the map claims, the bytes of
/// the version the map names (a hole is never taken for data).
@Suite(.serialized)
struct SegmentedCrashTests {
    static let mebibyte = 1 << 20
    static let size = 24 * mebibyte

    /// The served versions, by the ETag nginx gives each (`"mtime-size"` in hex).
    final class Versions: @unchecked Sendable {
        var byETag: [String: Data] = [:]
        var current = Data()
        let scenario: SyncScenario
        var serial = 0

        init(_ scenario: SyncScenario) { self.scenario = scenario }

        /// Serves `data` as a new version: written aside, dated a new second, renamed into place
        /// (requests under way keep the old file, as a mirror's replaced file does).
        func publish(_ data: Data) throws {
            serial += 1
            let site = scenario.directory.path("site")
            let aside = site + "/.next"
            try data.write(to: URL(fileURLWithPath: aside))
            let date = Date(timeIntervalSince1970: 1_700_000_000 + Double(serial * 100))
            try FileManager.default.setAttributes([.modificationDate: date], ofItemAtPath: aside)
            #expect(rename(aside, site + "/big.bin") == 0)
            let etag = "\"" + String(Int(date.timeIntervalSince1970), radix: 16) + "-" + String(data.count, radix: 16) + "\""
            byETag[etag] = data
            current = data
        }

        func isWholeVersion(_ data: Data?) -> Bool {
            guard let data else { return false }
            return byETag.values.contains(data)
        }
    }

    static func scenario() throws -> (SyncScenario, Versions) {
        let scenario = try SyncScenario(.nginx(site: [:], options: NginxOptions(rateLimit: 4 * mebibyte)))
        let versions = Versions(scenario)
        try versions.publish(randomData(count: size, seed: 900))
        try scenario.write(ManifestText(top: ["concurrency: 4", "segment_min: 4MiB"], entries: [.init(scenario.url("/big.bin"))]))
        return (scenario, versions)
    }

    /// What the store and the disk say after a run ended (or was killed): no hole taken for
    /// data, and `DEST` one whole version.
    static func expectConsistent(_ scenario: SyncScenario, _ versions: Versions, _ when: String,
                                 sourceLocation: Testing.SourceLocation = #_sourceLocation) throws {
        if let dest = scenario.local("big.bin") {
            #expect(versions.isWholeVersion(dest), "\(when): DEST is not one whole served version", sourceLocation: sourceLocation)
        }
        let store = try #require(StateStore.open(root: scenario.root, mode: .readWrite).store)
        defer { store.close() }
        guard let part = scenario.local("big.bin.part") else { return }
        if let map = try store.segmentMap(for: "big.bin"), let record = try store.record(for: "big.bin"),
           map.version.matches(record.partial) {
            let version = try #require(map.version.etag.flatMap { versions.byETag[$0] }, "\(when): a map of an unknown version \(map.version)",
                                       sourceLocation: sourceLocation)
            for range in map.durable {
                let claimed = part.subdata(in: Int(range.start)..<Int(range.end))
                #expect(claimed == version.subdata(in: Int(range.start)..<Int(range.end)),
                        "\(when): the map claims \(range) of \(map.version.etag ?? "?"), the .part holds other bytes", sourceLocation: sourceLocation)
            }
        } else if try store.segmentMap(for: "big.bin") == nil, let started = try store.record(for: "big.bin")?.partial,
                  let etag = started.etag, let version = versions.byETag[etag], part.count <= version.count {
            // No map: the .part is resumed by its size, so all of it must be that version's.
            #expect(part == version.prefix(part.count), "\(when): a .part without a map that is not a prefix of its version",
                    sourceLocation: sourceLocation)
        }
    }

    /// Six runs killed at seeded random moments, the file replaced before every other one;
    /// after each, the disk and the store are consistent, and a last run finishes with the
    /// server's current version.
    @Test func killedAtRandomMomentsWithTheRemoteChangingBetweenRuns() throws {
        let (scenario, versions) = try Self.scenario()
        var random = SeededGenerator(seed: 2026)
        for round in 0..<6 {
            if round % 2 == 1 { try versions.publish(randomData(count: Self.size, seed: UInt64(900 + round))) }
            let victim = try scenario.start(["sync", "--quiet", "m.yaml"])
            Thread.sleep(forTimeInterval: Double.random(in: 0.3...1.6, using: &random))
            kill(victim.pid, SIGKILL)
            _ = try? victim.wait()
            try Self.expectConsistent(scenario, versions, "after kill \(round)")
        }
        let last = try scenario.run(["sync", "--quiet", "m.yaml"])
        #expect(last.status == 0, "\(last)")
        #expect(scenario.local("big.bin") == versions.current, "DEST is the server's current version")
        #expect(scenario.local("big.bin.part") == nil)
        let store = try #require(StateStore.open(root: scenario.root, mode: .readWrite).store)
        #expect(try store.segmentMap(for: "big.bin") == nil)
        store.close()
    }

    /// The file replaced while its segments come in: the entry's own GET is fast (8 MiB/s) and
    /// the ranges slow (1 MiB/s), so the lead soon splits a range again and asks for it with
    /// `If-Match` of the old version: 412. Every stream stops, the `.part` and its map go, the
    /// download starts over once, and `DEST` is the new version, never a mix.
    @Test func aRemoteChangedMidDownloadStopsEverySegmentAndStartsOverOnce() throws {
        let rates = """
                limit_rate 8m;
                if ($http_range) {
                    set $limit_rate 1m;
                }
            """
        let scenario = try SyncScenario(.nginx(site: [:], options: NginxOptions(extraServerConfiguration: rates)))
        let versions = Versions(scenario)
        try versions.publish(randomData(count: Self.size, seed: 950))
        let oldETag = try #require(versions.byETag.keys.first)
        try scenario.write(ManifestText(top: ["concurrency: 4", "segment_min: 4MiB"], entries: [.init(scenario.url("/big.bin"))]))
        let running = try scenario.start(["sync", "-v", "m.yaml"])
        let deadline = ContinuousClock.now + .seconds(20)
        var segmented = false
        while !segmented, ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.02)
            if let store = StateStore.open(root: scenario.root, mode: .readWrite).store {
                segmented = (try? store.segmentMap(for: "big.bin")) != nil
                store.close()
            }
        }
        #expect(segmented, "the download was never split")
        // The ranges are under way; the lead reaches its end after about 0.75 s.
        Thread.sleep(forTimeInterval: 0.2)
        try versions.publish(randomData(count: Self.size, seed: 951))
        let result = try running.wait()
        #expect(result.status == 0, "\(result)")
        #expect(scenario.local("big.bin") == versions.current, "DEST is the new version")
        #expect(scenario.local("big.bin.part") == nil)
        let gets = try scenario.nginxRequests().filter { $0.method == "GET" }
        #expect(gets.contains { $0.status == 412 && $0.ifMatch == oldETag }, "\(gets)")
        #expect(gets.filter { $0.range == nil }.count == 2, "one start over: \(gets)")
    }

    /// Killed once the map holds a durable range, the server unchanged: the next run fetches
    /// only what the map lacks, all of it by range requests naming the version, and the file
    /// is whole.
    @Test func aKilledDownloadResumesOnlyTheRangesItsMapLacks() throws {
        // A range is durable from its segment's end to the download's, when the map goes: a
        // look every 50 ms can miss that window on a loaded machine, and then the whole run is
        // made again on a fresh root (at most three times), never judged on a finished one.
        var killed: (scenario: SyncScenario, versions: Versions)?
        for _ in 1...3 where killed == nil {
            let (scenario, versions) = try Self.scenario()
            let victim = try scenario.start(["sync", "--quiet", "m.yaml"])
            let deadline = ContinuousClock.now + .seconds(20)
            var durable: [ByteRange] = []
            while durable.isEmpty, victim.process.isRunning, ContinuousClock.now < deadline {
                Thread.sleep(forTimeInterval: 0.05)
                if let store = StateStore.open(root: scenario.root, mode: .readWrite).store {
                    durable = (try? store.segmentMap(for: "big.bin"))?.durable ?? []
                    store.close()
                }
            }
            if victim.process.isRunning { kill(victim.pid, SIGKILL) }
            _ = try? victim.wait()
            if !durable.isEmpty { killed = (scenario, versions) }
        }
        let (scenario, versions) = try #require(killed, "in three runs the map never recorded a range before the download ended")
        try Self.expectConsistent(scenario, versions, "after the kill")
        let store = try #require(StateStore.open(root: scenario.root, mode: .readWrite).store)
        let map = try #require(try store.segmentMap(for: "big.bin"))
        store.close()
        let missing = ByteRanges.gaps(in: map.durable, total: map.version.total).reduce(0) { $0 + $1.count }

        let secondRun = Date().timeIntervalSince1970
        let result = try scenario.run(["sync", "--quiet", "m.yaml"])
        #expect(result.status == 0, "\(result)")
        #expect(scenario.local("big.bin") == versions.current)
        // The killed run's requests may be logged late: only those begun since count.
        let gets = try scenario.nginxRequests().filter { $0.method == "GET" && $0.startedAt >= secondRun }
        #expect(!gets.isEmpty && gets.allSatisfy { $0.range != nil && $0.ifMatch == map.version.etag }, "\(gets)")
        // Every range asked for lies in a gap of the map, and nginx sent no more of it than was
        // asked. A range cut short by a split is stopped at its new end after what nginx had
        // sent already (as much as the sockets' buffers held), so the total is a little more
        // than the gaps, by an amount only timing decides: it is not bounded here.
        let gaps = ByteRanges.gaps(in: map.durable, total: map.version.total)
        for request in gets {
            let asked = request.range.map { $0.dropFirst("bytes=".count).split(separator: "-", omittingEmptySubsequences: false) } ?? []
            let first = asked.first.flatMap { Int64($0) } ?? -1
            let last = asked.count == 2 ? (asked[1].isEmpty ? map.version.total - 1 : Int64(asked[1]) ?? -1) : -1
            #expect(gaps.contains { $0.start <= first && last < $0.end && first <= last }, "\(request) asks for bytes the map holds: \(map.durable)")
            #expect(Int64(request.bodyBytesSent) <= last - first + 1, "\(request) sent more than it asked for")
        }
        let fetched = gets.reduce(0) { $0 + $1.bodyBytesSent }
        #expect(fetched >= Int(missing), "fetched \(fetched) bytes where the map lacked \(missing)")
    }
}
