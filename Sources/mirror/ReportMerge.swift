import MirrorCore

/// Several `--report` files as one run: totals, the failed entries, the shards that are
/// missing, and the exit status by the rules of `sync`.
struct ReportMerge {
    var reports: [(path: String, document: ReportFile.Document)]
    var transferred = 0
    var skipped = 0
    var failed: [(report: ReportFile.Document, entry: ReportFile.Document.Entry)] = []
    var bytes: Int64 = 0
    /// Shards of N that no report covers; empty for unsharded reports.
    var missingShards: [Int] = []
    var shardCount: Int?

    /// Why the reports cannot be merged at all (exit 2).
    struct Conflict: Error, CustomStringConvertible {
        var description: String
    }

    init(_ reports: [(path: String, document: ReportFile.Document)]) throws(Conflict) {
        self.reports = reports
        let sharded = reports.filter { $0.document.shard != nil }
        if !sharded.isEmpty {
            if sharded.count != reports.count {
                throw Conflict(description: "\(reports.first { $0.document.shard == nil }!.path) is of an unsharded run and \(sharded[0].path) of a sharded one; merge the reports of one layout")
            }
            let count = sharded[0].document.shard!.count
            var seen: [Int: String] = [:]
            for (path, document) in sharded {
                let shard = document.shard!
                guard shard.count == count else {
                    throw Conflict(description: "\(path) is shard \(shard.index)/\(shard.count) but \(sharded[0].path) is of \(count) shards")
                }
                let balance = sharded[0].document.shard!.balance
                guard shard.balance == balance else {
                    throw Conflict(description: "\(path) chose its shard by \(shard.balance) but \(sharded[0].path) by \(balance): the shards of one run must use the same --shard-by, or entries are missed and others run twice")
                }
                if let other = seen[shard.index] {
                    throw Conflict(description: "\(other) and \(path) are both shard \(shard.index)/\(count); give each shard's report once")
                }
                seen[shard.index] = path
            }
            shardCount = count
            missingShards = (0..<count).filter { seen[$0] == nil }
        }
        for (_, document) in reports {
            for entry in document.entries {
                bytes = bytes.saturatingAdding(entry.bytesTransferred ?? 0)
                switch entry.status {
                case "transferred": transferred += 1
                case "skipped": skipped += 1
                default: failed.append((document, entry))
                }
            }
        }
    }

    /// The status `sync` would have ended with had it run every report's entries: 2 when a
    /// run ended with a usage or manifest error; 143/130 when one was stopped by a signal; 3
    /// when one could not take its lock; 4 when one's host stayed unreachable; 1 when an entry
    /// failed, a prune fell short, or a shard's report is missing; else 0.
    var status: ExitStatus {
        let statuses = Set(reports.map(\.document.exitStatus))
        for worst in [ExitStatus.usage, .terminated, .interrupted, .locked, .unreachable] where statuses.contains(worst.rawValue) {
            return worst
        }
        if !failed.isEmpty || !missingShards.isEmpty || statuses.contains(where: { $0 != ExitStatus.success.rawValue }) {
            return .entriesFailed
        }
        return .success
    }

    /// The failed entries as a manifest to re-run, or why there can be none.
    func failedManifest() throws(Conflict) -> String? {
        guard !failed.isEmpty else { return nil }
        let roots = Set(failed.map { $0.report.root })
        guard roots.count == 1, let root = roots.first! else {
            let named = roots.map { $0 ?? "(none)" }.sorted().joined(separator: ", ")
            throw Conflict(description: "--failed-manifest: the failed entries come from runs with different roots (\(named)); merge the reports of one root")
        }
        let entries = failed.map { item in
            ManifestWriter.WrittenEntry(
                url: item.entry.url, mirrors: item.entry.mirrors ?? [], dest: item.entry.dest,
                digest: item.entry.pinnedDigest, size: item.entry.pinnedSize,
                checksums: item.entry.checksums, checksumName: item.entry.checksumName)
        }
        let allowFile = failed.contains { $0.report.allowFile ?? false }
        let sources = Set(failed.compactMap(\.report.manifest)).sorted().joined(separator: ", ")
        return ManifestWriter.text(
            root: root, allowFile: allowFile, entries: entries,
            comment: "The \(entries.count) failed \(entries.count == 1 ? "entry" : "entries") of \(sources), written by mirror report.")
    }
}
