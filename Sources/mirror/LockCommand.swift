import ArgumentParser
import FoundationEssentials
import Glibc
import MirrorCore

struct LockCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lock",
        // Only for the parse with this command as the root (`MirrorCommand.parsedCommandLine`).
        _superCommandName: "mirror",
        abstract: "Pin every entry's sha256 (or sha512) and size in the manifest itself.",
        usage: "mirror lock [<options>] <manifest>",
        discussion: """
            Syncs the manifest first (downloading what is missing, as `mirror sync` does), then \
            writes each entry's digest and size into the manifest file: sha256, or sha512 for \
            an entry pinned by SHA-512 (its own pin or its checksum file's: an entry pinned by \
            a checksum file gets the digest that file lists, after the sync verified the \
            download against it). Existing values are \
            replaced where they stand, missing keys are added as lines at the end of the entry. \
            Comments, order, layout and line endings are kept. Entries in flow style or written \
            as aliases are refused before anything is downloaded (exit status 2). The new text \
            must load as the same manifest plus those pins, and replaces the file atomically; \
            if any entry fails, the manifest is left unchanged and the exit status is 1 (4 when \
            a host stayed unreachable, 130/143 when interrupted).

            From then on, sync refuses any file that does not match its pin, and a synced \
            pinned manifest plans without a single request.
            """
    )

    @OptionGroup var options: CommonOptions

    @OptionGroup var lockWait: LockWaitOption

    @OptionGroup var shard: ShardOptions

    func run() async throws {
        let console = options.console()
        do {
            try ManifestLoader.checkPinnable(path: options.manifest)
        } catch {
            throw options.refused(error, console: console)
        }
        var whole = try options.loadManifest(console: console)
        let manifest = try shard.apply(to: whole, console: console, json: options.json)
        do {
            // Refuse what cannot be pinned before anything is downloaded. The check reads the
            // file again: other shards may be rewriting it, so a shard loads and checks it from
            // one version, under the pin writers' lock.
            if manifest.shard != nil {
                let pinLock = try await pinWritingLock(for: manifest, console: console)
                whole = try options.loadManifest(console: console)
                try ManifestPinWriter.checkPinnable(whole, environment: ProcessInfo.processInfo.environment)
                withExtendedLifetime(pinLock) {}
            } else {
                try ManifestPinWriter.checkPinnable(whole, environment: ProcessInfo.processInfo.environment)
            }
        } catch let error as ManifestError {
            throw options.refused(error, console: console)
        }
        try options.finishNetworkPreparation(console: console)
        var runOptions = options.runOptions(for: manifest, console: console)
        runOptions.lockWait = lockWait.duration
        let runner = ManifestRunner(manifest: manifest, options: runOptions)
        let (result, signal) = try await runner.syncInterruptibly(console: console)
        let reports = result.reports
        if let signal {
            let kept = reports.contains { ($0.partialSize ?? 0) > 0 } ? " and partial files are kept" : ""
            let notStarted = SyncText.notStarted(reports, verbose: options.verbose)
            console.error("mirror: interrupted; \(manifest.path) was left unchanged\(kept)\(notStarted)")
            throw ExitWith(status: .forSignal(signal))
        }
        guard let pins = ManifestPinWriter.pins(for: manifest, after: reports) else {
            console.error("mirror: not every entry could be fetched; \(manifest.path) was left unchanged")
            throw ExitWith(status: ExitStatus.forFailures(reports))
        }
        do {
            if manifest.shard != nil {
                try await rewriteShared(pins: pins, synced: manifest, console: console)
            } else {
                // Under the pin writers' lock too: a shard's `lock` may be rewriting the file.
                let pinLock = try await pinWritingLock(for: manifest, console: console)
                try ManifestPinWriter.rewrite(manifest, pins: pins, environment: ProcessInfo.processInfo.environment)
                withExtendedLifetime(pinLock) {}
            }
        } catch let error as ManifestError {
            throw options.refused(error, console: console)
        }
        if options.json {
            let entries = manifest.entries.map { entry -> JSONValue in
                .object([("dest", .string(entry.dest)), JSONValue.digestField(pins[entry.dest]?.digest),
                         ("size", .int(pins[entry.dest]?.size))])
            }
            console.json(JSONValue.object([("manifest", .string(manifest.path)), ("entries", .array(entries))]).text)
        }
        console.line("pinned \(pins.count) \(pins.count == 1 ? "entry" : "entries") in \(manifest.path)")
    }

    /// A shard's pins go into a manifest file the other shards may be pinning at the same
    /// time: under `lock.pins` in the state directory, the file is read again (with the pins they have
    /// written meanwhile) and this shard's pins are added to it.
    ///
    /// This shard's entries must read in the file as they did when it was synced: pins made
    /// from a download must not be written under a url or settings changed meanwhile.
    private func rewriteShared(pins: [String: ManifestPinWriter.Pin], synced: Manifest, console: Console) async throws {
        let pinLock = try await pinWritingLock(for: synced, console: console)
        defer { withExtendedLifetime(pinLock) {} }
        let current = try options.readManifest()
        var now: [String: Entry] = [:]
        for entry in current.entries { now[entry.dest] = entry }
        for entry in synced.entries {
            var read = now[entry.dest]
            read?.location = entry.location
            read?.repeatLocations = entry.repeatLocations
            if read != entry {
                throw ManifestError(diagnostics: [ManifestDiagnostic(location: entry.location, key: nil, message: """
                    the entry for `\(entry.dest)` changed in \(options.manifest) while it was being synced; \
                    its pins were not written (run mirror lock again)
                    """)])
            }
        }
        try ManifestPinWriter.rewrite(current, pins: pins, environment: ProcessInfo.processInfo.environment)
    }

    /// `lock.pins` in the state directory, which the shards pinning one manifest take in turn.
    private func pinWritingLock(for manifest: Manifest, console: Console) async throws -> RunLock {
        do {
            return try await RunLock.acquirePinWriting(for: manifest)
        } catch {
            console.error("mirror: \(error); \(options.manifest) was left unchanged")
            throw ExitWith(status: .locked)
        }
    }
}
