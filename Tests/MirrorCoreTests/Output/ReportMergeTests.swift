import Foundation
import Testing
@testable import MirrorCore
@testable import mirror

/// `mirror report`'s exit status, as a table: the worst of the runs by the rules of `sync`.
struct ReportMergeTests {
    typealias Document = ReportFile.Document

    static func document(
        _ status: Int32, shard: (Int, Int)? = nil, by: String? = nil, failed: Int = 0, root: String? = "/r",
        manifest: String = "/m.yaml", sha256: String? = String(repeating: "a", count: 64)
    ) -> Document {
        let entries = (0..<failed).map {
            Document.Entry(dest: "f\($0)", url: "http://mirror/f\($0)", status: "failed", bytesTransferred: 0, error: "HTTP 404",
                           manifestEntry: Document.WrittenEntry(
                               url: "http://${CREDENTIALS}@h/f\($0)", mirrors: ["http://mirror/f\($0)"], dest: "f\($0)",
                               checksums: "http://h/SHA256SUMS", checksumName: "f\($0).bin",
                               headers: [.init(name: "Authorization", value: "Bearer ${TOKEN}")]))
        } + [Document.Entry(dest: "ok", url: "http://h/ok", status: "transferred", bytesTransferred: 5, error: nil)]
        return Document(version: 2, manifest: manifest, manifestSHA256: sha256, root: root, allowFile: false,
                        shard: shard.map { Document.Shard(index: $0.0, count: $0.1, by: by) }, exitStatus: status, entries: entries)
    }

    @Test(arguments: [
        ([0, 0], 0), ([0, 1], 1), ([1, 4], 4), ([4, 3], 3), ([3, 130], 130), ([130, 143], 143), ([143, 2], 2),
        ([0, 4, 1, 0], 4), ([5], 1),
    ] as [([Int32], Int32)])
    func theMergedStatusIsTheWorstBySyncsRules(statuses: [Int32], expected: Int32) throws {
        let documents = statuses.enumerated().map { index, status in
            (path: "r\(index).json", document: Self.document(status, shard: (index, statuses.count), failed: status == 1 ? 1 : 0))
        }
        #expect(try ReportMerge(documents).status.rawValue == expected)
    }

    @Test func aMissingShardOrAFailedEntryIsExitOne() throws {
        let missing = try ReportMerge([(path: "a", document: Self.document(0, shard: (0, 3))), (path: "b", document: Self.document(0, shard: (2, 3)))])
        #expect(missing.missingShards == [1])
        #expect(missing.status == .entriesFailed)
        let failed = try ReportMerge([(path: "a", document: Self.document(0, failed: 2))])
        #expect(failed.status == .entriesFailed)
        #expect(failed.failed.count == 2 && failed.transferred == 1 && failed.bytes == 5)
    }

