import ArgumentParser
import FoundationEssentials
import Glibc
import MirrorCore

struct VerifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        // Only for the parse with this command as the root (`MirrorCommand.parsedCommandLine`).
        _superCommandName: "mirror",
        abstract: "Check every local file against its pins and the state store, offline.",
        usage: "mirror verify [<options>] <manifest>",
        discussion: """
            Makes no network request and writes nothing. Each DEST is checked against the \
            manifest's size and sha256 (or sha512) pins; without pins, against the hash mirror \
            recorded when it wrote the file (so an entry pinned by a checksum file is checked \
            against the digest the sync verified, without fetching that file). A hash in the state store is reused while the file's size, \
            mtime and inode are unchanged; --rehash reads every file again.

            Statuses: ok, missing, mismatch (contradicts a pin), modified (other bytes than \
            mirror wrote), unverified (nothing to check against). Exit status 1 when any entry \
            is missing, mismatch or modified.
            """
    )

    @OptionGroup var options: CommonOptions

    @OptionGroup var shard: ShardOptions

    @Flag(name: .long, help: "Hash every file again instead of trusting the state store's record.")
    var rehash = false

    func run() async throws {
        let console = options.console()
        // Unsharded, a manifest too large to hold is read a second time as the entries are
        // verified, instead of held (`ManifestLoader.loadStreaming`); a shard holds its share.
        let (manifest, stream) = shard.shard == nil ? try options.loadManifestStreaming(console: console) : (try shard.loadManifest(options, console: console), nil)
        let verifier = Verifier(manifest: manifest, options: options.runOptions(for: manifest, console: console))
        let output = VerifyOutput(console: console, json: options.json)
        do {
            try await verifier.verify(rehash: rehash, stream: stream) { results in output.write(results) }
        } catch {
            if options.json { output.finish(error: ErrorJSON.manifest(error.diagnostics)) }
            throw options.refused(error, console: console, writingJSON: false)
        }
        KeptUntilExit.keep(value: manifest)
        let counts = output.finish()
        let problems = counts.missing + counts.mismatch + counts.modified
        let summary = "\(counts.ok) ok, \(counts.unverified) unverified, \(problems) with problems"
        if problems > 0 {
            console.error(summary)
            throw ExitWith(status: .entriesFailed)
        }
        console.line(summary)
    }
}

/// Verify's output as the results come, a batch at a time, in manifest order: a line per entry
/// (problems on stderr), and with `--json` the document on stdout, written as it grows, the
/// counts by status at its end.
final class VerifyOutput: @unchecked Sendable {
    struct Counts {
        var ok = 0, missing = 0, mismatch = 0, modified = 0, unverified = 0
    }

    private let console: Console
    private let json: Bool
    // Written only from `write`, which the verifier calls one batch at a time, and then from
    // `finish`, after the last.
    private var counts = Counts()
    private var entriesWritten = 0

    init(console: Console, json: Bool) {
        self.console = console
        self.json = json
    }

    func write(_ results: [VerifiedEntry]) {
        if json {
            var text = entriesWritten == 0 ? "{\"entries\":[" : ""
            for result in results {
                if entriesWritten > 0 { text += "," }
                text += VerifyJSON.entry(result).text
                entriesWritten += 1
            }
            console.jsonPart(text)
        }
        for result in results {
            switch result.status {
            case .ok: counts.ok += 1
            case .missing: counts.missing += 1
            case .mismatch: counts.mismatch += 1
            case .modified: counts.modified += 1
            case .unverified: counts.unverified += 1
            }
            let detail = result.detail.map { ": \($0)" } ?? ""
            let line = "\(TextFormat.padded(result.status.rawValue, to: 11)) \(result.dest)\(detail)"
            if result.isProblem { console.error(line) } else { console.line(line) }
        }
    }

    /// Ends the document; the counts by status.
    func finish() -> Counts {
        if json {
            console.json((entriesWritten == 0 ? "{\"entries\":[" : "") + "]," + String(VerifyJSON.summary(counts).dropFirst()))
        }
        return counts
    }

    /// Ends the output of a run that stops with an error, whose JSON document is `document`:
    /// with entries written, one document still, their list and the error's members.
    func finish(error document: String) {
        guard entriesWritten > 0 else { return console.json(document) }
        console.json("]," + String(document.drop { $0 != "\"" }))
    }
}

enum VerifyJSON {
    static func entry(_ result: VerifiedEntry) -> JSONValue {
        .object([
            ("dest", .string(result.dest)),
            ("status", .string(result.status.rawValue)),
            ("size", .int(result.size)),
            JSONValue.digestField(result.sha256),
            ("hash_from_store", .bool(result.hashFromStore)),
            ("detail", .string(result.detail)),
        ])
    }

    /// `{"summary":{…}}`: the counts by status.
    static func summary(_ counts: VerifyOutput.Counts) -> String {
        let values = [("ok", counts.ok), ("missing", counts.missing), ("mismatch", counts.mismatch), ("modified", counts.modified), ("unverified", counts.unverified)]
        return JSONValue.object([("summary", .object(values.map { ($0, .int($1)) }))]).text
    }
}
