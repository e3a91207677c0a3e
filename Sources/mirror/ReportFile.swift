import FoundationEssentials
import MirrorCore

/// The file `sync --report` writes and `mirror report` reads: the `sync --json` document plus
///
/// - `mirror_report`: the format's version, 1;
/// - `manifest`, `root`, `allow_file`: where the run came from (`root` null when the manifest
///   could not be loaded);
/// - `shard`: `{"index": K, "count": N, "by": "hash"|"bytes"}`, or null for an unsharded run;
/// - `exit_status`: the run's exit status;
/// - in each entry, `mirrors`, `pinned_sha256` (or `pinned_sha512`), `pinned_size`, `checksums`
///   and `checksum_name` from the manifest, so a manifest of the failed entries can be written
///   from the reports alone, pinned as the entries were.
enum ReportFile {
    static let version = 1

    static func encode(status: ExitStatus, reports: [EntryReport], manifest: Manifest?, manifestPath: String, prune: PruneOutcome?) -> String {
        var byDest: [String: Entry] = [:]
        for entry in manifest?.entries ?? [] { byDest[entry.dest] = entry }
        var document: [(String, JSONValue)] = [
            ("mirror_report", .int(version)),
            ("command", .string("sync")),
            ("manifest", .string(manifestPath)),
            ("root", .string(manifest?.root)),
            ("allow_file", .bool(manifest?.allowFile ?? false)),
            ("shard", manifest.flatMap { manifest in
                manifest.shard.map { shardJSON(index: $0.index, count: $0.count, by: manifest.shardBalance.rawValue) }
            } ?? .null),
            ("exit_status", .int(Int(status.rawValue))),
        ]
        document += SyncJSON.document(reports, prune: prune) { report in
            let entry = byDest[report.dest]
            return [
                ("mirrors", .array((entry?.mirrors ?? []).map { .string($0.display) })),
                JSONValue.digestField(entry?.digest, prefix: "pinned_"),
                ("pinned_size", .int(entry?.size)),
                ("checksums", .string(entry?.settings.checksums?.display)),
                ("checksum_name", .string(entry?.checksumName)),
            ]
        }
        return JSONValue.object(document).text
    }

    /// A report's `shard` object, as `mirror report --json` repeats it.
    static func shardJSON(index: Int, count: Int, by balance: String) -> JSONValue {
        .object([("index", .int(index)), ("count", .int(count)), ("by", .string(balance))])
    }

    /// A report as read back.
    struct Document: Decodable {
        var version: Int
        var manifest: String?
        var root: String?
        var allowFile: Bool?
        var shard: Shard?
        var exitStatus: Int32
        var entries: [Entry]

        struct Shard: Decodable, Equatable {
            var index: Int
            var count: Int
            /// `--shard-by`; absent: `hash`.
            var by: String?

            var balance: String { by ?? ShardBalance.hash.rawValue }
        }

        struct Entry: Decodable {
            var dest: String
            var url: String
            var status: String
            var bytesTransferred: Int64?
            var error: String?
            var mirrors: [String]?
            var pinnedSha256: String?
            var pinnedSha512: String?
            var pinnedSize: Int64?
            var checksums: String?
            var checksumName: String?

            /// The pinned digest, whichever algorithm it is of.
            var pinnedDigest: String? { pinnedSha512 ?? pinnedSha256 }

            enum CodingKeys: String, CodingKey {
                case dest, url, status, error, mirrors
                case bytesTransferred = "bytes_transferred"
                case pinnedSha256 = "pinned_sha256"
                case pinnedSha512 = "pinned_sha512"
                case pinnedSize = "pinned_size"
                case checksums
                case checksumName = "checksum_name"
            }
        }

        enum CodingKeys: String, CodingKey {
            case version = "mirror_report"
            case manifest, root, shard, entries
            case allowFile = "allow_file"
            case exitStatus = "exit_status"
        }
    }

    /// Why a report could not be read.
    struct ReadError: Error, CustomStringConvertible {
        var path: String
        var reason: String
        var description: String { "\(path): \(reason)" }
    }

    static func read(_ path: String) throws(ReadError) -> Document {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ReadError(path: path, reason: "cannot be read")
        }
        let document: Document
        do {
            document = try JSONDecoder().decode(Document.self, from: data)
        } catch {
            throw ReadError(path: path, reason: "is not a report written by `mirror sync --report` (\(error))")
        }
        guard document.version == version else {
            throw ReadError(path: path, reason: "is a report of format \(document.version); this mirror reads format \(version)")
        }
        if let shard = document.shard {
            guard ShardSelection(index: shard.index, count: shard.count) != nil else {
                throw ReadError(path: path, reason: "names shard \(shard.index)/\(shard.count), which no run can be (K from 0 to N - 1, N from 1 to \(ShardSelection.maximumCount))")
            }
            guard ShardBalance(rawValue: shard.balance) != nil else {
                throw ReadError(path: path, reason: "names shards chosen by `\(shard.balance)`; mirror chooses by `hash` or `bytes`")
            }
        }
        return document
    }
}
