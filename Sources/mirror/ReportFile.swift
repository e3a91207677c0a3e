import FoundationEssentials
import MirrorCore

/// The file `sync --report` writes and `mirror report` reads: the `sync --json` document plus
///
/// - `mirror_report`: the format's version, 2;
/// - `manifest`, `manifest_sha256`, `root`, `state_dir`, `allow_file`: the manifest's absolute
///   path, the SHA-256 of its bytes as the run read them, the absolute root (`--root`, else the
///   manifest's), the absolute state directory (`--state-dir`, else the manifest's
///   `state_dir`; null for `ROOT/.mirror`) and `allow_file`; all but `manifest` null when the
///   manifest could not be loaded. Reports that differ in any of the first four are not one
///   run's;
/// - `rewrite`: the manifest's own `rewrite:` rules as it wrote them (`ManifestWriter.WrittenRule`:
///   `from`, `to`, `only`, `headers`, `withheld_headers`, `withheld_password`), which a manifest
///   of the failed entries keeps (absent in a report of an older mirror: none);
/// - `shard`: `{"index": K, "count": N, "by": "hash"|"bytes"}`, or null for an unsharded run;
/// - `exit_status`: the run's exit status;
/// - in each failed entry, `manifest_entry`: the entry as its manifest wrote it
///   (`ManifestWriter.WrittenEntry`: `url`, `mirrors`, `dest`, `sha256` or `sha512`, `size`,
///   `checksums`, `checksum_name`, `headers`, `withheld_password`, `withheld_headers`, `ftp_tls`), so that a manifest of the
///   failed entries can be written from the reports alone, whatever became of the manifest
///   since; null for the other entries.
enum ReportFile {
    static let version = 2

    static func encode(status: ExitStatus, reports: [EntryReport], manifest: Manifest?, manifestPath: String, prune: PruneOutcome?) -> String {
        var byDest: [String: Entry] = [:]
        for entry in manifest?.entries ?? [] { byDest[entry.dest] = entry }
        var document: [(String, JSONValue)] = [
            ("mirror_report", .int(version)),
            ("command", .string("sync")),
            ("manifest", .string(ManifestPath.resolved(manifestPath))),
            ("manifest_sha256", .string(manifest?.contentSHA256)),
            ("root", .string(manifest?.root)),
            ("state_dir", .string(manifest?.stateDirectory)),
            ("allow_file", .bool(manifest?.allowFile ?? false)),
            ("rewrite", .array((manifest.map(ManifestWriter.WrittenRule.own(of:)) ?? []).map(writtenRuleJSON))),
            ("shard", manifest.flatMap { manifest in
                manifest.shard.map { shardJSON(index: $0.index, count: $0.count, by: manifest.shardBalance.rawValue) }
            } ?? .null),
            ("exit_status", .int(Int(status.rawValue))),
        ]
        document += SyncJSON.document(reports, prune: prune) { report in
            guard report.failed, let entry = byDest[report.dest] else { return [("manifest_entry", .null)] }
            return [("manifest_entry", writtenEntryJSON(ManifestWriter.WrittenEntry(entry)))]
        }
        return JSONValue.object(document).text
    }

    static func writtenEntryJSON(_ entry: ManifestWriter.WrittenEntry) -> JSONValue {
        .object([
            ("url", .string(entry.url)),
            ("mirrors", .array(entry.mirrors.map { .string($0) })),
            ("dest", .string(entry.dest)),
            JSONValue.digestField(entry.digest),
            ("size", .int(entry.size)),
            ("checksums", .string(entry.checksums)),
            ("checksum_name", .string(entry.checksumName)),
            ("headers", .array(entry.headers.map { .object([("name", .string($0.name)), ("value", .string($0.value))]) })),
            ("withheld_password", .bool(entry.withheldPassword)),
            ("withheld_headers", .array(entry.withheldHeaders.map { .string($0) })),
            ("ftp_tls", .string(entry.ftpTLS)),
        ])
    }

    static func writtenRuleJSON(_ rule: ManifestWriter.WrittenRule) -> JSONValue {
        .object([
            ("from", .string(rule.from)),
            ("to", .array(rule.to.map { .string($0) })),
            ("only", .bool(rule.only)),
            ("headers", .array(rule.headers.map { .object([("name", .string($0.name)), ("value", .string($0.value))]) })),
            ("withheld_headers", .array(rule.withheldHeaders.map { .string($0) })),
            ("withheld_password", .bool(rule.withheldPassword)),
        ])
    }

