import Foundation
import Testing
@testable import MirrorCore
@testable import mirror

/// `mirror report`'s exit status, as a table: the worst of the runs by the rules of `sync`.
struct ReportMergeTests {
    typealias Document = ReportFile.Document

    static func document(_ status: Int32, shard: (Int, Int)? = nil, by: String? = nil, failed: Int = 0, root: String? = "/r") -> Document {
        let entries = (0..<failed).map {
            Document.Entry(dest: "f\($0)", url: "http://h/f\($0)", status: "failed", bytesTransferred: 0, error: "HTTP 404",
                           mirrors: nil, pinnedSha256: nil, pinnedSha512: nil, pinnedSize: nil,
                           checksums: "http://h/SHA256SUMS", checksumName: "f\($0).bin")
        } + [Document.Entry(dest: "ok", url: "http://h/ok", status: "transferred", bytesTransferred: 5, error: nil,
                            mirrors: nil, pinnedSha256: nil, pinnedSha512: nil, pinnedSize: nil, checksums: nil, checksumName: nil)]
        return Document(version: 1, manifest: "m.yaml", root: root, allowFile: false,
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
            {"mirror_report":1,"manifest":"m.yaml","root":"/r","allow_file":false,"shard":{"index":\(index),"count":\(count)},"exit_status":0,"entries":[]}
            """.utf8), to: "r.json")
        #expect(throws: ReportFile.ReadError.self) { try ReportFile.read(path) }
    }

    /// An entry pinned by a checksum file keeps it in the manifest of failed entries: a re-run
    /// checks the download against it as the first run did.
    @Test func theFailedManifestKeepsChecksumFiles() throws {
        let merged = try ReportMerge([(path: "a", document: Self.document(1, failed: 1))])
        let text = try #require(try merged.failedManifest())
        #expect(text.contains("    checksums: \"http://h/SHA256SUMS\"\n    checksum_name: \"f0.bin\"\n"), "\(text)")
    }

    @Test func failedEntriesOfDifferentRootsMakeNoManifest() throws {
        let merged = try ReportMerge([(path: "a", document: Self.document(1, failed: 1, root: "/one")), (path: "b", document: Self.document(1, failed: 1, root: "/two"))])
        #expect(throws: ReportMerge.Conflict.self) { try merged.failedManifest() }
        #expect(try ReportMerge([(path: "a", document: Self.document(0))]).failedManifest() == nil)
    }
}
