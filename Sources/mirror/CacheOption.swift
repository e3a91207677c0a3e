import ArgumentParser
import FoundationEssentials
import MirrorCore

/// `--cache`, `--no-cache` and `--offline`, for `sync` and `plan`: the blob cache a run uses (the
/// flag wins, then `MIRROR_CACHE`, then the manifest's `cache:`), and whether it may make requests.
struct CacheOption: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "Use this directory as the blob cache: a pinned file (sha256) found there is placed with no request, and every file sync downloads goes in. Wins over MIRROR_CACHE and the manifest's cache:.",
        valueName: "dir"), completion: .directory)
    var cache: String?

    @Flag(name: .long, help: "Use no blob cache, whatever MIRROR_CACHE or the manifest's cache: say.")
    var noCache = false

    @Flag(name: .long, help: "Make no request at all: keep what the root holds verified, place what the cache holds under an entry's sha256 pin, and fail every other entry, naming what is missing (exit 1).")
    var offline = false

    func validate() throws {
        if cache == "" { throw ValidationError("--cache is empty; give a directory") }
        if cache != nil && noCache { throw ValidationError("--cache and --no-cache contradict each other; give one") }
    }

    /// The cache `manifest`'s run uses (`BlobCache.chosen`); nil for none. One that cannot be
    /// used is said, and the command exits 2 before anything is read or written.
    func blobCache(for manifest: Manifest, console: Console) throws -> BlobCache? {
        do {
            let chosen = try BlobCache.chosen(
                flag: cache, disabled: noCache, variable: ProcessInfo.processInfo.environment["MIRROR_CACHE"], manifest: manifest,
                currentDirectory: FileManager.default.currentDirectoryPath)
            if let chosen, chosen.sharesFileSystem(with: manifest.root) == false {
                console.notice("mirror: warning: the cache \(chosen.path) is on another file system than the root \(manifest.root): every file placed from it is a full copy")
            }
            return chosen
        } catch {
            throw console.stop("usage", error.description, status: .usage)
        }
    }
}
