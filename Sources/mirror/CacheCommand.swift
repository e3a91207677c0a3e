import ArgumentParser
import FoundationEssentials
import Glibc
import MirrorCore

/// `mirror cache`: look after a blob cache without a manifest.
struct CacheCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cache",
        // Only for the parse with this command as the root (`MirrorCommand.parsedCommandLine`).
        _superCommandName: "mirror",
        abstract: "Look after a blob cache: verify it, add files to it, list or count what it holds.",
        usage: "mirror cache <subcommand> [<options>]",
        discussion: """
            The cache is the directory --cache names, else MIRROR_CACHE. See mirror sync --help \
            (--cache) for what the cache is.
            """,
        subcommands: [CacheVerifyCommand.self, CacheAddCommand.self, CacheListCommand.self, CacheStatsCommand.self, CachePruneCommand.self]
    )
}

/// `--cache` and `--json`, shared by the `mirror cache` subcommands.
struct CacheCommandOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The cache's directory (default: MIRROR_CACHE).", valueName: "dir"), completion: .directory)
    var cache: String?

    @Flag(name: .long, help: "Print one JSON object on stdout; human text goes to stderr.")
    var json = false

    func validate() throws {
        if cache == "" { throw ValidationError("--cache is empty; give a directory") }
    }

    func console() -> Console {
        Console(mode: json ? .json : .text, quiet: false)
    }

    /// The cache named; a usage error (exit 2) when none is. With `hashing`, libcrypto too.
    func blobCache(console: Console, hashing: Bool) throws -> BlobCache {
        let variable = ProcessInfo.processInfo.environment["MIRROR_CACHE"].flatMap { $0.isEmpty ? nil : $0 }
        guard let named = cache ?? variable else {
            throw console.stop("usage", "name the cache with --cache DIR or MIRROR_CACHE", status: .usage)
        }
        if hashing {
            do {
                try CryptoLibrary.load()
            } catch {
                throw console.stop("usage", error.description, status: .usage)
            }
        }
        return BlobCache.at(named, from: FileManager.default.currentDirectoryPath)
    }
}

struct CacheVerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Hash every blob; move any that is not what its name says to the quarantine.",
        discussion: "Exit status 1 when any blob was quarantined (the next sync that needs it downloads the file again)."
    )

    @OptionGroup var options: CacheCommandOptions

    func run() throws {
        let console = options.console()
        let cache = try options.blobCache(console: console, hashing: true)
        var checked = 0
        var quarantined: [(String, String)] = []
        var unreadable: [(String, String)] = []
        for blob in cache.blobs() {
            do {
                if let actual = try cache.verify(blob) {
                    quarantined.append((blob.sha256, actual))
                    console.error("quarantined \(blob.sha256): its bytes hash to \(actual)")
                }
                checked += 1
            } catch {
                unreadable.append((blob.sha256, error.description))
                console.error("unreadable  \(blob.sha256): \(error)")
            }
        }
        if options.json {
            console.json(JSONValue.object([
                ("verified", .int(checked)),
                ("quarantined", .array(quarantined.map { .object([("sha256", .string($0.0)), ("actual", .string($0.1))]) })),
                ("unreadable", .array(unreadable.map { .object([("sha256", .string($0.0)), ("error", .string($0.1))]) })),
            ]).text)
        }
        let summary = "\(checked) blobs verified in \(cache.path), \(quarantined.count) quarantined, \(unreadable.count) unreadable"
        if !quarantined.isEmpty || !unreadable.isEmpty {
            console.error(summary)
            throw ExitWith(status: .entriesFailed)
        }
        console.line(summary)
    }
}

struct CacheAddCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: "Put local files into the cache, hashing them (to seed it from a disk or an old root).",
        discussion: "Exit status 1 when a file cannot be read or put in; the others are added all the same."
    )

    @OptionGroup var options: CacheCommandOptions

    @Argument(help: ArgumentHelp("Files to put in.", valueName: "file"), completion: .file())
    var files: [String]

    func validate() throws {
        if files.isEmpty { throw ValidationError("give at least one file to add") }
    }

    func run() throws {
        let console = options.console()
        let cache = try options.blobCache(console: console, hashing: true)
        var results: [JSONValue] = []
        var failed = 0
        for file in files {
            do {
                let (sha256, added) = try cache.add(file: file)
                console.line("\(added ? "added  " : "present") \(sha256)  \(file)")
                results.append(.object([("file", .string(file)), ("sha256", .string(sha256)), ("added", .bool(added))]))
            } catch {
                failed += 1
                console.error("FAILED \(file): \(error)")
                results.append(.object([("file", .string(file)), ("error", .string(error.description))]))
            }
        }
        if options.json { console.json(JSONValue.object([("files", .array(results))]).text) }
        if failed > 0 { throw ExitWith(status: .entriesFailed) }
    }
}

