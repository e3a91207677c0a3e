import Foundation
import Testing
@testable import MirrorCore

/// Which shard each entry is in: the hash pinned to known digests, exact partitions, stability,
/// the bytes balance, and `--shard auto`'s reading of the batch engines' variables.
struct ShardingTests {
    static func entry(_ dest: String, size: Int64? = nil) -> Entry {
        let url = "http://127.0.0.1:1/" + dest
        return Entry(url: RemoteURL(string: url, written: url), dest: dest, size: size,
                     location: SourceLocation(file: "m.yaml", line: 1, column: 1))
    }

    static func manifest(_ dests: [String]) -> Manifest {
        Manifest(path: "m.yaml", version: 1, root: "/tmp/root", concurrency: 4,
                 connectivity: ConnectivitySettings(), allowFile: false, entries: dests.map { entry($0) })
    }

    /// The published rule, pinned forever: first 8 bytes of SHA-256(dest), big-endian, mod N.
    /// (`printf %s "$dest" | sha256sum | cut -c1-16` gives the key.)
    @Test(arguments: [
        ("a.bin", 0x4fef_9cff_ec13_baaa as UInt64, [0, 0, 2, 2, 2, 10, 10]),
        ("d/f1.bin", 0x5c33_0593_e9be_58bd, [0, 1, 2, 1, 1, 13, 45]),
        ("data/2024/01/part-00000.parquet", 0xc5bb_bc7b_4339_a6dd, [0, 1, 0, 1, 4, 13, 1]),
        ("é/ü.txt", 0xabad_9726_edb0_0d82, [0, 0, 0, 2, 3, 2, 54]),
        // The same name in decomposed form is other bytes, so another key: no normalisation.
        ("e\u{301}.txt", 0x5c89_df12_4ca0_82cd, [0, 1, 0, 1, 2, 13, 21]),
        ("x", 0x2d71_1642_b726_b044, [0, 0, 0, 0, 1, 4, 76]),
    ])
    func shardHashIsTheFirstEightBytesOfSHA256OfDestModN(dest: String, key: UInt64, shards: [Int]) {
        #expect(ShardHash.key(ofDest: dest) == key)
        for (count, shard) in zip([1, 2, 3, 4, 7, 16, 100], shards) {
            #expect(ShardHash.shard(ofDest: dest, count: count) == shard, "\(dest) of \(count)")
        }
    }

    @Test(arguments: [ShardBalance.hash, .bytes])
    func shardsPartitionTheManifestExactly(balance: ShardBalance) {
        var manifest = Self.manifest((0..<500).map { "dir\($0 % 7)/file-\($0).bin" })
        for index in manifest.entries.indices where index % 3 != 0 { manifest.entries[index].size = Int64(index * 37 % 1000) }
        for count in [1, 2, 3, 4, 7, 16, 100] {
            var seen: [String] = []
            var totals: [ShardTotals] = []
            for index in 0..<count {
                let (shard, all) = manifest.selecting(ShardSelection(index: index, count: count)!, by: balance)
                #expect(shard.shard == ShardSelection(index: index, count: count))
                #expect(all[index].entries == shard.entries.count)
                // Manifest order is kept within a shard.
                let positions = shard.entries.map { entry in manifest.entries.firstIndex { $0.dest == entry.dest }! }
                #expect(positions == positions.sorted())
                seen += shard.entries.map(\.dest)
                totals = all
            }
            #expect(seen.count == manifest.entries.count, "no entry in two shards of \(count)")
            #expect(Set(seen) == Set(manifest.entries.map(\.dest)), "every entry in a shard of \(count)")
            #expect(totals.map(\.entries).reduce(0, +) == manifest.entries.count)
            #expect(totals.map(\.pinnedBytes).reduce(0, +) == manifest.entries.compactMap(\.size).reduce(0, +))
        }
    }

    @Test func addingOrRemovingEntriesMovesNoOtherEntry() {
        let before = (0..<300).map { "old/\($0)" }
        let after = Array(before.dropFirst(50)) + (0..<200).map { "new/\($0)" }
        for count in [2, 5, 16] {
            let first = ShardAssignment(entries: Self.manifest(before).entries, count: count, balance: .hash)
            let second = ShardAssignment(entries: Self.manifest(after).entries, count: count, balance: .hash)
            for (index, dest) in before.enumerated() {
                guard let moved = after.firstIndex(of: dest) else { continue }
                #expect(first.shard(ofEntryAt: index) == second.shard(ofEntryAt: moved), "\(dest) of \(count)")
            }
        }
    }

