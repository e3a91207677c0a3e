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
        try Self.checkOneRun(reports)
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

    /// Reports of one run read one manifest, at one version, into one root. What a report
    /// does not know (its run could not load the manifest) conflicts with nothing; each field
    /// is compared with the first report that knows it, not with the first report (which may
    /// know nothing, so that every other pair went unchecked).
    private static func checkOneRun(_ reports: [(path: String, document: ReportFile.Document)]) throws(Conflict) {
        var manifest: (path: String, value: String)?
        var root: (path: String, value: String)?
        // The state directory is known when the root is (nil is then ROOT/.mirror).
        var stateDirectory: (path: String, value: String?)?
        var sha256: (path: String, value: String)?
        for (path, document) in reports {
            if let other = document.manifest {
                if let (firstPath, one) = manifest, one != other {
                    throw Conflict(description: "\(firstPath) and \(path) are reports of different manifests (\(one) and \(other)); merge the reports of one run")
                }
                if manifest == nil { manifest = (path, other) }
            }
            if let other = document.root {
                if let (firstPath, one) = root, one != other {
                    throw Conflict(description: "\(firstPath) and \(path) are reports of runs into different roots (\(one) and \(other)); merge the reports of one run")
                }
                if root == nil { root = (path, other) }
                let other = document.stateDirectory
                if let (firstPath, one) = stateDirectory, one != other {
                    throw Conflict(description: "\(firstPath) and \(path) are reports of runs with different state directories (\(one ?? "ROOT/.mirror") and \(other ?? "ROOT/.mirror")); merge the reports of one run")
                }
                if stateDirectory == nil { stateDirectory = (path, other) }
            }
            if let other = document.manifestSHA256 {
                if let (firstPath, one) = sha256, one != other {
                    throw Conflict(description: """
                        \(firstPath) and \(path) are reports of runs that read different versions of \(document.manifest ?? "the manifest") \
                        (SHA-256 \(one.prefix(12))… and \(other.prefix(12))…): it changed between them; run every shard of one version
                        """)
                }
                if sha256 == nil { sha256 = (path, other) }
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

    /// The failed entries as a manifest to re-run, each as its manifest wrote it, or nil when
    /// none failed.
    func failedManifest() throws(Conflict) -> String? {
        guard !failed.isEmpty else { return nil }
        // The reports share their root (`checkOneRun`), and a report with entries has one.
        guard let root = failed.lazy.compactMap(\.report.root).first else {
            throw Conflict(description: "--failed-manifest: the reports of the failed entries name no root")
        }
        var entries: [ManifestWriter.WrittenEntry] = []
        for (_, entry) in failed {
            guard let written = entry.manifestEntry else {
                throw Conflict(description: "--failed-manifest: the report of the failed entry \(entry.dest) does not say how the manifest wrote it")
            }
            entries.append(written.written)
        }
        let allowFile = failed.contains { $0.report.allowFile ?? false }
        // The runs share it too: a retry that kept its store in ROOT/.mirror instead would be
        // refused by every later run of the manifest (a state_dir beside a ROOT/.mirror).
        let stateDirectory = failed.lazy.compactMap(\.report.stateDirectory).first
        let sources = Set(failed.compactMap(\.report.manifest)).sorted().joined(separator: ", ")
        // One run's reports share one manifest (`checkOneRun`), and so its rules: a retry goes
        // where the run went, and never where an `only` rule kept it from.
        let rewrites = (failed.lazy.compactMap(\.report.rewrite).first ?? []).map(\.written)
        var comment = "The \(entries.count) failed \(entries.count == 1 ? "entry" : "entries") of \(sources), written by mirror report."
        if failed.contains(where: { $0.report.rewrite == nil }) {
            // A report of an older mirror does not say: a retry without them could go where an
            // `only` rule kept the run from.
            comment += "\nA report written by an older mirror does not hold the manifest's rewrite rules: if it had any, put them back before this runs."
        }
        return ManifestWriter.text(
            root: root, stateDirectory: stateDirectory, allowFile: allowFile, rewrites: rewrites, entries: entries, comment: comment)
    }

    /// The failed entries whose manifest gave a URL a password, which the reports left out.
    var entriesWithWithheldPasswords: [String] {
        failed.compactMap { $0.entry.manifestEntry?.withheldPassword == true ? $0.entry.dest : nil }
    }

    /// The failed entries with header values the reports left out, and those headers' names.
    var entriesWithWithheldHeaders: [(dest: String, headers: [String])] {
        failed.compactMap { failed in
            guard let names = failed.entry.manifestEntry?.withheldHeaders, !names.isEmpty else { return nil }
            return (failed.entry.dest, names)
        }
    }
}
