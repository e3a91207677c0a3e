import Foundation
import Testing
@testable import MirrorCore

/// `--shard K/N` against a real nginx, through the built binary: shards of one manifest run as
/// separate processes into one root, each with its own lock and state store, and unsharded
/// runs afterwards see their work.
@Suite(.serialized)
struct ShardTests {
    static let site: [String: Data] = Dictionary(uniqueKeysWithValues: (0..<40).map { index in
        ("set/file-\(index).bin", randomData(count: 20_000 + index * 997, seed: UInt64(300 + index)))
    })

    /// nginx serving `site`; `m.yaml` lists every file, pinned by sha256 and size when `pinned`.
    static func setUp(pinned: Bool = true) throws -> SyncScenario {
        let scenario = try SyncScenario(.nginx(site: site))
        let entries = site.keys.sorted().map { path -> ManifestText.Entry in
            let data = site[path]!
            let pins = pinned ? ["sha256: \(DigestHasher.hex(of: data))", "size: \(data.count)"] : []
            return .init(scenario.url("/" + path), dest: String(path.dropFirst("set/".count)), lines: pins)
        }
        try scenario.write(ManifestText(entries: entries))
        return scenario
    }

    static func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    static func stateFiles(_ scenario: SyncScenario) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: scenario.rootPath(".mirror"))) ?? [])
            .filter { $0.hasSuffix(".sqlite") }.sorted()
    }

    /// Four shard processes at once into one root: together they fetch every file exactly
    /// once, each writes only its own store, and an unsharded plan, verify and sync afterwards
    /// take their records as known: no request at all for the pinned manifest, no transfer.
    @Test func fourShardProcessesShareOneRootAndFetchEachFileOnce() throws {
        let scenario = try Self.setUp()
        let running = try (0..<4).map { shard in
            try scenario.start(["sync", "m.yaml", "--shard", "\(shard)/4", "--quiet", "--report", "r\(shard).json"])
        }
        for (shard, process) in running.enumerated() {
            let result = try process.wait()
            // No --wait-lock: a shard blocked by another would have exited 3.
            #expect(result.status == 0, "shard \(shard): \(result)")
        }
        for (path, data) in Self.site {
            #expect(scenario.local(String(path.dropFirst("set/".count)))?.fingerprint == data.fingerprint, "\(path)")
        }
        #expect(scenario.files().filter { !$0.hasSuffix("/") && $0.hasSuffix(".bin") }.count == Self.site.count)
        let gets = try scenario.nginxRequests().filter { $0.method == "GET" }
        #expect(gets.count == Self.site.count, "\(gets)")
        #expect(Set(gets.map(\.uri)) == Set(Self.site.keys.map { "/" + $0 }))
        #expect(Self.stateFiles(scenario) == (0..<4).map { "state.shard-\($0)-of-4.sqlite" })

        scenario.nginx.clearLog()
        let plan = try scenario.run(["plan", "m.yaml", "--json"])
        #expect(plan.status == 0, "\(plan)")
        let summary = try #require(try Self.json(plan.stdout)["summary"] as? [String: Any])
        #expect(summary["skip"] as? Int == Self.site.count, "\(plan.stdout)")
        let verify = try scenario.run(["verify", "m.yaml", "--json"])
        #expect(verify.status == 0, "\(verify)")
        let verified = try #require(try Self.json(verify.stdout)["entries"] as? [[String: Any]])
        #expect(verified.allSatisfy { $0["hash_from_store"] as? Bool == true }, "the shards' stores are read: \(verify.stdout)")
        let sync = try scenario.run(["sync", "m.yaml", "--json"])
        #expect(sync.status == 0, "\(sync)")
        let synced = try #require(try Self.json(sync.stdout)["summary"] as? [String: Any])
        #expect(synced["transferred"] as? Int == 0 && synced["skipped"] as? Int == Self.site.count, "\(sync.stdout)")
        // Pinned, and known from the shards' records: not one request after the shards.
        #expect(try scenario.nginxRequests() == [])

        let report = try scenario.run(["report", "r0.json", "r1.json", "r2.json", "r3.json", "--json"])
        #expect(report.status == 0, "\(report)")
        let merged = try #require(try Self.json(report.stdout)["summary"] as? [String: Any])
        #expect(merged["transferred"] as? Int == Self.site.count)
        #expect(merged["bytes_transferred"] as? Int == Self.site.values.map(\.count).reduce(0, +))
    }

    /// A shard's run lock is its own: while one shard runs, every other shard runs, but the
    /// same shard and an unsharded run are refused (exit 3); while an unsharded run holds the
    /// root, every shard is refused. Held by this test, so nothing depends on timing.
    @Test func aShardBlocksOnlyItselfAndUnshardedRuns() async throws {
        let scenario = try Self.setUp(pinned: false)
        do {
            let held = try await RunLock.acquire(root: scenario.root, shard: ShardSelection(index: 0, count: 4))
            let other = try scenario.run(["sync", "m.yaml", "--shard", "1/4", "--quiet"])
            #expect(other.status == 0, "\(other)")
            let same = try scenario.run(["sync", "m.yaml", "--shard", "0/4", "--report", "r0.json"])
            #expect(same.status == 3, "\(same)")
            #expect(same.stderr.contains("lock.shard-0-of-4"), "\(same)")
            // The refused shard still leaves its report, and the merge ends as it did.
            let report = try Self.json(scenario.text(of: "r0.json"))
            #expect(report["exit_status"] as? Int == 3 && (report["entries"] as? [Any])?.isEmpty == true, "\(report)")
            let merged = try scenario.run(["report", "r0.json"])
            #expect(merged.status == 3, "\(merged)")
            let unsharded = try scenario.run(["sync", "m.yaml"])
            #expect(unsharded.status == 3, "\(unsharded)")
            let otherCount = try scenario.run(["sync", "m.yaml", "--shard", "2/4", "--quiet"])
            #expect(otherCount.status == 0, "\(otherCount)")
            // Another layout would work on the same files under other locks and stores.
            for layout in [["--shard", "0/2"], ["--shard", "1/4", "--shard-by", "bytes"]] {
                let refused = try scenario.run(["sync", "m.yaml"] + layout)
                #expect(refused.status == 3, "\(layout): \(refused)")
                #expect(refused.stderr.contains("shards of another layout (4 shards by hash)"), "\(layout): \(refused)")
            }
            withExtendedLifetime(held) {}
        }
        do {
            let held = try await RunLock.acquire(root: scenario.root)
            let shard = try scenario.run(["sync", "m.yaml", "--shard", "3/4"])
            #expect(shard.status == 3, "\(shard)")
            #expect(shard.stderr.contains("process \(getpid())"), "the unsharded holder is named: \(shard)")
            withExtendedLifetime(held) {}
        }
        let rest = try scenario.run(["sync", "m.yaml", "--json"])
        #expect(rest.status == 0, "\(rest)")
        // Shards 1 and 2 are known from their stores: their files are asked for once, on the
        // condition that they changed, and answered 304; only 0 and 3 are fetched now. Every
        // file is fetched once in all, and nothing is probed.
        let requests = try scenario.nginxRequests()
        #expect(requests.allSatisfy { $0.method == "GET" }, "\(requests)")
        let fetched = requests.filter { $0.status == 200 }.map(\.uri)
        #expect(fetched.count == Self.site.count && Set(fetched).count == Self.site.count, "\(requests)")
        let unchanged = requests.filter { $0.status == 304 }.map(\.uri)
        #expect(!unchanged.isEmpty && Set(unchanged).count == unchanged.count, "\(requests)")
        #expect(requests.count == fetched.count + unchanged.count, "\(requests)")
    }

    @Test func shardAutoReadsTheEngineAndWithoutShardTheEnvironmentIsIgnored() throws {
        let scenario = try Self.setUp()
        let slurm = ["SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "4"]
        let plan = try scenario.run(["plan", "m.yaml", "--shard", "auto", "--json"], environment: slurm)
        #expect(plan.status == 0, "\(plan)")
        let document = try Self.json(plan.stdout)
        let shard = try #require(document["shard"] as? [String: Any])
        #expect(shard["index"] as? Int == 2 && shard["count"] as? Int == 4)
        let entries = try #require(document["entries"] as? [[String: Any]])
        let expected = Self.site.keys.map { String($0.dropFirst("set/".count)) }.filter { ShardHash.shard(ofDest: $0, count: 4) == 2 }
        #expect(Set(entries.compactMap { $0["dest"] as? String }) == Set(expected))
        let shards = try #require(shard["shards"] as? [[String: Any]])
        #expect(shards.compactMap { $0["entries"] as? Int }.reduce(0, +) == Self.site.count)
        #expect(shards.compactMap { $0["bytes"] as? Int }.reduce(0, +) == Self.site.values.map(\.count).reduce(0, +))

        let text = try scenario.run(["plan", "m.yaml", "--shard", "auto"], environment: slurm)
        #expect(text.stdout.contains("shard 2/4 (by hash) of 40 entries"), "\(text)")

        let kubernetes = try scenario.run(["plan", "m.yaml", "--shard", "auto"], environment: ["JOB_COMPLETION_INDEX": "1"])
        #expect(kubernetes.status == 2, "\(kubernetes)")
        #expect(kubernetes.stderr.contains("--shard-count"), "\(kubernetes)")
        let withCount = try scenario.run(["plan", "m.yaml", "--shard", "auto", "--shard-count", "2", "--json"], environment: ["JOB_COMPLETION_INDEX": "1"])
        #expect(withCount.status == 0, "\(withCount)")
        #expect((try Self.json(withCount.stdout)["shard"] as? [String: Any])?["index"] as? Int == 1)

        let none = try scenario.run(["sync", "m.yaml", "--shard", "auto"])
        #expect(none.status == 2, "\(none)")
        for name in ["SLURM_ARRAY_TASK_ID", "AWS_BATCH_JOB_ARRAY_INDEX", "JOB_COMPLETION_INDEX"] { #expect(none.stderr.contains(name), "\(none)") }

        let ignored = try scenario.run(["plan", "m.yaml", "--json"], environment: slurm)
        #expect(ignored.status == 0, "\(ignored)")
        let all = try Self.json(ignored.stdout)
        #expect(all["shard"] == nil)
        #expect((all["entries"] as? [Any])?.count == Self.site.count)
        #expect(try scenario.nginxRequests().filter { $0.method == "GET" } == [], "plans only")
    }

    @Test func pruneWithShardIsAUsageErrorAndTouchesNothing() throws {
        let scenario = try Self.setUp()
        for command in ["sync", "plan"] {
            let result = try scenario.run([command, "m.yaml", "--shard", "0/2", "--prune"])
            #expect(result.status == 2, "\(command): \(result)")
            #expect(result.stderr.contains("--prune cannot be used with --shard"), "\(result)")
        }
        #expect(try scenario.nginxRequests() == [])
        #expect(scenario.files().isEmpty)
    }

    /// An unsharded `sync --prune` after a sharded run knows the shards' files as mirror's:
    /// one the manifest dropped is deleted, with its record in the shard's store.
    @Test func anUnshardedPruneDeletesWhatOnlyAShardRecorded() throws {
        let scenario = try Self.setUp(pinned: false)
        for shard in 0..<2 {
            let result = try scenario.run(["sync", "m.yaml", "--shard", "\(shard)/2", "--quiet"])
            #expect(result.status == 0, "\(result)")
        }
        let dropped = "file-7.bin"
        let owner = ShardHash.shard(ofDest: dropped, count: 2)
        let kept = Self.site.keys.sorted().filter { $0 != "set/" + dropped }
        try scenario.write(ManifestText(entries: kept.map { .init(scenario.url("/" + $0), dest: String($0.dropFirst("set/".count))) }))
        try scenario.put(Data("mine".utf8), at: "mine.txt")

        let plan = try scenario.run(["plan", "m.yaml", "--prune", "--json"])
        #expect(plan.status == 0, "\(plan)")
        let rows = try #require(try Self.json(plan.stdout)["entries"] as? [[String: Any]])
        #expect(rows.filter { $0["action"] as? String == "delete" }.compactMap { $0["dest"] as? String } == [dropped], "\(plan.stdout)")

        let prune = try scenario.run(["sync", "m.yaml", "--prune", "--quiet"])
        #expect(prune.status == 0, "\(prune)")
        #expect(scenario.local(dropped) == nil)
        #expect(scenario.local("mine.txt") == Data("mine".utf8))
        #expect(scenario.local("file-8.bin") != nil)
        let store = try #require(StateStore.open(root: scenario.root, mode: .readOnly, shard: ShardSelection(index: owner, count: 2)).store)
        #expect(try store.record(for: dropped) == nil)
        #expect(try store.record(for: kept.map { String($0.dropFirst("set/".count)) }.first { ShardHash.shard(ofDest: $0, count: 2) == owner }!) != nil)
    }

    /// `lock --shard`: shards pinning one manifest file at the same time each add their pins
    /// to the others'.
    @Test func shardsLockingOneManifestTogetherPinEveryEntry() throws {
        let scenario = try Self.setUp(pinned: false)
        let running = try (0..<3).map { try scenario.start(["lock", "m.yaml", "--shard", "\($0)/3", "--quiet"]) }
        for process in running {
            let result = try process.wait()
            #expect(result.status == 0, "\(result)")
        }
        let manifest = try ManifestLoader.load(path: scenario.directory.path("m.yaml"))
        for entry in manifest.entries {
            let data = try #require(Self.site["set/" + entry.dest])
            #expect(entry.digest == DigestHasher.hex(of: data) && entry.size == Int64(data.count), "\(entry.dest)")
        }
        // Pinned sizes balance the shards by bytes.
        let plan = try scenario.run(["plan", "m.yaml", "--shard", "0/3", "--shard-by", "bytes", "--json"])
        let shards = try #require((try Self.json(plan.stdout)["shard"] as? [String: Any])?["shards"] as? [[String: Any]])
        let bytes = shards.compactMap { $0["bytes"] as? Int }
        #expect(bytes.count == 3 && bytes.max()! - bytes.min()! <= 60_000, "\(bytes)")
    }

    /// The shards' reports merge into one exit status, and the failed entries become a
    /// manifest that loads and, once the server has the file, syncs just them.
    @Test func reportsMergeAndTheFailedManifestReSyncs() throws {
        let scenario = try SyncScenario(.nginx(site: ["a.bin": randomData(count: 30_000, seed: 91), "b.bin": randomData(count: 40_000, seed: 92)]))
        let late = randomData(count: 25_000, seed: 93)
        try scenario.write(ManifestText(entries: [
            .init(scenario.url("/a.bin"), dest: "a.bin"),
            .init(scenario.url("/b.bin"), dest: "sub/b.bin"),
            .init(scenario.url("/later/${LATE_NAME}.bin"), dest: "\"late: one.bin\"", "sha256: \(DigestHasher.hex(of: late))", "size: \(late.count)"),
        ]))
        let environment = ["LATE_NAME": "late"]
        var statuses: [Int32] = []
        for shard in 0..<2 {
            statuses.append(try scenario.run(["sync", "m.yaml", "--shard", "\(shard)/2", "--quiet", "--report", "r\(shard).json"], environment: environment).status)
        }
        #expect(statuses.sorted() == [0, 1], "\(statuses)")

        let merged = try scenario.run(["report", "r0.json", "r1.json", "--failed-manifest", "failed.yaml"])
        #expect(merged.status == 1, "\(merged)")
        #expect(merged.stderr.contains("FAILED late: one.bin"), "\(merged)")
        let failed = try ManifestLoader.load(path: scenario.directory.path("failed.yaml"), environment: environment)
        #expect(failed.root == scenario.root)
        #expect(failed.entries.map(\.dest) == ["late: one.bin"])
        #expect(failed.entries[0].url.display == scenario.url("/later/${LATE_NAME}.bin"))
        #expect(failed.entries[0].digest == DigestHasher.hex(of: late) && failed.entries[0].size == Int64(late.count))

        _ = try scenario.directory.write(late, to: "site/later/late.bin")
        scenario.nginx.clearLog()
        let rerun = try scenario.run(["sync", "failed.yaml", "--quiet"], environment: environment)
        #expect(rerun.status == 0, "\(rerun)")
        #expect(scenario.local("late: one.bin")?.fingerprint == late.fingerprint)
        #expect(try scenario.nginxRequests().filter { $0.method == "GET" }.map(\.uri) == ["/later/late.bin"])

        let one = try scenario.run(["report", "r0.json"])
        #expect(one.status == 1, "a shard's report is missing: \(one)")
        #expect(one.stderr.contains("no report of shard 1/2"), "\(one)")
        let twice = try scenario.run(["report", "r0.json", "r0.json"])
        #expect(twice.status == 2, "\(twice)")
        try scenario.write(text: "{\"entries\": []}", to: "bad.json")
        let bad = try scenario.run(["report", "r0.json", "bad.json"])
        #expect(bad.status == 2, "\(bad)")
        #expect(bad.stderr.contains("bad.json"), "\(bad)")
    }

    /// A shard's pins are made from what it downloaded: when its entry's url is changed in the
    /// manifest while it syncs, they are not written under the new url.
    @Test func aShardDoesNotPinAnEntryChangedWhileItSynced() throws {
        let slow = randomData(count: 1024 * 1024, seed: 390)
        let scenario = try SyncScenario(.nginx(site: ["slow.bin": slow, "other.bin": slow], options: NginxOptions(rateLimit: 256 * 1024)))
        try scenario.write(ManifestText(entries: [.init(scenario.url("/slow.bin"), dest: "slow.bin")]))
        let running = try scenario.start(["lock", "m.yaml", "--shard", "0/1"])
        // nginx sends the first 256 KiB at once, then 256 KiB/s: the partial file appears at once.
        let deadline = ContinuousClock.now + .seconds(20)
        while !FileManager.default.fileExists(atPath: scenario.rootPath("slow.bin.part")), ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.02)
        }
        try scenario.write(ManifestText(entries: [.init(scenario.url("/other.bin"), dest: "slow.bin")]))
        let result = try running.wait()
        #expect(result.status == 2, "\(result)")
        #expect(result.stderr.contains("the entry for `slow.bin` changed in m.yaml while it was being synced"), "\(result)")
        #expect(!scenario.text(of: "m.yaml").contains("sha256:"), "no pin written: \(scenario.text(of: "m.yaml"))")
    }
}
