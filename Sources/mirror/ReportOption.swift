import ArgumentParser
import MirrorCore

/// `sync --report FILE`: the `--json` document of the run, with what `mirror report` needs to
/// merge shards and re-run failures, written on every exit through `OutputFile`.
struct ReportOption: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "Write the run's --json result, with its exit status, shard, manifest, root and state directory, to this file on every exit (a regular file is replaced atomically; - is stdout); `mirror report` merges such files.",
        valueName: "file"), completion: .file())
    var report: String?

    func validate() throws {
        if report == "" { throw ValidationError("--report is empty; give a file, or - for stdout") }
    }

    /// What the sync knew by the time it ended: nothing when the manifest could not be loaded.
    struct Run {
        var manifest: Manifest?
        var prune: PruneOutcome?
        /// The run used a blob cache: its counts go into the metrics and the summary.
        var usedCache = false
        /// Blobs the run evicted from the cache afterwards.
        var cacheEvictions = 0
    }

    /// Writes the file, if asked; one that cannot be written is reported, and the exit status
    /// stays the run's.
    func write(status: ExitStatus, reports: [EntryReport], ran: Run, manifestPath: String, console: Console) {
        guard let report else { return }
        let text = ReportFile.encode(status: status, reports: reports, manifest: ran.manifest, manifestPath: manifestPath, prune: ran.prune)
        do {
            StandardOutputBuffer.flush()
            try OutputFile(path: report).write(text + "\n")
        } catch {
            console.error("mirror: --report: \(error)")
        }
    }
}
