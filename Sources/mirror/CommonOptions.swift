import ArgumentParser
import CMimalloc
import FoundationEssentials
import Glibc
import MirrorCore

/// Options every command that reads a manifest shares.
struct CommonOptions: ParsableArguments {
    @Argument(help: "The YAML manifest that lists the files (its format: man 5 mirror-manifest).", completion: .file())
    var manifest: String

    @Option(name: .long, help: ArgumentHelp("Directory the destinations are relative to (overrides the manifest's root).", valueName: "dir"),
            completion: .directory)
    var root: String?

    @Option(name: .long, help: ArgumentHelp("Keep the run lock and state store in this directory, outside the root, instead of ROOT/.mirror (overrides the manifest's state_dir).", valueName: "dir"),
            completion: .directory)
    var stateDir: String?

    @Option(name: [.customShort("j"), .long], help: ArgumentHelp("Connections and large transfers at once (overrides the manifest's concurrency).", valueName: "n"))
    var concurrency: Int?

    @Flag(name: .long, help: "Print one JSON object on stdout; human text goes to stderr.")
    var json = false

    @Flag(name: .shortAndLong, help: "Print nothing unless something failed.")
    var quiet = false

    @Flag(name: .shortAndLong, help: "Also print what was probed and decided for each entry.")
    var verbose = false

    func validate() throws {
        if let concurrency, !(1...64).contains(concurrency) {
            throw ValidationError("--concurrency must be between 1 and 64, not \(concurrency)")
        }
        if quiet && verbose {
            throw ValidationError("--quiet and --verbose cannot be used together")
        }
    }

    func console() -> Console {
        Console(mode: json ? .json : .text, quiet: quiet)
    }

    /// Loads the manifest, or prints every problem in it and ends with exit status 2; so does
    /// a state directory the run may not use (a `state_dir` beside a `ROOT/.mirror`, or inside
    /// the root). Warns about entries that turn TLS verification off. `hashingContent`: see
    /// `readManifest`.
    ///
    /// - Parameter shard: Keeps only this shard's entries, by the hash of their dest.
    func loadManifest(console: Console, hashingContent: Bool = false, shard: ShardSelection? = nil) throws -> Manifest {
        try loadManifest(console: console, hashesWhileReading: hashingContent || shard != nil) { () throws(ManifestError) in
            try readManifest(hashingContent: hashingContent, shard: shard)
        }
    }

    /// The checks and warnings of `loadManifest` around `read`. Every command that reads a
    /// manifest hashes (its bytes for a report, each dest for a shard, the files): libcrypto
    /// is there before anything is hashed, or the command stops with status 2. A read that
    /// hashes waits for it first. One that does not reads first: for a command that makes
    /// requests libcrypto is loaded on the thread that loads libcurl (`NetworkPreparation`),
    /// and the read no longer waits for it, nor do the connections opened as soon as the
    /// manifest is read (`EarlyConnections`).
    private func loadManifest(console: Console, hashesWhileReading: Bool, _ read: () throws(ManifestError) -> Manifest) throws -> Manifest {
        if hashesWhileReading { try prepareHashing(console: console) }
        let loaded: Manifest
        do {
            loaded = try read()
        } catch {
            throw refused(error, console: console)
        }
        if !hashesWhileReading { try prepareHashing(console: console) }
        // Reading made and freed far more than it kept (libyaml's nodes, each entry's scratch,
        // the conflict check's keys): the pages this thread freed go back now, not after the
        // allocator's delay, since the run holds the entries from here to its end. 0.3-0.5 MB
        // of the peak of a plan of 100,000 (make bench (e)).
        mirror_heap_collect()
        if let refusal = StateDirectory(for: loaded).refusal() {
            let diagnostic = ManifestDiagnostic(location: nil, key: stateDir == nil ? "state_dir" : "--state-dir", message: refusal)
            if json { console.json(ErrorJSON.manifest([diagnostic])) }
            console.error("mirror: \(diagnostic)")
            throw ExitWith(status: .usage)
        }
        for entry in loaded.entries where entry.settings.insecure {
            Self.warnInsecure(at: entry.location, dest: entry.dest, console: console)
        }
        return loaded
    }

