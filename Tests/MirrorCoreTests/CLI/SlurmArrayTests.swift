import Foundation
import Testing
@testable import MirrorCore

/// `mirror sync --shard auto` as the tasks of a real Slurm job array (`SlurmCluster`), through
/// examples/slurm/mirror-array.sbatch, into one root shared by the shards, against nginx.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct SlurmArrayTests {
    static let shards = 4
    static let script = InstallTests.packageRoot + "/examples/slurm/mirror-array.sbatch"

    /// Files of many sizes, spread over every shard (checked below), and one large file.
    static let small: [String: Data] = Dictionary(uniqueKeysWithValues: (0..<12).map { index in
        ("tree/part-\(index).bin", randomData(count: 1 + index * 37_003, seed: UInt64(700 + index)))
    })
    static let large = (path: "tree/large.bin", data: randomData(count: 16 << 20, seed: 799))
    static var site: [String: Data] { small.merging([large.path: large.data]) { first, _ in first } }

    /// nginx sends the large file at 512 KiB/s (32 s in all: room for a slow cancel on a busy
    /// machine) to a request without Range, so that a task can be cancelled while its `.part`
    /// grows, and at full speed to a resume.
    static let slowLargeFile = """
        location = /\(large.path) {
            set $rate 512k;
            if ($http_range) {
                set $rate 0;
            }
            limit_rate $rate;
        }
        """

    /// The environment each job gets through sbatch: the built `mirror` first on PATH, and no
    /// proxy for loopback.
    static func jobEnvironment() throws -> [String: String] {
        let binaryDirectory = URL(fileURLWithPath: try MirrorBinary.path()).deletingLastPathComponent().path
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return ["PATH": binaryDirectory + ":" + path, "no_proxy": "*", "NO_PROXY": "*"]
    }

    /// Submits the example script for `m.yaml` as `--array=0-3`, lets `act` act on the job id
    /// while it runs, and waits for every task; returns the job id and its tasks.
    static func runArray(_ cluster: SlurmCluster, _ scenario: SyncScenario, run: Int,
                         whileRunning act: (Int) async throws -> Void = { _ in }) async throws -> (job: Int, tasks: [SlurmArrayTask]) {
        let job = try cluster.submit(script, options: [
            // One CPU a task: the test node may have fewer CPUs than the script asks for.
            "--array=0-\(shards - 1)", "--cpus-per-task=1", "--output=\(scenario.directory.path)/run\(run)-%a.out",
        ], arguments: [scenario.directory.path("m.yaml")], in: scenario.directory.path, environment: try jobEnvironment())
        try await act(job)
        return (job, try await cluster.waitUntilFinished(job, timeout: .seconds(120)))
    }

    /// What the array's tasks printed, for failure messages.
    static func taskOutput(_ scenario: SyncScenario, run: Int) -> String {
        (0..<shards).map { task in
            "--- run \(run) task \(task) ---\n"
                + String(decoding: scenario.directory.contents(of: "run\(run)-\(task).out") ?? Data(), as: UTF8.self)
        }.joined(separator: "\n")
    }

    /// Waits (up to `timeout`) until the file at `path` holds at least `bytes` bytes.
    static func waitUntilFile(_ path: String, holds bytes: Int, timeout: Duration) async throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
            if size >= bytes { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    /// A four-task array syncs a pinned manifest into one root while the task holding the large
    /// file is cancelled (`scancel`) mid-transfer; the array submitted again finishes it with a
    /// Range request, a third time transfers nothing, and an unsharded verify passes. nginx
    /// sees each file's GET once, the large file's twice: from 0, then from where it stopped.
    @Test func arrayShardsFetchEachFileOnceResumeACancelledTaskAndVerify() async throws {
        let scenario = try SyncScenario(.nginx(site: Self.site, options: NginxOptions(extraServerConfiguration: Self.slowLargeFile)))
        let entries = Self.site.keys.sorted().map { path -> ManifestText.Entry in
            let data = Self.site[path]!
            return .init(scenario.url("/" + path), dest: path, "sha256: \(DigestHasher.hex(of: data))", "size: \(data.count)")
        }
        try scenario.write(ManifestText(entries: entries))
        let shardOf = Dictionary(uniqueKeysWithValues: Self.site.keys.map { ($0, ShardHash.shard(ofDest: $0, count: Self.shards)) })
        try #require(Set(shardOf.values) == Set(0..<Self.shards), "every shard has files: \(shardOf)")
        let largeShard = try #require(shardOf[Self.large.path])

        let cluster = try await SlurmCluster.start()
        defer { cluster.stop() }

        // Run 1: cancel the large file's task once its partial file has grown.
        let partial = scenario.rootPath(Self.large.path + ".part")
        let first = try await Self.runArray(cluster, scenario, run: 1) { job in
            // mirror writes in large blocks: the first one lands after about 2 s.
            let growing = try await Self.waitUntilFile(partial, holds: 1, timeout: .seconds(60))
            try #require(growing, "the large file's .part did not grow: \(Self.taskOutput(scenario, run: 1))\n\(cluster.logs)")
            try cluster.cancel(job, task: largeShard)
        }
        let context1 = "\(first.tasks)\n\(Self.taskOutput(scenario, run: 1))"
        for task in first.tasks {
            #expect(task.state == (task.index == largeShard ? "CANCELLED" : "COMPLETED"), "\(context1)")
            if task.index != largeShard { #expect(task.exitStatus == 0, "\(context1)") }
        }
        let kept = try #require(scenario.directory.contents(of: "root/" + Self.large.path + ".part"), "the partial file is kept")
        #expect(kept.count > 0 && kept.count < Self.large.data.count)
        #expect(kept == Self.large.data.prefix(kept.count))
        #expect(scenario.local(Self.large.path) == nil, "no half-written file under its final name")
        // The other files of the cancelled shard may or may not have finished before the cancel.
        for (path, data) in Self.small where shardOf[path] != largeShard {
            #expect(scenario.local(path) == data, "\(path) after run 1")
        }

        // Run 2: the same array again; the cancelled shard resumes, the others have nothing to do.
        let second = try await Self.runArray(cluster, scenario, run: 2)
        let context2 = "\(second.tasks)\n\(Self.taskOutput(scenario, run: 2))"
        #expect(second.tasks.map(\.state) == Array(repeating: "COMPLETED", count: Self.shards), "\(context2)")
        #expect(second.tasks.map(\.exitStatus) == Array(repeating: 0, count: Self.shards), "\(context2)")
        #expect(scenario.files().filter { $0.hasSuffix(".bin") || $0.hasSuffix(".part") }.sorted() == Self.site.keys.sorted(),
                "the union of the shards is the served tree, no partial file left")
        for (path, data) in Self.site {
            #expect(scenario.local(path) == data, "\(path) is byte-identical to the served file")
        }

        let afterTwoRuns = try scenario.nginxRequests()
        let gets = afterTwoRuns.filter { $0.method == "GET" }
        for path in Self.small.keys {
            let fetched = gets.filter { $0.uri == "/" + path }
            #expect(fetched.count == 1 && fetched.first?.status == 200 && fetched.first?.range == nil, "\(path): \(fetched)")
        }
        let largeGets = gets.filter { $0.uri == "/" + Self.large.path }
        try #require(largeGets.count == 2, "the large file: the cancelled GET and its resume: \(largeGets)")
        #expect(largeGets[0].range == nil && largeGets[0].bodyBytesSent < Self.large.data.count, "\(largeGets[0])")
        #expect(largeGets[1].range == "bytes=\(kept.count)-", "resumed where the cancelled task stopped: \(largeGets[1])")
        #expect(largeGets[1].ifRange != nil, "with the validator recorded when it started: \(largeGets[1])")
        #expect(largeGets[1].status == 206 && largeGets[1].bodyBytesSent == Self.large.data.count - kept.count, "\(largeGets[1])")

        // Run 3: nothing left to transfer.
        let third = try await Self.runArray(cluster, scenario, run: 3)
        let context3 = "\(third.tasks)\n\(Self.taskOutput(scenario, run: 3))"
        #expect(third.tasks.map(\.state) == Array(repeating: "COMPLETED", count: Self.shards), "\(context3)")
        #expect(third.tasks.map(\.exitStatus) == Array(repeating: 0, count: Self.shards), "\(context3)")
        let thirdRequests = try scenario.nginxRequests().dropFirst(afterTwoRuns.count)
        #expect(!thirdRequests.contains { $0.method == "GET" }, "\(Array(thirdRequests))")
        for path in Self.site.keys {
            #expect(thirdRequests.filter { $0.uri == "/" + path }.count <= 1, "at most one probe of \(path)")
        }

        // The example script's --report files: run 1's merge to the cancelled task's 143, run 3's to 0.
        let cancelledReport = try scenario.run(["report"] + Self.reports(of: first.job))
        #expect(cancelledReport.status == 143, "\(cancelledReport)")
        let merged = try scenario.run(["report"] + Self.reports(of: third.job))
        #expect(merged.status == 0, "\(merged)")

        // Unsharded, offline: every shard's store is read, every pin checked.
        let verify = try scenario.run(["verify", "m.yaml"])
        #expect(verify.status == 0, "\(verify)")
    }

    /// The `--report` files the example script has the tasks of array job `job` write.
    static func reports(of job: Int) -> [String] {
        (0..<shards).map { "mirror-report-\(job)_\($0).json" }
    }

    /// The four tasks of an array, each provisioning a root of its own from one shared cache
    /// (the cluster's nodes filling one file system): every pinned file is fetched once in all,
    /// and no partial blob is left.
    @Test func arrayTasksFillingOneCacheFetchEachPinnedFileOnce() async throws {
        let files = Self.small.sorted { $0.key < $1.key }.prefix(8)
        // 1 MB/s a connection: the tasks overlap on the files.
        let scenario = try SyncScenario(.nginx(site: Dictionary(uniqueKeysWithValues: files.map { ($0.key, $0.value) }),
                                               options: NginxOptions(rateLimit: 1_000_000)))
        try scenario.write(ManifestText(root: "unused", entries: files.map { path, data in
            .init(scenario.url("/" + path), dest: path, "sha256: \(DigestHasher.hex(of: data))")
        }))
        let script = try scenario.directory.write(Data("""
            #!/bin/sh
            exec mirror sync -q --cache "$1/cache" --root "$1/roots/$SLURM_ARRAY_TASK_ID" "$1/m.yaml"

            """.utf8), to: "provision.sh")
        chmod(script, 0o755)
        let cluster = try await SlurmCluster.start()
        defer { cluster.stop() }
        let job = try cluster.submit(script, options: [
            "--array=0-\(Self.shards - 1)", "--cpus-per-task=1", "--output=\(scenario.directory.path)/cache-%a.out",
        ], arguments: [scenario.directory.path], in: scenario.directory.path, environment: try Self.jobEnvironment())
        let tasks = try await cluster.waitUntilFinished(job, timeout: .seconds(120))
        let output = (0..<Self.shards).map { String(decoding: scenario.directory.contents(of: "cache-\($0).out") ?? Data(), as: UTF8.self) }
        #expect(tasks.map(\.exitStatus) == Array(repeating: 0, count: Self.shards), "\(tasks)\n\(output)")
        for task in 0..<Self.shards {
            for (path, data) in files {
                #expect(scenario.directory.contents(of: "roots/\(task)/\(path)") == data, "task \(task): \(path)")
            }
        }
        let gets = try scenario.nginxRequests().filter { $0.method == "GET" && $0.status == 200 }.map(\.uri)
        #expect(gets.sorted() == files.map { "/" + $0.key }.sorted(), "each pinned file fetched once in all: \(gets.sorted())")
        let temporary = (try? FileManager.default.contentsOfDirectory(atPath: scenario.directory.path("cache/tmp"))) ?? []
        #expect(temporary.isEmpty, "no partial blob: \(temporary)")
    }
}
