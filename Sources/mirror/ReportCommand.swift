import ArgumentParser
import FoundationEssentials
import MirrorCore

struct ReportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        // Only for the parse with this command as the root (`MirrorCommand.parsedCommandLine`).
        _superCommandName: "mirror",
        abstract: "Merge the --report files of several syncs (shards) into one summary.",
        usage: "mirror report [<options>] <file> ...",
        discussion: """
            Reads files written by `mirror sync --report FILE` (one per shard, usually) and prints \
            one summary of them all, each failed entry on stderr, and any shard of N whose \
            report is missing. With --json, one object on stdout: "reports" (each file with its \
            shard and exit status), "entries" (every entry of every report), "missing_shards" \
            and "summary".

            The exit status is the one a single sync of every entry would have ended with: 2 \
            if a file cannot be read, the files are not of one run (another manifest, root, \
            state directory or version of the manifest; sharded and unsharded, different N or --shard-by, or one \
            shard twice), or a run ended with 2; else 143 or 130 if a run was stopped by a \
            signal; 3 if one could not take its lock; 4 if a host stayed unreachable; 1 if any \
            entry failed, a prune fell short or a shard's report is missing; else 0.

            --failed-manifest OUT writes a manifest of just the failed entries, each as its \
            manifest wrote it (its own url, mirrors, pins, checksums and headers, ${VAR} \
            unexpanded, and ftp_tls), and the runs' root and state_dir, so `mirror sync OUT` \
            retries exactly them. It comes from the reports alone: the manifest may have \
            changed since. A password written literally in a URL, a user name written there \
            alone, and a credential header's literal value are left out and named. Other \
            settings (retries, timeouts, other TLS settings, hosts) are not carried over. With no failed entries, OUT is not \
            written.
            """
    )

    @Argument(help: ArgumentHelp("Report files written by sync --report.", valueName: "file"), completion: .file())
    var files: [String]

    @Flag(name: .long, help: "Print one JSON object on stdout; human text goes to stderr.")
    var json = false

    @Flag(name: .shortAndLong, help: "Print nothing unless something failed.")
    var quiet = false

    @Option(name: .long, help: ArgumentHelp("Write a manifest of the failed entries to this file (- is stdout), to re-run just them.", valueName: "out"), completion: .file())
    var failedManifest: String?

    func validate() throws {
        if files.isEmpty { throw ValidationError("give at least one report file (written by mirror sync --report)") }
        if failedManifest == "" { throw ValidationError("--failed-manifest is empty; give a file, or - for stdout") }
    }

    func run() throws {
        let console = Console(mode: json ? .json : .text, quiet: quiet)
        let merged: ReportMerge
        do {
            var documents: [(path: String, document: ReportFile.Document)] = []
            for path in files { documents.append((path, try ReportFile.read(path))) }
            merged = try ReportMerge(documents)
        } catch {
            throw console.stop("usage", "\(error)", status: .usage)
        }
        let status = merged.status
        if json { console.json(ReportJSON.encode(merged, status: status)) }
        for (_, entry) in merged.failed {
            console.error("FAILED \(TerminalText.escaped(entry.dest)): \(TerminalText.escaped(entry.error ?? entry.status))")
        }
        for (path, document) in merged.reports where document.exitStatus != ExitStatus.success.rawValue {
            let shard = document.shard.map { " (shard \($0.index)/\($0.count))" } ?? ""
            console.error("mirror: \(path)\(shard): the run ended with exit status \(document.exitStatus)")
        }
        if !merged.missingShards.isEmpty, let count = merged.shardCount {
            console.error("mirror: no report of shard \(merged.missingShards.map { "\($0)/\(count)" }.joined(separator: ", "))")
        }
        let summary = ReportJSON.summaryText(merged)
        if status == .success { console.line(summary) } else { console.error(summary) }
        if let failedManifest {
            do {
                if let text = try merged.failedManifest() {
                    StandardOutputBuffer.flush()
                    try OutputFile(path: failedManifest).write(text)
                    console.notice("mirror: wrote the \(merged.failed.count) failed \(merged.failed.count == 1 ? "entry" : "entries") to \(failedManifest)")
                    for dest in merged.entriesWithWithheldPasswords {
                        console.error("mirror: \(failedManifest): \(TerminalText.escaped(dest)): the manifest gave its URL a password (or a user name alone, which may be a token), which reports never hold; put it back, or give it as ${VAR} or in ~/.netrc")
                    }
                    for (dest, headers) in merged.entriesWithWithheldHeaders {
                        let names = headers.map(TerminalText.escaped).joined(separator: ", ")
                        console.error("mirror: \(failedManifest): \(TerminalText.escaped(dest)): the manifest wrote the value of \(names) in the file, which reports never hold; put it back, or give it as ${VAR}")
                    }
                } else {
                    console.notice("mirror: no entry failed; \(failedManifest) was not written")
                }
            } catch {
                console.error("mirror: \(error)")
                throw ExitWith(status: .usage)
            }
        }
        if status != .success { throw ExitWith(status: status) }
    }
}

/// `mirror report --json` and the summary line.
enum ReportJSON {
    static func summaryText(_ merged: ReportMerge) -> String {
        var parts = ["\(merged.transferred) transferred (\(ByteCount.format(merged.bytes)))", "\(merged.skipped) up to date"]
        if !merged.failed.isEmpty { parts.append("\(merged.failed.count) failed") }
        let shards = merged.shardCount.map { " (\(merged.reports.count) of \($0) shards)" } ?? ""
        return "\(merged.reports.count) \(merged.reports.count == 1 ? "report" : "reports")\(shards): " + parts.joined(separator: ", ")
    }

    static func encode(_ merged: ReportMerge, status: ExitStatus) -> String {
        let reports = merged.reports.map { path, document -> JSONValue in
            .object([
                ("file", .string(path)),
                ("manifest", .string(document.manifest)),
                ("manifest_sha256", .string(document.manifestSHA256)),
                ("root", .string(document.root)),
                ("shard", document.shard.map { ReportFile.shardJSON(index: $0.index, count: $0.count, by: $0.balance) } ?? .null),
                ("exit_status", .int(Int(document.exitStatus))),
            ])
        }
        let entries = merged.reports.flatMap { _, document in
            document.entries.map { entry -> JSONValue in
                .object([
                    ("dest", .string(entry.dest)), ("url", .string(entry.url)), ("status", .string(entry.status)),
                    ("bytes_transferred", .int(entry.bytesTransferred)), ("error", .string(entry.error)),
                ])
            }
        }
        return JSONValue.object([
            ("reports", .array(reports)),
            ("entries", .array(entries)),
            ("missing_shards", .array(merged.missingShards.map { .int($0) })),
            ("summary", .object([
                ("transferred", .int(merged.transferred)), ("skipped", .int(merged.skipped)),
                ("failed", .int(merged.failed.count)), ("bytes_transferred", .int(merged.bytes)),
            ])),
            ("exit_status", .int(Int(status.rawValue))),
        ]).text
    }
}
