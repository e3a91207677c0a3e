import FoundationEssentials
import MirrorCore

/// The file `sync --report` writes and `mirror report` reads: the `sync --json` document plus
///
/// - `mirror_report`: the format's version, 1;
/// - `manifest`, `root`, `allow_file`: where the run came from (`root` null when the manifest
///   could not be loaded);
/// - `shard`: `{"index": K, "count": N}`, or null for an unsharded run;
/// - `exit_status`: the run's exit status;
/// - in each entry, `mirrors`, `pinned_sha256` and `pinned_size` from the manifest, so a
///   manifest of the failed entries can be written from the reports alone.
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
            ("shard", manifest?.shard.map { JSONValue.object([("index", .int($0.index)), ("count", .int($0.count))]) } ?? .null),
            ("exit_status", .int(Int(status.rawValue))),
        ]
        document += SyncJSON.document(reports, prune: prune) { report in
            let entry = byDest[report.dest]
            return [
                ("mirrors", .array((entry?.mirrors ?? []).map { .string($0.display) })),
                ("pinned_sha256", .string(entry?.sha256)),
                ("pinned_size", .int(entry?.size)),
            ]
        }
        return JSONValue.object(document).text
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
        }

        struct Entry: Decodable {
            var dest: String
            var url: String
            var status: String
            var bytesTransferred: Int64?
            var error: String?
            var mirrors: [String]?
            var pinnedSha256: String?
            var pinnedSize: Int64?

            enum CodingKeys: String, CodingKey {
                case dest, url, status, error, mirrors
                case bytesTransferred = "bytes_transferred"
                case pinnedSha256 = "pinned_sha256"
                case pinnedSize = "pinned_size"
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
        return document
    }
}