    @Test func mixedLayoutsCannotBeMerged() throws {
        #expect(throws: ReportMerge.Conflict.self) {
            try ReportMerge([(path: "a", document: Self.document(0, shard: (0, 2))), (path: "b", document: Self.document(0))])
        }
        #expect(throws: ReportMerge.Conflict.self) {
            try ReportMerge([(path: "a", document: Self.document(0, shard: (0, 2))), (path: "b", document: Self.document(0, shard: (1, 3)))])
        }
        #expect(throws: ReportMerge.Conflict.self) {
            try ReportMerge([(path: "a", document: Self.document(0, shard: (0, 2))), (path: "b", document: Self.document(0, shard: (0, 2)))])
        }
        // Shards chosen by hash and by bytes overlap and leave entries out: never one run.
        #expect(throws: ReportMerge.Conflict.self) {
            try ReportMerge([(path: "a", document: Self.document(0, shard: (0, 2))), (path: "b", document: Self.document(0, shard: (1, 2), by: "bytes"))])
        }
        let sameBalance = try ReportMerge([(path: "a", document: Self.document(0, shard: (0, 2), by: "hash")), (path: "b", document: Self.document(0, shard: (1, 2)))])
        #expect(sameBalance.status == .success, "no `by` means hash")
    }

    /// A report naming a shard no run can be is refused when read, before anything is merged.
    @Test(arguments: [("0", "-1"), ("2", "2"), ("0", "9000000000000"), ("-1", "3")])
    func aReportOfAnImpossibleShardIsRefused(index: String, count: String) throws {
        let directory = try TemporaryDirectory(prefix: "mirror-report")
        let path = try directory.write(Data("""
            {"mirror_report":2,"manifest":"/m.yaml","manifest_sha256":null,"root":"/r","allow_file":false,"shard":{"index":\(index),"count":\(count)},"exit_status":0,"entries":[]}
            """.utf8), to: "r.json")
        #expect(throws: ReportFile.ReadError.self) { try ReportFile.read(path) }
    }

    /// Reports of different manifests, roots or versions of one manifest are not one run: merged,
    /// a shard that never ran would pass for one that did.
    @Test(arguments: [
        ("/m.yaml", "/r", "a", "/other.yaml", "/r", "a", "are reports of different manifests (/m.yaml and /other.yaml)"),
        ("/m.yaml", "/r", "a", "/m.yaml", "/elsewhere", "a", "are reports of runs into different roots (/r and /elsewhere)"),
        ("/m.yaml", "/r", "a", "/m.yaml", "/r", "b", "are reports of runs that read different versions of /m.yaml"),
    ])
    func reportsOfDifferentManifestsRootsOrVersionsAreAConflict(
        manifest: String, root: String, digit: String, otherManifest: String, otherRoot: String, otherDigit: String, reason: String
    ) throws {
        let one = Self.document(0, shard: (0, 2), root: root, manifest: manifest, sha256: String(repeating: digit, count: 64))
        let other = Self.document(0, shard: (1, 2), root: otherRoot, manifest: otherManifest, sha256: String(repeating: otherDigit, count: 64))
        #expect {
            try ReportMerge([(path: "r0.json", document: one), (path: "r1.json", document: other)])
        } throws: { error in
            "\(error)".hasPrefix("r0.json and r1.json \(reason)")
        }
        // A run that could not load its manifest knows neither its root nor its version.
        let unloaded = Self.document(2, shard: (1, 2), root: nil, manifest: manifest, sha256: nil)
        #expect(try ReportMerge([(path: "r0.json", document: one), (path: "r1.json", document: unloaded)]).status == .usage)
    }

    /// Each field is compared across every report that knows it, not only with the first
    /// report: a first report whose run could not load its manifest (no root, no SHA-256)
    /// let reports of different roots, state directories or versions merge.
    @Test(arguments: [
        ("/m.yaml", "/elsewhere", nil, "a", "are reports of runs into different roots (/r and /elsewhere)"),
        ("/m.yaml", "/r", "/state", "a", "are reports of runs with different state directories (ROOT/.mirror and /state)"),
        ("/m.yaml", "/r", nil, "b", "are reports of runs that read different versions of /m.yaml"),
    ] as [(String, String, String?, String, String)])
    func everyReportIsComparedWithTheFirstThatKnowsEachField(
        manifest: String, root: String, stateDirectory: String?, digit: String, reason: String
    ) throws {
        var unloaded = Self.document(2, shard: (0, 3), root: nil, manifest: "/m.yaml", sha256: nil)
        unloaded.stateDirectory = nil
        let one = Self.document(0, shard: (1, 3))
        var other = Self.document(0, shard: (2, 3), root: root, manifest: manifest, sha256: String(repeating: digit, count: 64))
        other.stateDirectory = stateDirectory
        #expect {
            try ReportMerge([(path: "r0.json", document: unloaded), (path: "r1.json", document: one), (path: "r2.json", document: other)])
        } throws: { error in
            "\(error)".hasPrefix("r1.json and r2.json \(reason)")
        }
    }

    /// A failed entry goes into the manifest of failed entries as its manifest wrote it: its
    /// own url (not the mirror tried last), `${VAR}`s unexpanded, its mirrors, checksum file and
    /// headers.
    @Test func theFailedManifestWritesEachEntryAsItsManifestDid() throws {
        let merged = try ReportMerge([(path: "a", document: Self.document(1, failed: 1))])
        let text = try #require(try merged.failedManifest())
        #expect(text.contains("""
              - url: "http://${CREDENTIALS}@h/f0"
                mirrors:
                  - "http://mirror/f0"
                dest: "f0"
                checksums: "http://h/SHA256SUMS"
                checksum_name: "f0.bin"
                headers:
                  "Authorization": "Bearer ${TOKEN}"

            """), "\(text)")
        #expect(try ReportMerge([(path: "a", document: Self.document(0))]).failedManifest() == nil)
    }

    /// A report of the first format recorded neither the manifest's version nor the entries as
    /// written: it is refused with what to do.
    @Test func aReportOfTheFirstFormatIsRefusedWithWhatToDo() throws {
        let directory = try TemporaryDirectory(prefix: "mirror-report")
        let path = try directory.write(Data("""
            {"mirror_report":1,"manifest":"m.yaml","root":"/r","allow_file":false,"shard":null,"exit_status":0,"entries":[]}
            """.utf8), to: "r.json")
        #expect {
            try ReportFile.read(path)
        } throws: { error in
            "\(error)".contains("is a report of format 1, written by an older mirror") && "\(error)".contains("run that sync again")
        }
    }
}
