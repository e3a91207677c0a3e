import ArgumentParser
import MirrorCore

/// `--prune` and `--max-delete`, shared by `plan` (which shows the deletions) and `sync`
/// (which carries them out).
struct PruneOptions: ParsableArguments {
    @Flag(name: .long, help: "Delete files under the root that mirror wrote (as its state store records, unchanged since) and the manifest no longer lists, with their partial files, records and the directories they leave empty; only when every entry succeeded. The manifest's `prune: true` does the same.")
    var prune = false

    @Option(name: .long, help: ArgumentHelp("With --prune: when more than n files would be deleted, delete none and exit 1 (as rclone's --max-delete).", valueName: "n"))
    var maxDelete: Int?

    func validate() throws {
        if let maxDelete, maxDelete < 0 {
            throw ValidationError("--max-delete must be 0 or more, not \(maxDelete)")
        }
    }

    /// The prune the run asks for: `--prune` or the manifest's `prune: true`; nil for none.
    func settings(for manifest: Manifest) -> PruneSettings? {
        prune || manifest.prune ? PruneSettings(maxDelete: maxDelete) : nil
    }
}
