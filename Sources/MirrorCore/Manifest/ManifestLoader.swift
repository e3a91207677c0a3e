import FoundationEssentials
import Glibc

/// Reads manifests (format version 1) into `Manifest`s.
///
/// Beyond the rules in docs/DESIGN.md ("The manifest"), the loader is strict wherever a loose reading could
/// surprise:
/// - Types are spelled out: integers are unquoted (`"5"` is a string), booleans are exactly
///   `true` or `false`, null (`key:` with no value) is never taken as "not set".
/// - Durations are whole numbers with units from largest to smallest (`1h30m`, `2s500ms`).
///   `max_size` takes `KiB`/`MiB`/`GiB`/`TiB` or `KB`/`MB`/`GB`/`TB` (case ignored), `size`
///   only a number of bytes; a `size` above the entry's `max_size` is an error.
/// - URLs must be valid as written (after `${VAR}` expansion): characters such as spaces or
///   non-ASCII letters must be percent-encoded. A `${VAR}` inside a YAML flow sequence
///   (`mirrors: [...]`) must be quoted, since `{` is YAML syntax there.
/// - `dest` components are limited to 255 bytes; `x` and `x.part` may not both be dests.
/// - An entry repeated with the same url and dest is kept once, unless the repeat pins a
///   different sha256 or size.
/// - YAML tags other than the standard ones (`!env`, `!!binary`) and second documents are errors.
public enum ManifestLoader {
    /// Manifest files larger than this are refused before parsing. A regular file is read as a
    /// stream, and memory follows the entries kept, not the text: the bound is far above any
    /// list of files (about a billion entries of 60 bytes) and is only there so that a file
    /// that keeps growing while it is read is not read for ever.
    public static let maximumFileSize: Int = 64 << 30

    /// A manifest whose text must be held in memory may be at most this large: one read from a
    /// pipe (it cannot be read a second time, as a key after `files`, or a repeated dest, needs)
    /// and the one `mirror lock` edits. About 1,000,000 entries of 60 bytes.
    public static let maximumHeldSize = 64 << 20