    /// Says the manifest's problems (as a JSON document too with `--json`, unless the command
    /// writes that itself), and the exit status they end the command with: 2.
    func refused(_ error: ManifestError, console: Console, writingJSON: Bool = true) -> ExitWith {
        if json && writingJSON { console.json(ErrorJSON.manifest(error.diagnostics)) }
        for diagnostic in error.diagnostics {
            console.error("mirror: \(diagnostic)")
        }
        return ExitWith(status: .usage)
    }

    /// The warning an entry with `insecure: true` gets as the manifest loads.
    private static func warnInsecure(at location: SourceLocation, dest: String, console: Console) {
        console.notice("mirror: warning: \(location): \(dest): insecure: true, TLS certificates are not verified")
    }

    /// As `loadManifest`, for a command that can take a manifest's entries one at a time: one
    /// too large to hold comes with no entries, and the stream of them
    /// (`ManifestLoader.loadStreaming`).
    func loadManifestStreaming(console: Console) throws -> (Manifest, ManifestEntryStream?) {
        var stream: ManifestEntryStream?
        let manifest = try loadManifest(console: console, hashesWhileReading: false) { () throws(ManifestError) in
            let loaded = try ManifestLoader.loadStreaming(path: self.manifest, rootOverride: root, stateDirectoryOverride: stateDir)
            stream = loaded.stream
            return loaded.manifest
        }
        for (location, dest) in stream?.insecureEntries ?? [] {
            Self.warnInsecure(at: location, dest: dest, console: console)
        }
        return (manifest, stream)
    }

    /// Loads libcrypto (for a command that makes requests, `main` started that with libcurl's
    /// loading); one that cannot be loaded exits with status 2, before anything is hashed.
    func prepareHashing(console: Console) throws {
        try requireLibrary(console: console, CryptoLibrary.load)
    }

    /// Waits until libcurl is loaded and set up (`NetworkPreparation`, which `main` started for
    /// a command in `MirrorCommand.fetchingCommands` while its command line was parsed and its
    /// manifest read); one that cannot be loaded exits with status 2, before any request.
    func finishNetworkPreparation(console: Console) throws {
        try requireLibrary(console: console, NetworkPreparation.finish)
    }

    /// Runs `load`; a library it cannot load is said (as a JSON document too, under `--json`)
    /// and the command exits with status 2.
    private func requireLibrary<Failure: Error & CustomStringConvertible>(
        console: Console, _ load: () throws(Failure) -> Void
    ) throws {
        do {
            try load()
        } catch {
            throw console.stop("usage", error.description, status: .usage)
        }
    }

    /// The manifest as the command line names it, with its `--root` and `--state-dir`; with the
    /// SHA-256 of its bytes when `hashingContent` (only a report names it).
    func readManifest(hashingContent: Bool = false, shard: ShardSelection? = nil) throws(ManifestError) -> Manifest {
        try ManifestLoader.load(
            path: manifest, rootOverride: root, stateDirectoryOverride: stateDir, hashingContent: hashingContent, shard: shard)
    }

    func runOptions(for manifest: Manifest, console: Console, progress: SyncProgress? = nil, early: EarlyConnections? = nil) -> RunOptions {
        let verbose = self.verbose
        var options = RunOptions(
            concurrency: concurrency ?? manifest.concurrency,
            events: { event in console.report(event, verbose: verbose) },
            progress: progress
        )
        options.earlyConnections = early
        return options
    }

    /// Opens the connections the run's first requests will take (`EarlyConnections`), before
    /// the wait for libcurl: their handshakes go on meanwhile.
    func openEarlyConnections(for manifest: Manifest) -> EarlyConnections? {
        EarlyConnections.open(for: manifest, concurrency: concurrency ?? manifest.concurrency, proxies: .ofThisProcess)
    }
}
