import Foundation
import Glibc
import Testing
@testable import MirrorCore

/// What a group commit does on disk: every file dated, made durable and renamed; each
/// directory fsync'd once for the whole group; a directory's failure told to each of its files.
struct GroupCommitTests {
    /// Partial files under a fresh root, one per `dest`, holding `dest`'s bytes.
    static func requests(_ dests: [String], root: TemporaryDirectory) throws -> [GroupCommit.Request] {
        let rootDirectory = RootDirectory(path: root.path)
        return try dests.map { dest in
            let paths = DestinationPaths(root: root.path, dest: dest)
            let fd = try rootDirectory.openPartial(paths, truncate: true, durable: false)
            let bytes = Array(dest.utf8)
            let written = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
            #expect(written == bytes.count)
            return GroupCommit.Request(
                fd: fd, paths: paths, dest: dest, url: "http://127.0.0.1/\(dest)",
                validators: RemoteValidators(etag: "\"e\"", lastModified: "Sun, 06 Nov 1994 08:49:37 GMT", size: Int64(bytes.count)),
                sha256: DigestHasher.hex(of: Data(bytes))
            ) { _ in }
        }
    }

    @Test func eachDirectoryIsSyncedOnceForTheWholeGroup() throws {
        let root = try TemporaryDirectory(prefix: "mirror-group")
        let group = try Self.requests(["a/1", "a/2", "a/3", "b/1", "b/2"], root: root)
        let synced = Shared([String]())
        let work = GroupWork(group: group, rootDirectory: RootDirectory(path: root.path), durable: true, store: nil,
                             syncDirectory: { directory -> Int32? in
                                 synced.withLock { $0.append(directory) }
                                 return nil
                             },
                             onStoreProblem: { _ in })
        let results = work.write()
        #expect(synced.withLock { $0.sorted() } == ["a", "b"])
        for (request, result) in zip(group, results) {
            guard case .success(let identity?) = result else {
                Issue.record("\(request.dest): \(result)")
                continue
            }
            #expect(try String(contentsOfFile: request.paths.destination, encoding: .utf8) == request.dest)
            #expect(!FileManager.default.fileExists(atPath: request.paths.partial))
            // Dated with the server's Last-Modified, so the date still names the version.
            #expect(identity.modifiedNanoseconds == 784_111_777 * 1_000_000_000)
        }
    }

    /// Dated and synced one after another, each fsync committed the file system's journal
    /// again for its file's new date; every file dated first, one commit carries them all.
    @Test func everyFileIsDatedBeforeTheFirstIsSyncedAndSyncedBeforeAnyIsRenamed() throws {
        let root = try TemporaryDirectory(prefix: "mirror-group")
        let group = try Self.requests(["a/1", "a/2", "b/1", "c", "d"], root: root)
        let seen = Shared([String]())
        var work = GroupWork(group: group, rootDirectory: RootDirectory(path: root.path), durable: true, store: nil,
                             syncDirectory: { _ in nil }, onStoreProblem: { _ in })
        work.syncFile = { (fd: Int32, path: String) throws(TransferFailure) in
            // At each file's fsync: which files carry the server's date, and which are renamed.
            let dated = group.filter { request in
                var info = stat()
                return fstat(request.fd, &info) == 0 && info.st_mtim.tv_sec == 784_111_777
            }
            let renamed = group.filter { FileManager.default.fileExists(atPath: $0.paths.destination) }
            seen.withLock { $0.append("\(path.hasSuffix(".part")) dated \(dated.count) renamed \(renamed.count)") }
            try FileSystem.sync(fd, path: path)
        }
        let results = work.write()
        #expect(seen.withLock { $0 } == Array(repeating: "true dated 5 renamed 0", count: 5))
        for (request, result) in zip(group, results) {
            guard case .success = result else {
                Issue.record("\(request.dest): \(result)")
                continue
            }
            #expect(try String(contentsOfFile: request.paths.destination, encoding: .utf8) == request.dest)
        }
    }

    @Test func aDirectoryThatCannotBeSyncedFailsEachOfItsFilesAndNoOther() throws {
        let root = try TemporaryDirectory(prefix: "mirror-group")
        let group = try Self.requests(["a/1", "a/2", "b/1"], root: root)
        let work = GroupWork(group: group, rootDirectory: RootDirectory(path: root.path), durable: true, store: nil,
                             syncDirectory: { directory -> Int32? in directory == "a" ? EIO : nil }, onStoreProblem: { _ in })
        let results = work.write()
        for (request, result) in zip(group, results) {
            var failedIO: Int32?
            if case .failure(let failure) = result, case .localIO(_, let operation, let code) = failure, operation == "fsync directory" {
                failedIO = code
            }
            if request.dest.hasPrefix("a/") {
                #expect(failedIO == EIO, "\(request.dest): \(result)")
            } else {
                #expect((try? result.get()) != nil, "\(request.dest): \(result)")
            }
        }
    }

    @Test func theGroupsRecordsAreWrittenInOneTransaction() throws {
        let root = try TemporaryDirectory(prefix: "mirror-group")
        let group = try Self.requests(["x", "y"], root: root)
        let rootDirectory = RootDirectory(path: root.path)
        let store = try #require(StateStore.open(in: StateDirectory(root: rootDirectory), mode: .readWrite).store)
        let work = GroupWork(group: group, rootDirectory: rootDirectory, durable: false, store: store,
                             syncDirectory: { _ in nil }, onStoreProblem: { Issue.record("\($0)") })
        _ = work.write()
        for request in group {
            let record = try #require(try store.record(for: request.dest))
            #expect(record.complete?.sha256 == request.sha256)
            #expect(record.complete?.validators == request.validators)
            #expect(record.partial == nil)
        }
    }
}