    /// Largest first (ties by dest bytes), each to the lightest shard (ties to the lowest
    /// index); entries without a size by their hash, adding no bytes.
    @Test func balancingByBytesIsGreedyLargestFirstAndDeterministic() {
        let entries: [(dest: String, size: Int64?)] = [
            ("small", 10), ("huge", 100), ("b-fifty", 50), ("mid", 60), ("a-fifty", 50), ("forty", 40), ("x", nil),
        ]
        // huge → 0 (0/0, lowest), mid → 1, a-fifty → 2, b-fifty → 2 (50 < 60 < 100), forty → 1
        // (60 < 100 = 100), small → 0 (100 = 100, lowest index); x by its hash of 3.
        let shards = ShardAssignment.balancedByBytes(entries, count: 3)
        #expect(shards == [0, 0, 2, 1, 2, 1, ShardHash.shard(ofDest: "x", count: 3)])
        // The same whatever order the manifest lists them in.
        let reversed = ShardAssignment.balancedByBytes(entries.reversed(), count: 3)
        #expect(Array(reversed.reversed()) == shards)
        // A few huge files spread over the shards rather than following their hashes.
        let skewed: [(dest: String, size: Int64?)] = (0..<8).map { ("big\($0)", 1_000_000) } + (0..<80).map { ("s\($0)", 1000) }
        var loads = [Int64](repeating: 0, count: 8)
        for (entry, shard) in zip(skewed, ShardAssignment.balancedByBytes(skewed, count: 8)) { loads[shard] += entry.size! }
        #expect(loads.max()! - loads.min()! <= 1000)
    }

    @Test(arguments: [
        ("0/4", ShardSelection(index: 0, count: 4)), ("3/4", ShardSelection(index: 3, count: 4)),
        ("0/1", ShardSelection(index: 0, count: 1)), ("4/4", nil), ("1/0", nil), ("-1/4", nil), ("+1/4", nil),
        (" 1/4", nil), ("1/4/8", nil), ("1", nil), ("a/b", nil), ("0x1/4", nil), ("0/100001", nil), ("", nil),
    ])
    func shardArgumentIsKOfNWithKBelowN(text: String, expected: ShardSelection?) {
        #expect(ShardSelection(parsing: text) == expected)
    }

    struct AutoCase: Sendable, CustomStringConvertible {
        var name: String
        var environment: [String: String]
        var shardCount: Int?
        var expected: Result<ShardSelection, ShardEnvironmentError>
        var description: String { name }
    }

