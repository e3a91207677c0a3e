import ArgumentParser
import FoundationEssentials
import Glibc
import MirrorCore

struct PlanCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "plan",
        // Only for the parse with this command as the root (`MirrorCommand.parsedCommandLine`).
        _superCommandName: "mirror",
        abstract: "Show what sync would do for each entry, without changing anything.",
        usage: "mirror plan [<options>] <manifest>",
        discussion: """
            Probes every entry (HEAD, or a one-byte ranged GET where HEAD is refused) and looks \
            at DEST and DEST.part on disk. Writes nothing anywhere: no files, no directories. \
            Checksum files (`checksums:` in the manifest) are fetched with a GET, once each, \
            since the digest they list decides whether DEST is current.

            Actions: download (nothing on disk), resume (continue a partial file), restart \
            (what is on disk cannot be continued), replace (DEST is outdated), cached (DEST is \
            missing and the blob cache holds its pinned bytes: placed with no request), skip \
            (DEST is current), fail (the entry cannot be carried out; the reason is shown).

            With --prune (or `prune: true` in the manifest), delete rows name the files that \
            `sync --prune` would delete once every entry has succeeded (see mirror sync \
            --help); files it would keep are named on stderr with the reason, and a prune that \
            --max-delete would refuse is said so.
            """
    )

    @OptionGroup var options: CommonOptions

    @Flag(name: .long, help: "Exit with status 5 when any entry would change (download, resume, restart, replace or cached) or any file would be deleted.")
    var exitCode = false

    @OptionGroup var prune: PruneOptions

    @OptionGroup var shard: ShardOptions

    @OptionGroup var cache: CacheOption

    func run() async throws {
        let console = options.console()
        let manifest = try shard.loadManifest(options, console: console)
        let shardTotals = manifest.shard == nil ? nil : manifest.shardTotals
        let early = cache.offline ? nil : options.openEarlyConnections(for: manifest)
        try options.finishNetworkPreparation(console: console)
        var runOptions = options.runOptions(for: manifest, console: console, early: early)
        runOptions.prune = try shard.pruneSettings(prune, for: manifest, console: console)
        runOptions.cache = try cache.blobCache(for: manifest, console: console)
        runOptions.offline = cache.offline
        let runner = ManifestRunner(manifest: manifest, options: runOptions)
        KeptUntilExit.keep(runner)
        let plan = await runner.plan()
        KeptUntilExit.keep(value: plan)
        let pruning = runner.prunePlan()

        let sharding = manifest.shard.map { ShardPlan(selection: $0, balance: shard.shardBy ?? .hash, totals: shardTotals ?? [], entries: manifest.entries, plan: plan) }
        if options.json {
            console.json(PlanJSON.encode(plan, prune: pruning, shard: sharding))
        } else {
            console.line(PlanTable.render(plan, prune: pruning, placing: runOptions.cache?.mode) + (sharding.map { "\n" + $0.text } ?? ""))
        }
        if let pruning {
            for kept in pruning.plan.kept { console.notice("mirror: prune: would keep \(TerminalText.escaped(kept.path)): \(TerminalText.escaped(kept.reason))") }
            if let refusal = pruning.refusal { console.error("mirror: prune: \(TerminalText.escaped(refusal))") }
        }
        let failures = plan.entries { action -> TransferFailure? in
            if case .fail(let failure) = action { failure } else { nil }
        }
        if !failures.isEmpty {
            if options.quiet || options.json {
                for (dest, failure) in failures { console.error("FAILED \(dest): \(failure)") }
            }
            throw ExitWith(status: .entriesFailed)
        }
        if exitCode && (plan.indices.contains(where: { plan.action(at: $0).changesSomething }) || !(pruning?.plan.deletions.isEmpty ?? true)) {
            throw ExitWith(status: .changesPending)
        }
    }
}

