import ArgumentParser
import FoundationEssentials
import Glibc
import MirrorCore

struct SyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        // Only for the parse with this command as the root (`MirrorCommand.parsedCommandLine`).
        _superCommandName: "mirror",
        abstract: "Bring every entry's destination up to date.",
        usage: "mirror sync [<options>] <manifest>",
        discussion: """
            Plans each entry as `mirror plan` does and carries the plan out, at most \
            --concurrency connections and large transfers at a time (probes and small files to \
            an HTTP/2 server also ride on its connection as streams). Downloads go to DEST.part and are renamed to \
            DEST only when complete and verified (size, and sha256 or sha512 when pinned by the \
            manifest or its checksum file, fetched once per run); a partial file \
            is resumed with a Range request on the next run. A failed entry does not stop the \
            others. Retryable failures (connection errors, timeouts, cut bodies, 408, 429, 5xx) \
            are retried with exponential backoff and jitter, `retries` times per source; then \
            the entry's mirrors are tried in order.

            One line per finished entry goes to stdout (to stderr with --json) and failures to \
            stderr; on a terminal, live progress is drawn on stderr as well. With --quiet only \
            failures are printed. SIGINT or SIGTERM stops the transfers, keeps every partial \
            file for the next run to resume, and exits 130 or 143; the entries it reached \
            before they started are counted on one line (--verbose lists them).

            With --prune (or `prune: true` in the manifest), once every entry has succeeded, \
            files that mirror wrote and the manifest no longer lists are deleted: only files \
            the state store records as downloaded by mirror and unchanged since (same size, \
            mtime and inode), with their partial files and records; then the directories that \
            held them, if left empty and not needed by a listed dest. A file changed since, or \
            one mirror did not write, is kept and named; nothing in .mirror/ and nothing behind \
            a symbolic link is touched. Each file is renamed into a .mirror-trash/ beside it and \
            deleted there only if it is the file checked; another file swapped in meanwhile is \
            put back, and a prune interrupted meanwhile is finished by the next sync. If any \
            entry failed, nothing is deleted; with \
            --max-delete N, more than N files to delete means none are. Either ends with exit 1.

            --rate-limit (or the manifest's top-level `rate_limit`) holds all transfers \
            together to a rate in bytes per second (512KiB, 5MiB/s) or a local-time \
            timetable ("08:00,512KiB 19:00,off"); `hosts:` in the manifest sets a host's \
            concurrency, rate_limit and headers, and an entry may have its own rate_limit. A \
            transfer over a limit pauses until it may go on.

            For schedulers: --metrics-file writes mirror_last_run_timestamp_seconds, \
            mirror_last_success_timestamp_seconds (kept from the previous file when this run \
            fails), mirror_run_duration_seconds, mirror_exit_code, mirror_entries{result}, \
            mirror_bytes_transferred and mirror_retries, labelled with the manifest's path, on \
            every exit (0-4, 130, 143). --log-format json makes every stderr line a JSON object \
            (time, level, event: started, retrying, waiting_for_host, waiting_for_network, \
            fallback, finished, failed, interrupted, summary, state_store_problem, \
            prune_leftover, message) with dest and url.

            The run lock and the state store live in ROOT/.mirror, or in --state-dir (the \
            manifest's state_dir), a directory outside the root that a web server serving the \
            root does not serve.
            """
    )

    @OptionGroup var options: CommonOptions

    @OptionGroup var lockWait: LockWaitOption

    @OptionGroup var prune: PruneOptions

    @OptionGroup var rateLimit: RateLimitOption

    @OptionGroup var shard: ShardOptions

    @OptionGroup var report: ReportOption

    @OptionGroup var cache: CacheOption

    @Flag(name: .long, help: "Do not fsync files before renaming them into place: faster on slow disks, but a power loss can leave a renamed file empty or short.")
    var noFsync = false

    @Option(name: .long, help: ArgumentHelp(
        "Fetch a file at least this large (1MiB or more: 64MiB, 1GiB) over several connections at once when its server offers ranges of one named version, or `off`. Replaces every segment_min of the manifest.",
        valueName: "size"))
    var segmentMin: String?

    @Option(name: .long, help: ArgumentHelp(
        "Write the run's metrics in the Prometheus text format to this file (for node_exporter's textfile collector) on every exit (a regular file is replaced atomically; - is stdout).",
        valueName: "path"), completion: .file())
    var metricsFile: String?

    @OptionGroup var logOptions: LogOptions

    func validate() throws {
        if metricsFile == "" { throw ValidationError("--metrics-file is empty; give a file, or - for stdout") }
        if let segmentMin {
            do {
                _ = try SegmentMinimum.parse(segmentMin)
            } catch {
                throw ValidationError("--segment-min: \(error)")
            }
        }
    }

    func run() async throws {
        let startedAt = ContinuousClock.now
        let console = Console(mode: options.json ? .json : .text, quiet: options.quiet, log: logOptions.style)
        var reports: [EntryReport] = []
        var ran = ReportOption.Run()
        do {
            try await sync(console: console, reports: &reports, ran: &ran)
            writeMetrics(status: .success, reports: reports, usedCache: ran.usedCache, evicted: ran.cacheEvictions, since: startedAt, console: console)
            report.write(status: .success, reports: reports, ran: ran, manifestPath: options.manifest, console: console)
        } catch {
            // Every way out of a sync (a bad manifest, a held lock, failures, a signal) leaves metrics.
            writeMetrics(status: (error as? ExitWith)?.status ?? .usage, reports: reports, usedCache: ran.usedCache, evicted: ran.cacheEvictions, since: startedAt, console: console)
            report.write(status: (error as? ExitWith)?.status ?? .usage, reports: reports, ran: ran, manifestPath: options.manifest, console: console)
            throw error
        }
    }

    /// The sync itself; `reports` holds the entries' reports once the run has them, also
    /// when it then ends with an exit status other than 0.
    private func sync(console: Console, reports: inout [EntryReport], ran: inout ReportOption.Run) async throws {
        let manifest = try shard.loadManifest(options, console: console, hashingContent: report.report != nil)
        let early = cache.offline ? nil : options.openEarlyConnections(for: manifest)
        ran.manifest = manifest
        // A progress block would break the one-object-a-line log.
        let style = options.quiet || logOptions.logFormat == .json ? nil : ProgressDisplay.style(
            stderrIsTerminal: console.stderrIsTerminal, term: ProcessInfo.processInfo.environment["TERM"])
        // Progress is kept only for a display to draw: without one (--quiet, a log, stderr not a
        // terminal: cron, CI) the run does not count its entries and bytes for nobody (every dest
        // put in a table at the start, taken out as its entry ends, a lock each time).
        let display = style.map { ProgressDisplay(progress: SyncProgress(), console: console, style: $0) }
        var runOptions = options.runOptions(for: manifest, console: console, progress: display?.progress, early: early)
        runOptions.lockWait = lockWait.duration
        runOptions.durable = !noFsync
        runOptions.rateLimit = rateLimit.limit
        runOptions.segmentMin = segmentMin.flatMap { try? SegmentMinimum.parse($0) }
        runOptions.prune = try shard.pruneSettings(prune, for: manifest, console: console)
        runOptions.cache = try cache.blobCache(for: manifest, console: console)
        runOptions.offline = cache.offline
        ran.usedCache = runOptions.cache != nil
        // The run holds the cache in use, so that no eviction takes a blob from under it; then
        // it evicts down to the manifest's limits itself, unless other runs hold the cache.
        let inUse = runOptions.cache.map { blobCache in
            blobCache.holdInUse { console.notice("mirror: \(blobCache.path) is being pruned; waiting for it to end") }
        }
        defer {
            if let inUse, inUse >= 0 { close(inUse) }
            if let blobCache = runOptions.cache, !manifest.cacheLimits.isEmpty {
                ran.cacheEvictions = evict(blobCache, to: manifest.cacheLimits, console: console)
            }
        }
        // In a root a run has made before, the lock and the store are taken while libcurl is
        // still loading: the wait for it is most of a small sync's start, and their opening is
        // then off the way to the first request. A lock another run holds is waited for in the
        // run, where a signal stops the wait.
        let opened = await ManifestRunner.open(manifest: manifest, options: runOptions)
        try options.finishNetworkPreparation(console: console)
        let runner = ManifestRunner(manifest: manifest, options: runOptions, opened: opened)
        KeptUntilExit.keep(runner)

        let started = ContinuousClock.now
        display?.start()
        let (result, signal) = try await runner.syncInterruptibly(console: console) { await display?.stop() }
        reports = result.reports
        KeptUntilExit.keep(value: reports)
        ran.prune = result.prune
        let elapsed = ContinuousClock.now - started

        let summary = SyncSummary(reports, prune: result.prune, usedCache: ran.usedCache)
        if options.json {
            console.json(SyncJSON.encode(reports, prune: result.prune, usedCache: ran.usedCache))
        }
        if signal == nil, let outcome = result.prune { PruneText.report(outcome, to: console) }
        if let signal {
            let kept = reports.contains { ($0.partialSize ?? 0) > 0 }
                ? "; partial files are kept and the next sync resumes them" : ""
            let notStarted = SyncText.notStarted(reports, verbose: options.verbose)
            console.error("mirror: interrupted by \(signal == SIGINT ? "SIGINT" : "SIGTERM")\(notStarted)\(kept)")
            throw ExitWith(status: .forSignal(signal))
        }
        // A prune that could not do all it should counts as a failure of the run.
        let pruneFellShort = result.prune?.fellShort ?? false
        if logOptions.logFormat == .json {
            if !options.quiet || summary.failed > 0 || pruneFellShort { console.record(summary.record(elapsed: elapsed)) }
        } else if summary.failed > 0 || pruneFellShort {
            console.error(summary.text(elapsed: elapsed))
        } else if !options.json {
            console.line(summary.text(elapsed: elapsed))
        }
        if summary.failed > 0 { throw ExitWith(status: ExitStatus.forFailures(reports)) }
        if pruneFellShort { throw ExitWith(status: .entriesFailed) }
    }

    /// Evicts what the manifest's `cache_max_size` and `cache_max_age` allow no more; the
    /// number of blobs evicted. A cache other runs hold is left to them (said with -v), and one
    /// that cannot be evicted from is said.
    private func evict(_ blobCache: BlobCache, to limits: BlobCache.Limits, console: Console) -> Int {
        do {
            let eviction = try blobCache.evict(limits, now: Int64(time(nil)), wait: false)
            if eviction.busy {
                if options.verbose { console.error("cache: other runs hold \(blobCache.path); its eviction is left to them") }
                return 0
            }
            if options.verbose, !eviction.evicted.isEmpty {
                console.error("cache: evicted \(eviction.evicted.count) blobs (\(ByteCount.format(eviction.bytesFreed))); \(ByteCount.format(eviction.bytesLeft)) left in \(blobCache.path)")
            }
            return eviction.evicted.count
        } catch {
            console.notice("mirror: warning: cache: eviction from \(blobCache.path) failed: \(error)")
            return 0
        }
    }

    /// Writes `--metrics-file`, if given; a file that cannot be written is reported, and the
    /// exit status stays the run's.
    private func writeMetrics(
        status: ExitStatus, reports: [EntryReport], usedCache: Bool, evicted: Int = 0, since startedAt: ContinuousClock.Instant, console: Console
    ) {
        guard let metricsFile else { return }
        let file = MetricsFile(path: metricsFile)
        let manifest = ManifestPath.absolute(options.manifest)
        var metrics = RunMetrics(
            manifest: manifest, endedAtMilliseconds: MetricsLabel.nowMilliseconds(),
            lastSuccessMilliseconds: file.lastSuccessMilliseconds(manifest: manifest),
            durationMilliseconds: MetricsLabel.milliseconds(ContinuousClock.now - startedAt),
            exitCode: status.rawValue, reports: reports)
        if usedCache {
            metrics.cache = CacheCounts(reports)
            metrics.cache?.evicted = evicted
        }
        do {
            StandardOutputBuffer.flush()
            try file.write(metrics)
        } catch {
            console.error("mirror: --metrics-file: \(error)")
        }
    }
}

