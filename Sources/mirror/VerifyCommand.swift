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
        let manifest = try shard.loadManifest(options, console: console)
        let verifier = Verifier(manifest: manifest, options: options.runOptions(for: manifest, console: console))
        let results = await verifier.verify(rehash: rehash)
        KeptUntilExit.keep(value: (manifest, results))

        if options.json {
            console.json(VerifyJSON.encode(results))
        }
        for result in results {
            let detail = result.detail.map { ": \($0)" } ?? ""
            let line = "\(TextFormat.padded(result.status.rawValue, to: 11)) \(result.dest)\(detail)"
            if result.isProblem { console.error(line) } else { console.line(line) }
        }
        let problems = results.filter(\.isProblem).count
        let unverified = results.filter { $0.status == .unverified }.count
        let summary = "\(results.count - problems - unverified) ok, \(unverified) unverified, \(problems) with problems"
        if problems > 0 {
            console.error(summary)
            throw ExitWith(status: .entriesFailed)
        }
        console.line(summary)
    }
}

enum VerifyJSON {
    static func encode(_ results: [VerifiedEntry]) -> String {
        let entries = results.map { result -> JSONValue in
            .object([
                ("dest", .string(result.dest)),
                ("status", .string(result.status.rawValue)),
                ("size", .int(result.size)),
                JSONValue.digestField(result.sha256),
                ("hash_from_store", .bool(result.hashFromStore)),
                ("detail", .string(result.detail)),
            ])
        }
        var counts: [(String, JSONValue)] = []
        for status in ["ok", "missing", "mismatch", "modified", "unverified"] {
            counts.append((status, .int(results.filter { $0.status.rawValue == status }.count)))
        }
        return JSONValue.object([("entries", .array(entries)), ("summary", .object(counts))]).text
    }
}