/// The plan as a table a person reads at a glance, with totals.
enum PlanTable {
    /// `placing`: how the cache places a `cached` entry, said in its detail.
    static func render(_ plan: some Collection<PlannedEntry>, prune: PruneOutcome? = nil, placing: BlobCache.Mode? = nil) -> String {
        var rows = [["ACTION", "SIZE", "DEST", "DETAIL"]]
        rows.reserveCapacity(plan.count + 1)
        for entry in plan {
            var detail = entry.action.reason ?? ""
            if entry.action == .cached, let placing {
                detail += placing == .hardlink
                    ? ", as another name of the blob (cache_place: hardlink)"
                    : ", as a reflink where the file system can share extents, else a copy"
            }
            if case .resume(let from, _) = entry.action {
                let of = entry.remoteSize.map { " of \(ByteCount.format($0))" } ?? ""
                let why = entry.action.reason.map { "; \($0)" } ?? ""
                detail = "from \(ByteCount.format(from))\(of)\(why)"
            }
            if entry.manifestURL != nil, entry.action != .cached, entry.action != .skip {
                detail += (detail.isEmpty ? "" : "; ") + "from \(entry.url) (rewritten)"
            }
            let size = entry.remoteSize.map(ByteCount.format) ?? "-"
            // Escaped before the columns are measured, so a server's control characters
            // (in a reason) neither reach the terminal nor shift the columns.
            rows.append([entry.action.name, size, TerminalText.escaped(entry.dest), TerminalText.escaped(detail)])
        }
        for deletion in prune?.plan.deletions ?? [] {
            rows.append([PlanSummary.deleteName, PruneRows.size(deletion).map(ByteCount.format) ?? "-",
                         TerminalText.escaped(deletion.path), PruneRows.detail(deletion)])
        }
        // The last column is not padded, so only the first three need a width.
        var widths = [0, 0, 0]
        for row in rows {
            for column in widths.indices {
                widths[column] = max(widths[column], TerminalText.columns(row[column]))
            }
        }

        var text = ""
        for row in rows {
            var line = ""
            for column in widths.indices {
                if column > 0 { line += "  " }
                line += TextFormat.padded(row[column], to: widths[column])
            }
            if !row[3].isEmpty {
                line += "  "
                line += row[3]
            }
            // No line ends in spaces, whether padding or the end of a dest or detail.
            while line.last == " " { line.removeLast() }
            text += line
            text += "\n"
        }
        let summary = PlanSummary(plan, prune: prune)
        let counts = summary.names.map { "\(summary.counts[$0, default: 0]) \($0)" }.joined(separator: ", ")
        var transfer = ByteCount.format(summary.bytesToTransfer) + " to transfer"
        if summary.unknownSizes > 0 { transfer += " (+ \(summary.unknownSizes) of unknown size)" }
        text += "\n\(plan.count) \(plan.count == 1 ? "entry" : "entries"): \(counts); \(transfer)"
        if let refusal = prune?.refusal { text += "\nprune refused: \(TerminalText.escaped(refusal))" }
        return text
    }
}

/// Counts per action and the bytes the plan would fetch.
struct PlanSummary {
    static let actionNames = ["download", "resume", "restart", "replace", "skip", "fail"]
    static let deleteName = "delete"
    /// Counted after `replace` when any entry is placed from the cache.
    static let cachedName = Action.cached.name

    var counts: [String: Int] = [:]
    var bytesToTransfer: Int64 = 0
    var unknownSizes = 0
    /// The actions counted: `delete` too when a prune was asked for.
    var names = PlanSummary.actionNames

    init(_ plan: some Collection<PlannedEntry>, prune: PruneOutcome? = nil) {
        if let prune {
            names.append(Self.deleteName)
            counts[Self.deleteName] = prune.plan.deletions.count
        }
        for entry in plan {
            counts[entry.action.name, default: 0] += 1
            if entry.action == .cached, !names.contains(Self.cachedName) {
                names.insert(Self.cachedName, at: names.firstIndex(of: "skip")!)
            }
            if let bytes = entry.action.bytesToTransfer(remoteSize: entry.remoteSize) {
                // Two entries of `Content-Length: 9223372036854775807` must not trap the sum.
                bytesToTransfer = bytesToTransfer.saturatingAdding(bytes)
            } else {
                unknownSizes += 1
            }
        }
    }
}

/// `mirror plan --json`: exactly one object on stdout.
enum PlanJSON {
    static func encode(_ plan: some Collection<PlannedEntry>, prune: PruneOutcome? = nil, shard: ShardPlan? = nil) -> String {
        let summary = PlanSummary(plan, prune: prune)
        var entries = plan.map { entry -> JSONValue in
            .object([
                ("dest", .string(entry.dest)),
                ("url", .string(entry.url)),
                ("manifest_url", .string(entry.manifestURL)),
                ("action", .string(entry.action.name)),
                ("offset", .int(entry.action.offset)),
                ("local_size", .int(entry.localSize)),
                ("remote_size", .int(entry.remoteSize)),
                ("reason", .string(entry.action.reason)),
            ])
        }
        for deletion in prune?.plan.deletions ?? [] {
            entries.append(.object([
                ("dest", .string(deletion.path)),
                ("url", .null),
                ("manifest_url", .null),
                ("action", .string(PlanSummary.deleteName)),
                ("offset", .null),
                ("local_size", .int(PruneRows.size(deletion))),
                ("remote_size", .null),
                ("reason", .string(PruneRows.detail(deletion))),
            ]))
        }
        var totals = summary.names.map { ($0, JSONValue.int(summary.counts[$0, default: 0])) }
        totals.append(("bytes_to_transfer", .int(summary.bytesToTransfer)))
        var document: [(String, JSONValue)] = [("entries", .array(entries)), ("summary", .object(totals))]
        if let shard { document.append(("shard", shard.json)) }
        if let prune {
            document.append(("prune", .object([
                ("kept", PruneText.keptJSON(prune.plan.kept)),
                ("refused", .string(prune.refusal)),
            ])))
        }
        return JSONValue.object(document).text
    }
}

/// The plan's `delete` rows.
enum PruneRows {
    static func size(_ deletion: PrunePlan.Deletion) -> Int64? {
        if case .destination(let identity) = deletion.kind { return identity.size }
        return nil
    }

    static func detail(_ deletion: PrunePlan.Deletion) -> String {
        switch deletion.kind {
        case .destination: "written by mirror, no longer in the manifest"
        case .partial: "partial download of \(TerminalText.escaped(deletion.dest)), no longer in the manifest"
        }
    }
}
