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
    /// `--max-delete` without either is a usage error (exit 2): a guard that guards nothing
    /// is a mistake the user should hear about.
    func settings(for manifest: Manifest, console: Console) throws -> PruneSettings? {
        guard prune || manifest.prune else {
            if maxDelete != nil {
                console.error("mirror: --max-delete needs --prune (or `prune: true` in \(manifest.path))")
                throw ExitWith(status: .usage)
            }
            return nil
        }
        return PruneSettings(maxDelete: maxDelete)
    }
}
