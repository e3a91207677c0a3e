import ArgumentParser
import CMimalloc
import FoundationEssentials
import MirrorCore

extension ShardBalance: ExpressibleByArgument {
    // Spelled out, as `LogOptions.Format` does: swift-argument-parser's own, for an enum of
    // strings, go through a key path and generic interpolation, whose first use makes the Swift
    // runtime look up types and conformances on every command line's parse.
    public static var allValueStrings: [String] { allCases.map { $0.rawValue } }
    public static var allValueDescriptions: [String: String] { [:] }
    public var defaultValueDescription: String { rawValue }
}

/// `--shard K/N|auto`, `--shard-count N` and `--shard-by hash|bytes`, for plan, sync, verify
/// and lock. Without `--shard` nothing is sharded, whatever the environment holds.
struct ShardOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "Work on shard K of N only: the entries whose dest hashes to K (first 8 bytes of its SHA-256, big-endian, mod N). 'auto' reads K and N from a Slurm job array (SLURM_ARRAY_TASK_ID, SLURM_ARRAY_TASK_COUNT, SLURM_ARRAY_TASK_MIN), an AWS Batch array job (AWS_BATCH_JOB_ARRAY_INDEX, AWS_BATCH_JOB_ARRAY_SIZE) or a Kubernetes Indexed Job (JOB_COMPLETION_INDEX with --shard-count).",
        valueName: "K/N|auto"))
    var shard: String?

    @Option(name: .long, help: ArgumentHelp("With --shard auto: the number of shards, where the environment does not say (Kubernetes); must agree with it where it does.", valueName: "n"))
    var shardCount: Int?

    @Option(name: .long, help: ArgumentHelp("With --shard: 'hash' (default) places each entry by its dest's hash, so adding entries never moves others; 'bytes' balances the shards' pinned sizes (size:, from mirror lock), so adding entries may move others.", valueName: "hash|bytes"))
    var shardBy: ShardBalance?

    static let auto = "auto"

    func validate() throws {
        if let shard, shard != Self.auto, ShardSelection(parsing: shard) == nil {
            throw ValidationError("--shard takes K/N with 0 <= K < N <= \(ShardSelection.maximumCount) (such as 0/4), or auto; not '\(shard)'")
        }
        if let shardCount {
            guard shard == Self.auto else { throw ValidationError("--shard-count is for --shard auto") }
            guard (1...ShardSelection.maximumCount).contains(shardCount) else {
                throw ValidationError("--shard-count must be between 1 and \(ShardSelection.maximumCount), not \(shardCount)")
            }
        }
        if shardBy != nil && shard == nil {
            throw ValidationError("--shard-by needs --shard")
        }
    }

    /// The shard asked for, nil without `--shard`; `auto` with no engine's variables set (or
    /// bad ones) is a usage error (exit 2) that names them.
    func selection(environment: [String: String], console: Console, json: Bool) throws -> ShardSelection? {
        guard let shard else { return nil }
        if shard != Self.auto { return ShardSelection(parsing: shard) }
        do {
            return try ShardEnvironment.selection(in: environment, shardCount: shardCount)
        } catch {
            if json { console.json(ErrorJSON.document(kind: "usage", message: "\(error)")) }
            console.error("mirror: \(error)")
            throw ExitWith(status: .usage)
        }
    }

    /// The manifest the command line names, narrowed to the shard asked for (with every shard's
    /// totals in `shardTotals`); every entry without `--shard`. By hash, the other shards'
    /// entries are dropped as they are read; by bytes, where each entry's shard depends on every
    /// other, the whole manifest is read first.
    func loadManifest(_ options: CommonOptions, console: Console, hashingContent: Bool = false) throws -> Manifest {
        let selection = try selection(environment: ProcessInfo.processInfo.environment, console: console, json: options.json)
        guard let selection else { return try options.loadManifest(console: console, hashingContent: hashingContent) }
        switch shardBy ?? .hash {
        case .hash:
            return try options.loadManifest(console: console, hashingContent: hashingContent, shard: selection)
        case .bytes:
            let shard = try options.loadManifest(console: console, hashingContent: hashingContent).selecting(selection, by: .bytes).manifest
            // The other shards' entries were freed only now: their pages go back too.
            mirror_heap_collect()
            return shard
        }
    }

    /// Narrows `manifest`, read whole, to the shard asked for; unchanged without `--shard`.
    func apply(to manifest: Manifest, console: Console, json: Bool) throws -> Manifest {
        guard let selection = try selection(environment: ProcessInfo.processInfo.environment, console: console, json: json) else {
            return manifest
        }
        return manifest.selecting(selection, by: shardBy ?? .hash).manifest
    }

    /// The prune a shard may carry out: none. `--prune` with `--shard` is a usage error (a
    /// shard cannot tell an unlisted file from another shard's); the manifest's `prune: true`
    /// is left to the unsharded run, with a notice.
    func pruneSettings(_ prune: PruneOptions, for manifest: Manifest, console: Console) throws -> PruneSettings? {
        guard let selection = manifest.shard else { return try prune.settings(for: manifest, console: console) }
        if prune.prune || prune.maxDelete != nil {
            console.error("mirror: --prune cannot be used with --shard: a shard cannot tell a file the manifest no longer lists from another shard's; run an unsharded `mirror sync --prune` once every shard has finished")
            throw ExitWith(status: .usage)
        }
        if manifest.prune {
            console.notice("mirror: shard \(selection) does not prune (prune: true in \(manifest.path)); an unsharded sync does")
        }
        return nil
    }
}