    static let autoCases: [AutoCase] = [
        AutoCase(name: "slurm 0-3", environment: ["SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "3"],
                 expected: .success(ShardSelection(index: 2, count: 4)!)),
        AutoCase(name: "slurm 1-4 offsets by the min", environment: ["SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "4"],
                 expected: .success(ShardSelection(index: 0, count: 4)!)),
        AutoCase(name: "slurm 1-4, last task", environment: ["SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "1"],
                 expected: .success(ShardSelection(index: 3, count: 4)!)),
        AutoCase(name: "slurm without min", environment: ["SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "4"],
                 expected: .success(ShardSelection(index: 3, count: 4)!)),
        AutoCase(name: "slurm step 1 is fine", environment: ["SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "2", "SLURM_ARRAY_TASK_STEP": "1"],
                 expected: .success(ShardSelection(index: 0, count: 2)!)),
        AutoCase(name: "slurm stepped", environment: ["SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "6", "SLURM_ARRAY_TASK_STEP": "2"],
                 expected: .failure(.steppedArray(step: "2"))),
        AutoCase(name: "slurm with gaps (--array=1,5)", environment: ["SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_COUNT": "2", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "5"],
                 expected: .failure(.gappedArray(min: 1, max: 5, count: 2))),
        AutoCase(name: "slurm without count", environment: ["SLURM_ARRAY_TASK_ID": "1"],
                 expected: .failure(.missing("SLURM_ARRAY_TASK_COUNT", with: "SLURM_ARRAY_TASK_ID"))),
        AutoCase(name: "slurm count disagrees with --shard-count", environment: ["SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "4"], shardCount: 8,
                 expected: .failure(.countDisagrees(variable: "SLURM_ARRAY_TASK_COUNT", value: 4, shardCount: 8))),
        AutoCase(name: "slurm count agrees with --shard-count", environment: ["SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "4"], shardCount: 4,
                 expected: .success(ShardSelection(index: 1, count: 4)!)),
        AutoCase(name: "slurm id below min", environment: ["SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "1"],
                 expected: .failure(.outOfRange(index: -1, count: 4, variables: "SLURM_ARRAY_TASK_ID=0 minus SLURM_ARRAY_TASK_MIN=1"))),
        AutoCase(name: "slurm id not a number", environment: ["SLURM_ARRAY_TASK_ID": "x", "SLURM_ARRAY_TASK_COUNT": "4"],
                 expected: .failure(.notANumber("SLURM_ARRAY_TASK_ID", "x"))),
        AutoCase(name: "aws", environment: ["AWS_BATCH_JOB_ARRAY_INDEX": "7", "AWS_BATCH_JOB_ARRAY_SIZE": "10"],
                 expected: .success(ShardSelection(index: 7, count: 10)!)),
        AutoCase(name: "aws without size takes --shard-count", environment: ["AWS_BATCH_JOB_ARRAY_INDEX": "7"], shardCount: 10,
                 expected: .success(ShardSelection(index: 7, count: 10)!)),
        AutoCase(name: "aws without size or --shard-count", environment: ["AWS_BATCH_JOB_ARRAY_INDEX": "7"],
                 expected: .failure(.countNeeded(indexVariable: "AWS_BATCH_JOB_ARRAY_INDEX"))),
        AutoCase(name: "aws index past size", environment: ["AWS_BATCH_JOB_ARRAY_INDEX": "10", "AWS_BATCH_JOB_ARRAY_SIZE": "10"],
                 expected: .failure(.outOfRange(index: 10, count: 10, variables: "AWS_BATCH_JOB_ARRAY_INDEX=10"))),
        AutoCase(name: "kubernetes with --shard-count", environment: ["JOB_COMPLETION_INDEX": "3"], shardCount: 16,
                 expected: .success(ShardSelection(index: 3, count: 16)!)),
        AutoCase(name: "kubernetes without --shard-count", environment: ["JOB_COMPLETION_INDEX": "3"],
                 expected: .failure(.countNeeded(indexVariable: "JOB_COMPLETION_INDEX"))),
        AutoCase(name: "slurm wins over kubernetes", environment: ["SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "2", "JOB_COMPLETION_INDEX": "0"], shardCount: 2,
                 expected: .success(ShardSelection(index: 1, count: 2)!)),
        AutoCase(name: "none set", environment: ["HOME": "/root", "SLURM_JOB_ID": "12"], shardCount: 4,
                 expected: .failure(.noneSet)),
    ]

    @Test(arguments: autoCases)
    func shardAutoReadsTheBatchEnginesVariables(_ test: AutoCase) {
        let result = Result { () throws(ShardEnvironmentError) in try ShardEnvironment.selection(in: test.environment, shardCount: test.shardCount) }
        #expect(result == test.expected)
    }

    @Test func theNoneSetErrorNamesEveryVariable() {
        let message = ShardEnvironmentError.noneSet.description
        for name in ["SLURM_ARRAY_TASK_ID", "AWS_BATCH_JOB_ARRAY_INDEX", "JOB_COMPLETION_INDEX"] { #expect(message.contains(name)) }
    }

    @Test(arguments: [
        ("state.shard-0-of-4.sqlite", true), ("state.shard-15-of-16.sqlite", true), ("state.shard-4-of-4.sqlite", false),
        ("state.sqlite", false), ("state.shard-1-of-4.sqlite-wal", false), ("state.shard--of-4.sqlite", false),
        ("state.shard-1-to-4.sqlite", false), ("state.shard-a-of-4.sqlite", false),
    ])
    func siblingStoresAreTheShardStoresByName(name: String, isShardStore: Bool) {
        #expect(SiblingStores.isShardStoreName(name) == isShardStore)
    }

    @Test func theRecordOfTheFileOnDiskIsChosenAmongStores() {
        let onDisk = LocalIdentity(size: 10, modifiedNanoseconds: 5, inode: 7)
        let stale = LocalIdentity(size: 10, modifiedNanoseconds: 4, inode: 6)
        func record(_ url: String, _ local: LocalIdentity?) -> StateRecord {
            var record = StateRecord(dest: "a", url: url)
            record.complete = local.map { CompleteVersion(validators: RemoteValidators(etag: nil, lastModified: nil, size: 10), sha256: nil, local: $0) }
            return record
        }
        let cases: [(own: StateRecord?, siblings: [StateRecord], identity: LocalIdentity?, chosen: String?)] = [
            (nil, [], onDisk, nil),
            (record("own", onDisk), [record("sibling", onDisk)], onDisk, "own"),
            (record("own", stale), [record("sibling", onDisk)], onDisk, "sibling"),
            (record("own", stale), [record("one", stale), record("two", onDisk)], onDisk, "two"),
            (record("own", stale), [record("sibling", stale)], onDisk, "own"),
            (nil, [record("one", stale), record("two", nil)], onDisk, "one"),
            (nil, [record("one", nil)], nil, "one"),
        ]
        for test in cases {
            #expect(StateRecord.chosen(own: test.own, siblings: test.siblings, onDisk: test.identity)?.url == test.chosen)
        }
    }

    /// Two stores that disagree about the `.part`'s version vouch for neither: the resume is
    /// checked by its overlap (or restarted), not by a validator that may be another version's.
    @Test func contradictedPartialVersionsVouchForNothing() {
        func partial(_ url: String, _ etag: String?) -> StateRecord {
            StateRecord(dest: "a", url: url, partial: etag.map { RemoteValidators(etag: $0, lastModified: nil, size: 10) })
        }
        #expect(StateRecord.chosen(own: partial("own", "\"v1\""), siblings: [partial("shard", "\"v2\"")], onDisk: nil)?.partial == nil)
        #expect(StateRecord.chosen(own: partial("own", "\"v1\""), siblings: [partial("shard", "\"v1\"")], onDisk: nil)?.partial?.etag == "\"v1\"")
        #expect(StateRecord.chosen(own: partial("own", "\"v1\""), siblings: [partial("shard", nil)], onDisk: nil)?.partial?.etag == "\"v1\"")
        #expect(StateRecord.chosen(own: nil, siblings: [partial("one", "\"v2\""), partial("two", "\"v3\"")], onDisk: nil)?.partial == nil)
    }

    /// The writer's quoting survives the loader: what goes in is what is read back.
    @Test func aWrittenManifestLoadsAsTheEntriesItWasGiven() throws {
        let directory = try TemporaryDirectory(prefix: "mirror-written")
        let entries = [
            ManifestWriter.WrittenEntry(url: "http://127.0.0.1:1/a%20b.bin?x=1&y=2#f", mirrors: ["http://127.0.0.1:2/a.bin"], dest: "dir/a: b #c.bin",
                                        digest: String(repeating: "ab", count: 32), size: 12),
            ManifestWriter.WrittenEntry(url: "http://127.0.0.1:1/c.bin", dest: "c.bin", digest: String(repeating: "cd", count: 64)),
            ManifestWriter.WrittenEntry(url: "http://127.0.0.1:1/${NAME}.bin", dest: "ü/'quoted' \\ back.bin"),
            ManifestWriter.WrittenEntry(url: "http://127.0.0.1:1/a:b,c*&!.bin", dest: "yes"),
        ]
        let text = ManifestWriter.text(root: directory.path("root"), allowFile: false, entries: entries, comment: "two\nlines")
        let manifest = try ManifestLoader.parse(text: text, path: directory.path("f.yaml"), baseDirectory: directory.path, environment: ["NAME": "n"])
        #expect(manifest.root == directory.path("root"))
        #expect(manifest.entries.map(\.dest) == ["dir/a: b #c.bin", "c.bin", "ü/'quoted' \\ back.bin", "yes"])
        #expect(manifest.entries.map(\.url.display) == ["http://127.0.0.1:1/a%20b.bin?x=1&y=2#f", "http://127.0.0.1:1/c.bin", "http://127.0.0.1:1/${NAME}.bin", "http://127.0.0.1:1/a:b,c*&!.bin"])
        #expect(manifest.entries[2].url.string == "http://127.0.0.1:1/n.bin")
        #expect(manifest.entries[0].mirrors.map(\.display) == ["http://127.0.0.1:2/a.bin"])
        #expect(manifest.entries[0].digest == String(repeating: "ab", count: 32) && manifest.entries[0].size == 12)
        #expect(manifest.entries[1].digest == String(repeating: "cd", count: 64), "a SHA-512 pin is written as sha512")
    }
}