/// Totals of a finished sync.
struct SyncSummary {
    var transferred = 0
    var skipped = 0
    var failed = 0
    var bytes: Int64 = 0
    /// Files the prune deleted; nil when no prune was asked for.
    var deleted: Int?
    /// What the blob cache did; nil when the run used none.
    var cache: CacheCounts?

    init(_ reports: [EntryReport], prune: PruneOutcome? = nil, usedCache: Bool = false) {
        deleted = prune?.deleted.count
        cache = usedCache ? CacheCounts(reports) : nil
        for report in reports {
            bytes = bytes.saturatingAdding(report.bytesTransferred)
            switch report.outcome {
            case .transferred: transferred += 1
            case .skipped: skipped += 1
            case .failed: failed += 1
            }
        }
    }

    /// The `summary` line of `--log-format json`.
    func record(elapsed: Duration) -> LogRecord {
        var fields: [(String, JSONValue)] = [
            ("transferred", .int(transferred)), ("skipped", .int(skipped)), ("failed", .int(failed)),
            ("bytes_transferred", .int(bytes)), ("duration_ms", LogRecord.milliseconds(elapsed)),
        ]
        if let cache { fields.append(("cache", cache.json)) }
        return LogRecord(level: failed > 0 ? .error : .info, event: "summary", fields: fields)
    }