    /// Reads and validates the manifest at `path`.
    ///
    /// - Parameters:
    ///   - path: The manifest file; relative paths are relative to the current directory. It is
    ///     named in messages as given.
    ///   - rootOverride: The command line's `--root`: replaces the manifest's `root`. A relative
    ///     override is relative to the current directory, while the manifest's own `root` is
    ///     relative to the manifest's directory. An empty override is an error.
    ///   - stateDirectoryOverride: The command line's `--state-dir`: replaces the manifest's
    ///     `state_dir`, resolved as `rootOverride` is.
    ///   - environment: Where `${VAR}` references are looked up.
    ///   - hashingContent: Whether to record the SHA-256 of the bytes decoded
    ///     (`Manifest.contentSHA256`), for a report that names the manifest's version.
    ///   - shard: Keeps only this shard's entries, chosen by the hash of their dest
    ///     (`--shard-by hash`), as `selecting(_:by:)` would, without ever holding the others:
    ///     memory follows the shard's share. Every entry is still decoded and checked.
    /// - Throws: `ManifestError` with every problem found, in file order. When the file cannot be
    ///   read, the single diagnostic names the path and the system's reason, with no location.
    public static func load(
        path: String, rootOverride: String? = nil, stateDirectoryOverride: String? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        hashingContent: Bool = false, shard: ShardSelection? = nil
    ) throws(ManifestError) -> Manifest {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw ManifestError(unreadable(path, .system(errno: errno))) }
        defer { close(descriptor) }
        let text: ManifestStream.Text
        var info = stat()
        if fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG {
            guard info.st_size <= maximumFileSize else { throw ManifestError(unreadable(path, .tooLarge(limit: maximumFileSize))) }
            // Read as libyaml needs it, never whole: memory follows the entries, not the text.
            text = .file(descriptor: descriptor, size: Int(info.st_size))
        } else {
            // A pipe cannot be read a second time, as a key after `files` may need.
            text = .bytes(try readAll(descriptor, path: path, heldFor: .pipe))
        }
        return try decode(
            text, path: path,
            rootResolution: rootResolution(ofFileAt: path, rootOverride: rootOverride, stateDirectoryOverride: stateDirectoryOverride),
            environment: environment, hashingContent: hashingContent, shard: shard)
    }

    /// Where the relative paths of the manifest file at `path` resolve from: its own directory,
    /// and the working directory for the command line's overrides.
    private static func rootResolution(
        ofFileAt path: String, rootOverride: String?, stateDirectoryOverride: String?
    ) -> ManifestDecoder.RootResolution {
        let currentDirectory = FileManager.default.currentDirectoryPath
        return ManifestDecoder.RootResolution(
            manifestDirectory: LexicalPath.directory(of: LexicalPath.absolute(path, relativeTo: currentDirectory)),
            override: rootOverride, currentDirectory: currentDirectory, stateDirectoryOverride: stateDirectoryOverride)
    }

    /// Loads as `load(path:rootOverride:stateDirectoryOverride:environment:)` does, except that
    /// the entries of a regular file larger than `streamingAbove` bytes are decoded and checked
    /// but not kept: the manifest comes with no entries, and the stream reads them again, one at
    /// a time, from the same file. Memory then follows the batch of entries a command works on,
    /// not the manifest; the price is a second reading of the text.
    ///
    /// - Returns: The manifest, and the stream of its entries when they were not kept.
    public static func loadStreaming(
        path: String, rootOverride: String? = nil, stateDirectoryOverride: String? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        streamingAbove: Int = maximumHeldSize
    ) throws(ManifestError) -> (manifest: Manifest, stream: ManifestEntryStream?) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw ManifestError(unreadable(path, .system(errno: errno))) }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG,
              info.st_size > streamingAbove, info.st_size <= maximumFileSize
        else {
            return (try load(path: path, rootOverride: rootOverride, stateDirectoryOverride: stateDirectoryOverride, environment: environment), nil)
        }
        let identity = ManifestEntryStream.FileIdentity(info)
        var (decoder, problems) = decoder(
            path: path, rootResolution: rootResolution(ofFileAt: path, rootOverride: rootOverride, stateDirectoryOverride: stateDirectoryOverride),
            environment: environment)
        let decoded = try ManifestStream.decode(
            .file(descriptor: descriptor, size: Int(identity.size)), into: &decoder, purpose: .nothing)
        problems += decoder.diagnostics
        guard let (manifest, streaming) = decoded, problems.isEmpty else {
            throw ManifestError(diagnostics: problems.inFileOrder())
        }
        guard let streaming else { return (manifest, nil) }
        guard let stream = ManifestEntryStream(
            descriptor: descriptor, identity: identity, path: path, decoder: decoder.fresh, streaming: streaming)
        else { throw ManifestError(unreadable(path, .system(errno: errno))) }
        return (manifest, stream)
    }

    /// Validates a manifest already in memory.
    ///
    /// - Parameters:
    ///   - path: Names the manifest in messages and in `Manifest.path`.
    ///   - baseDirectory: Where a relative `root` in the manifest is resolved (normally the
    ///     manifest's directory); if itself relative, it is relative to the current directory.
    ///   - rootOverride: As for `load(path:rootOverride:environment:)`.
    /// - Throws: `ManifestError` with every problem found, in file order.
    public static func parse(
        text: String, path: String, baseDirectory: String, rootOverride: String? = nil,
        environment: [String: String]
    ) throws(ManifestError) -> Manifest {
        let currentDirectory = FileManager.default.currentDirectoryPath
        return try parse(
            text: text, path: path, baseDirectory: baseDirectory, rootOverride: rootOverride,
            environment: environment, currentDirectory: currentDirectory)
    }

    /// `parse(text:path:baseDirectory:rootOverride:environment:)` with the current directory
    /// given rather than asked of the process.
    static func parse(
        text: String, path: String, baseDirectory: String, rootOverride: String? = nil,
        stateDirectoryOverride: String? = nil, environment: [String: String], currentDirectory: String
    ) throws(ManifestError) -> Manifest {
        let manifestDirectory = LexicalPath.absolute(baseDirectory, relativeTo: currentDirectory)
        return try decode(
            Array(text.utf8), path: path,
            rootResolution: .init(
                manifestDirectory: manifestDirectory, override: rootOverride, currentDirectory: currentDirectory,
                stateDirectoryOverride: stateDirectoryOverride),
            environment: environment)
    }

    /// Validates a manifest's bytes; `path` names it in messages and in `Manifest.path`.
    /// `shard`: as for `load`.
    static func decode(
        _ bytes: [UInt8], path: String, rootResolution: ManifestDecoder.RootResolution,
        environment: [String: String], shard: ShardSelection? = nil
    ) throws(ManifestError) -> Manifest {
        try decode(.bytes(bytes), path: path, rootResolution: rootResolution, environment: environment, shard: shard)
    }

    private static func decode(
        _ text: ManifestStream.Text, path: String, rootResolution: ManifestDecoder.RootResolution,
        environment: [String: String], hashingContent: Bool = false, shard: ShardSelection? = nil
    ) throws(ManifestError) -> Manifest {
        var (decoder, problems) = decoder(path: path, rootResolution: rootResolution, environment: environment)
        let decoded = try ManifestStream.decode(text, into: &decoder, shard: shard)
        problems += decoder.diagnostics
        guard var manifest = decoded, problems.isEmpty else {
            throw ManifestError(diagnostics: problems.inFileOrder())
        }
        if hashingContent { manifest.contentSHA256 = contentSHA256(of: text) }
        return manifest
    }

    /// A decoder for the manifest at `path`, with the netrc file read, and the problem with
    /// the netrc file, if it cannot be read.
    private static func decoder(
        path: String, rootResolution: ManifestDecoder.RootResolution, environment: [String: String]
    ) -> (ManifestDecoder, [ManifestDiagnostic]) {
        var netrc: Netrc?
        var problems: [ManifestDiagnostic] = []
        do {
            netrc = try NetrcFile.load(environment: environment)
        } catch {
            problems.append(ManifestDiagnostic(location: nil, key: nil, message: error.message))
        }
        let site = ManifestDecoder.siteRewriteRules(environment: environment, rootResolution: rootResolution, netrc: netrc)
        problems += site.problems
        return (ManifestDecoder(file: path, environment: environment, rootResolution: rootResolution, netrc: netrc, siteRewrites: site.rules), problems)
    }

    /// SHA-256 of the text: a file's through the descriptor it was decoded from, whose file
    /// stays the same one however the path is replaced meanwhile (`mirror lock` renames).
    private static func contentSHA256(of text: ManifestStream.Text) -> String {
        let hasher = DigestHasher(.sha256)
        switch text {
        case .bytes(let bytes):
            bytes.withUnsafeBytes { hasher.update($0) }
        case .file(let descriptor, _):
            var chunk = [UInt8](repeating: 0, count: 64 << 10)
            var offset: off_t = 0
            while offset <= off_t(maximumFileSize) {
                let count = chunk.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, offset) }
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { break }
                chunk.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
                offset += off_t(count)
            }
        }
        return hasher.finalize()
    }

    /// Why a manifest's text is held in memory, for the message when it is too large to be.
    enum HeldText {
        /// It came through a pipe, which cannot be read a second time.
        case pipe
        /// `mirror lock` edits it.
        case pinned
    }

    /// The bytes of the file at `path` that `mirror lock` edits, read with plain POSIX calls so
    /// that a failure can name the system's reason.
    static func readFile(at path: String) throws(ManifestError) -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw ManifestError(unreadable(path, .system(errno: errno))) }
        defer { close(descriptor) }
        return try readAll(descriptor, path: path, heldFor: .pinned)
    }

    /// Refuses, before anything is read, a manifest file `mirror lock` could not edit: one
    /// larger than `maximumHeldSize`. Loading it first would take minutes for a manifest of
    /// millions of entries, only to stop at the edit.
    public static func checkPinnable(path: String) throws(ManifestError) {
        var info = stat()
        guard stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_size > maximumHeldSize else { return }
        throw ManifestError(tooLargeToHold(path, .pinned))
    }

    private static func readAll(_ descriptor: Int32, path: String, heldFor: HeldText) throws(ManifestError) -> [UInt8] {
        do {
            return try WholeFile.read(descriptor, limit: maximumHeldSize)
        } catch {
            switch error {
            case .system(let code): throw ManifestError(unreadable(path, .system(errno: code)))
            case .tooLarge: throw ManifestError(tooLargeToHold(path, heldFor))
            }
        }
    }

    /// Why the manifest at `path`, which must be held in memory, cannot be.
    static func tooLargeToHold(_ path: String, _ heldFor: HeldText) -> ManifestDiagnostic {
        let reason = switch heldFor {
        case .pipe:
            "it is larger than \(maximumHeldSize >> 20) MiB, the most a manifest read from a pipe may hold (a pipe cannot be read twice, so it is held in memory); give it as a regular file"
        case .pinned:
            "it is larger than \(maximumHeldSize >> 20) MiB, the most `mirror lock` edits (it holds the text in memory); pin a manifest of fewer entries (about 1,000,000 fit), or split this one"
        }
        return ManifestDiagnostic(location: nil, key: nil, message: "cannot read manifest `\(path)`: \(reason)")
    }

    /// Why the manifest at `path` cannot be read; it has no location.
    static func unreadable(_ path: String, _ failure: YAMLFileInput.Failure) -> ManifestDiagnostic {
        let reason = switch failure {
        case .system(let code): String(cString: strerror(code))
        case .tooLarge(let limit): "it is larger than \(limit >> 30) GiB, far more than any list of files needs"
        }
        return ManifestDiagnostic(location: nil, key: nil, message: "cannot read manifest `\(path)`: \(reason)")
    }
}