struct CacheListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List the blobs: SHA-256, size, when each was put in and last used, and how often it was placed."
    )

    @OptionGroup var options: CacheCommandOptions

    func run() throws {
        let console = options.console()
        let cache = try options.blobCache(console: console, hashing: false)
        let blobs = cache.blobs()
        func time(_ seconds: Int64) -> String { LogTimestamp.format(seconds: Int(seconds), milliseconds: 0) }
        if options.json {
            console.json(JSONValue.object([("blobs", .array(blobs.map { blob in
                .object([("sha256", .string(blob.sha256)), ("size", .int(blob.size)), ("added", .string(time(blob.modified))),
                         ("last_used", .string(time(cache.lastUse(of: blob)))), ("hits", .int(cache.hits(of: blob)))])
            }))]).text)
            return
        }
        for blob in blobs {
            console.line("\(blob.sha256)  \(ByteCount.format(blob.size))  added \(time(blob.modified))  used \(time(cache.lastUse(of: blob)))  \(cache.hits(of: blob)) hits")
        }
    }
}

struct CacheStatsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: "Count the blobs, their bytes and placements, the quarantined ones and the temporary files left."
    )

    @OptionGroup var options: CacheCommandOptions

    func run() throws {
        let console = options.console()
        let cache = try options.blobCache(console: console, hashing: false)
        let stats = cache.stats()
        if options.json {
            console.json(JSONValue.object([
                ("path", .string(cache.path)), ("blobs", .int(stats.blobs)), ("bytes", .int(stats.bytes)),
                ("quarantined", .int(stats.quarantined)), ("temporary", .int(stats.temporary)), ("hits", .int(stats.hits)),
            ]).text)
            return
        }
        console.line("\(cache.path): \(stats.blobs) blobs, \(ByteCount.format(stats.bytes)), placed \(stats.hits) times; \(stats.quarantined) quarantined; \(stats.temporary) temporary files")
    }
}

struct CachePruneCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "prune",
        abstract: "Evict the least recently used blobs down to a size, and those unused for longer than an age.",
        discussion: """
            Waits until no sync holds the cache (each holds it shared while it runs, so that no \
            blob goes from under a placement); --no-wait exits 3 instead. Evicted blobs go \
            through the cache's trash/, which a prune interrupted half-way leaves to the next.
            """
    )

    @OptionGroup var options: CacheCommandOptions

    @Option(name: .long, help: ArgumentHelp("Evict until the blobs hold at most this much (500MiB, 20GiB).", valueName: "size"))
    var maxSize: String?

    @Option(name: .long, help: ArgumentHelp("Evict every blob unused for longer than this (720h, 12h).", valueName: "duration"))
    var maxAge: String?

    @Flag(name: .long, help: "Exit 3 at once when a sync holds the cache, instead of waiting for it.")
    var noWait = false

    func validate() throws {
        if maxSize == nil && maxAge == nil { throw ValidationError("give --max-size, --max-age or both") }
        if let maxSize {
            do { _ = try BlobCache.Limits.size(maxSize) } catch { throw ValidationError("--max-size: \(error)") }
        }
        if let maxAge {
            do { _ = try BlobCache.Limits.age(maxAge) } catch { throw ValidationError("--max-age: \(error)") }
        }
    }

    func run() throws {
        let console = options.console()
        let cache = try options.blobCache(console: console, hashing: false)
        let limits = BlobCache.Limits(maxSize: try maxSize.map(BlobCache.Limits.size), maxAge: try maxAge.map(BlobCache.Limits.age))
        let eviction: BlobCache.Eviction
        do {
            eviction = try cache.evict(limits, now: Int64(time(nil)), wait: !noWait)
        } catch {
            throw console.stop("io", error.description, status: .entriesFailed)
        }
        if eviction.busy {
            if options.json { console.json(ErrorJSON.document(kind: "lock", message: "a sync holds \(cache.path)")) }
            console.error("mirror: a sync holds \(cache.path); nothing was evicted (--no-wait)")
            throw ExitWith(status: .locked)
        }
        if options.json {
            console.json(JSONValue.object([
                ("evicted", .array(eviction.evicted.map { .string($0) })), ("bytes_freed", .int(eviction.bytesFreed)),
                ("bytes_left", .int(eviction.bytesLeft)),
            ]).text)
            return
        }
        console.line("evicted \(eviction.evicted.count) blobs (\(ByteCount.format(eviction.bytesFreed))); \(ByteCount.format(eviction.bytesLeft)) left in \(cache.path)")
    }
}