    /// A report's `shard` object, as `mirror report --json` repeats it.
    static func shardJSON(index: Int, count: Int, by balance: String) -> JSONValue {
        .object([("index", .int(index)), ("count", .int(count)), ("by", .string(balance))])
    }

    /// A report as read back.
    struct Document: Decodable {
        var version: Int
        var manifest: String?
        var manifestSHA256: String?
        var root: String?
        var stateDirectory: String?
        var allowFile: Bool?
        var rewrite: [WrittenRule]?
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
            var manifestEntry: WrittenEntry?

            enum CodingKeys: String, CodingKey {
                case dest, url, status, error
                case bytesTransferred = "bytes_transferred"
                case manifestEntry = "manifest_entry"
            }
        }

        /// A `rewrite` rule as the manifest wrote it.
        struct WrittenRule: Decodable {
            var from: String
            var to: [String]
            var only: Bool?
            var headers: [WrittenEntry.Header]?
            var withheldHeaders: [String]?
            var withheldPassword: Bool?

            enum CodingKeys: String, CodingKey {
                case from, to, only, headers
                case withheldHeaders = "withheld_headers"
                case withheldPassword = "withheld_password"
            }

            var written: ManifestWriter.WrittenRule {
                ManifestWriter.WrittenRule(
                    from: from, to: to, only: only ?? false, headers: (headers ?? []).map { .init(name: $0.name, value: $0.value) },
                    withheldHeaders: withheldHeaders ?? [], withheldPassword: withheldPassword ?? false)
            }
        }

        /// `manifest_entry`: a failed entry as its manifest wrote it.
        struct WrittenEntry: Decodable {
            var url: String
            var mirrors: [String]?
            var dest: String
            var sha256: String?
            var sha512: String?
            var size: Int64?
            var checksums: String?
            var checksumName: String?
            var headers: [Header]?
            var withheldPassword: Bool?
            var withheldHeaders: [String]?
            var ftpTLS: String?

            struct Header: Decodable {
                var name: String
                var value: String
            }

            enum CodingKeys: String, CodingKey {
                case url, mirrors, dest, sha256, sha512, size, checksums, headers
                case checksumName = "checksum_name"
                case withheldPassword = "withheld_password"
                case withheldHeaders = "withheld_headers"
                case ftpTLS = "ftp_tls"
            }

            var written: ManifestWriter.WrittenEntry {
                ManifestWriter.WrittenEntry(
                    url: url, mirrors: mirrors ?? [], dest: dest, digest: sha512 ?? sha256, size: size,
                    checksums: checksums, checksumName: checksumName,
                    headers: (headers ?? []).map { .init(name: $0.name, value: $0.value) },
                    withheldPassword: withheldPassword ?? false, withheldHeaders: withheldHeaders ?? [], ftpTLS: ftpTLS)
            }
        }

        enum CodingKeys: String, CodingKey {
            case version = "mirror_report"
            case manifest, root, shard, entries, rewrite
            case manifestSHA256 = "manifest_sha256"
            case allowFile = "allow_file"
            case stateDirectory = "state_dir"
            case exitStatus = "exit_status"
        }
    }

    /// The bytes of the report at `path`, read to its end (`WholeFile`): a pipe or a process
    /// substitution (`mirror report <(…)`) states no size, and Foundation's reader gave up on
    /// it ("cannot be read"). A failure names the system's reason.
    private static func contents(of path: String) throws(ReadError) -> Data {
        do {
            return Data(try WholeFile.read(path: path))
        } catch {
            throw ReadError(path: path, reason: "cannot be read: \(error)")
        }
    }

    /// Why a report could not be read.
    struct ReadError: Error, CustomStringConvertible {
        var path: String
        var reason: String
        var description: String { "\(path): \(reason)" }
    }

    static func read(_ path: String) throws(ReadError) -> Document {
        let data = try contents(of: path)
        let document: Document
        do {
            document = try JSONDecoder().decode(Document.self, from: data)
        } catch {
            throw ReadError(path: path, reason: "is not a report written by `mirror sync --report` (\(error))")
        }
        guard document.version == version else {
            if document.version < version {
                throw ReadError(path: path, reason: """
                    is a report of format \(document.version), written by an older mirror: it does not record which \
                    version of the manifest its run read, nor its failed entries as the manifest wrote them, so it \
                    cannot be merged safely; run that sync again to write a report of format \(version)
                    """)
            }
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