    func text(elapsed: Duration) -> String {
        var parts = ["\(transferred) transferred (\(ByteCount.format(bytes)))", "\(skipped) up to date"]
        if let cache, cache.hits > 0 { parts[0] += ", \(cache.hits) of them placed from the cache (\(ByteCount.format(cache.bytesPlaced)))" }
        if failed > 0 { parts.append("\(failed) failed") }
        if let deleted { parts.append("\(deleted) deleted") }
        return parts.joined(separator: ", ") + " in \(DurationText.format(elapsed))"
    }
}

/// `mirror sync --json`: one object on stdout with a result per entry.
enum SyncJSON {
    static func encode(_ reports: [EntryReport], prune: PruneOutcome? = nil, usedCache: Bool = false) -> String {
        JSONValue.object(document(reports, prune: prune, usedCache: usedCache)).text
    }

    /// The document's keys; `entry` may add keys to each entry's (as `--report` does).
    static func document(
        _ reports: [EntryReport], prune: PruneOutcome? = nil, usedCache: Bool = false, entry extra: (EntryReport) -> [(String, JSONValue)] = { _ in [] }
    ) -> [(String, JSONValue)] {
        let entries = reports.map { report -> JSONValue in
            var status = "transferred"
            var error: String?
            switch report.outcome {
            case .transferred: break
            case .skipped: status = "skipped"
            case .failed(let failure):
                status = "failed"
                error = failure.description
            }
            return .object([
                ("dest", .string(report.dest)),
                ("url", .string(report.url)),
                ("action", .string(report.action.name)),
                ("status", .string(status)),
                ("bytes_transferred", .int(report.bytesTransferred)),
                ("size", .int(report.size)),
                ("attempts", .int(report.attempts)),
                JSONValue.digestField(report.sha256),
                ("error", .string(error)),
            ] + extra(report))
        }
        let totals = SyncSummary(reports, prune: prune, usedCache: usedCache)
        var summary: [(String, JSONValue)] = [
            ("transferred", .int(totals.transferred)),
            ("skipped", .int(totals.skipped)),
            ("failed", .int(totals.failed)),
            ("bytes_transferred", .int(totals.bytes)),
        ]
        if let cache = totals.cache { summary.append(("cache", cache.json)) }
        var document: [(String, JSONValue)] = [("entries", .array(entries))]
        if let prune {
            summary.append(("deleted", .int(prune.deleted.count)))
            document.append(("prune", PruneText.json(prune)))
        }
        document.append(("summary", .object(summary)))
        return document
    }
}

extension CacheCounts {
    /// `{"hits":N,"misses":N,"bytes_placed":N}`, in the summaries of `--json` and the JSON log.
    var json: JSONValue {
        .object([("hits", .int(hits)), ("misses", .int(misses)), ("bytes_placed", .int(bytesPlaced))])
    }
}
