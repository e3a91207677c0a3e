import Foundation
import Synchronization
import Testing
@testable import MirrorCore

/// The state store at work: change detection, resume safety across versions, pins planned
/// offline, and a store that is lost or damaged.
@Suite(.serialized)
struct StateTests {
    let scenario: SyncScenario
    var server: FaultServer { scenario.server }

    init() throws {
        scenario = try SyncScenario(.faultServer)
    }

    static let v1 = randomData(count: 300_000, seed: 100)
    static let v2 = randomData(count: 300_000, seed: 200)
    static let date1 = "Sun, 06 Nov 1994 08:49:37 GMT"
    static let date2 = "Mon, 07 Nov 1994 08:49:37 GMT"

    /// The one entry of these tests: `f.bin`, not retried, with `lines` under it.
    func manifest(_ lines: String...) throws -> Manifest {
        try scenario.load(.files(.init(server.url("/f.bin"), dest: "f.bin", lines: ["retries: 0"] + lines)))
    }

    /// Serves `data` for every method, replacing any earlier script for the path.
    func serve(_ data: Data, etag: String? = nil, date: String = StateTests.date1) {
        for method in ["GET", "HEAD"] {
            server.route("/f.bin", method: method, reply: .file(data, etag: etag, lastModified: date))
        }
    }

    var local: Data? { scenario.local("f.bin") }
    var partial: Data? { scenario.local("f.bin.part") }

    /// Leaves `f.bin.part` holding the first 100000 bytes of v1, with its validators recorded,
    /// as a download cut off by the network would.
    func leavePartialOfV1() async throws {
        server.route("/f.bin", method: "GET", reply: .file(Self.v1, etag: "\"v1\"", lastModified: Self.date1).cut(afterBodyBytes: 100_000))
        let reports = try await scenario.sync(manifest())
        #expect(reports[0].failed)
        #expect(partial?.count == 100_000)
    }

    @Test func aSameSizeChangeIsDetectedAndReplaced() async throws {
        serve(Self.v1, etag: "\"v1\"")
        _ = try await scenario.sync(manifest())
        #expect(local?.fingerprint == Self.v1.fingerprint)

        serve(Self.v2, etag: "\"v2\"")
        let plan = await scenario.runner(try manifest()).plan()
        #expect(plan[0].action == .replace(reason: "the remote file changed: ETag changed from \"v1\" to \"v2\""))
        let reports = try await scenario.sync(manifest())
        #expect(reports[0].action.name == "replace" && reports[0].outcome == .transferred)
        #expect(local?.fingerprint == Self.v2.fingerprint)
        #expect(scenario.files() == ["f.bin"])

        server.clearRequests()
        let again = try await scenario.sync(manifest())
        #expect(again[0].outcome == .skipped)
        // One conditional GET, answered 304.
        #expect(server.requests.map(\.method) == ["GET"])
        #expect(server.requests.first?.headers["If-None-Match"] == "\"v2\"")
        #expect(scenario.files() == ["f.bin"])
    }

    @Test func aChangeOfLastModifiedAloneIsDetected() async throws {
        serve(Self.v1, date: Self.date1)
        _ = try await scenario.sync(manifest())
        serve(Self.v2, date: Self.date2)
        let reports = try await scenario.sync(manifest())
        #expect(reports[0].action.name == "replace")
        #expect(local?.fingerprint == Self.v2.fingerprint)
    }

    @Test func aPartialOfAnOlderVersionIsRestartedNeverSpliced() async throws {
        try await leavePartialOfV1()
        serve(Self.v2, etag: "\"v2\"")
        server.clearRequests()

        let plan = await scenario.runner(try manifest()).plan()
        #expect(plan[0].action.name == "restart")
        #expect(plan[0].action.reason?.contains("changed since the partial download started") == true)
        let reports = try await scenario.sync(manifest())
        #expect(reports[0].outcome == .transferred)
        #expect(local?.fingerprint == Self.v2.fingerprint)
        let gets = server.requests.filter { $0.method == "GET" }
        #expect(gets.count == 1 && gets[0].headers["Range"] == nil)
    }

    @Test func aPartialOfTheCurrentVersionResumesWithIfRange() async throws {
        try await leavePartialOfV1()
        serve(Self.v1, etag: "\"v1\"")
        server.clearRequests()
        let reports = try await scenario.sync(manifest())

        #expect(reports[0].outcome == .transferred && reports[0].bytesTransferred == 200_000)
        #expect(local?.fingerprint == Self.v1.fingerprint)
        let get = try #require(server.requests.first { $0.method == "GET" })
        #expect(get.headers["Range"] == "bytes=100000-")
        #expect(get.headers["If-Range"] == "\"v1\"")
    }

    @Test func aServerThatIgnoresIfRangeIsCaughtByTheValidatorOnIts206() async throws {
        try await leavePartialOfV1()
        // The probe still sees v1, but the GET is answered from v2 with a 206 despite If-Range.
        server.route("/f.bin", method: "HEAD", reply: .file(Self.v1, etag: "\"v1\"", lastModified: Self.date1))
        server.route("/f.bin", method: "GET", reply: .file(Self.v2, etag: "\"v2\"", lastModified: Self.date2, honorIfRange: false))
        server.clearRequests()
        let reports = try await scenario.sync(manifest().withRetries(1))

        #expect(reports[0].outcome == .transferred)
        #expect(local?.fingerprint == Self.v2.fingerprint, "v1's head and v2's tail were not spliced")
        let gets = server.requests.filter { $0.method == "GET" }
        #expect(gets.first?.headers["If-Range"] == "\"v1\"")
        #expect(gets.last?.headers["Range"] == nil, "the retry started from byte 0")
    }

    @Test func aDeletedStoreMeansNoRedownloadOfCompleteFiles() async throws {
        serve(Self.v1, etag: "\"v1\"")
        _ = try await scenario.sync(manifest())
        unlink(scenario.rootPath(".mirror/state.sqlite"))
        server.clearRequests()

        let reports = try await scenario.sync(manifest())
        #expect(reports[0].outcome == .skipped)
        #expect(server.requests.map(\.method) == ["HEAD"])
        #expect(FileManager.default.fileExists(atPath: scenario.rootPath(".mirror/state.sqlite")))
    }

    /// A run killed between the rename and the store's write (or a store lost with its disk)
    /// leaves a DEST with no record. The server then publishes a new version of the same size:
    /// the old bytes must not be adopted under the new version's validators.
    @Test func aFileWhoseRecordIsLostIsNeverAdoptedUnderANewVersionsValidators() async throws {
        serve(Self.v1, etag: "\"v1\"", date: Self.date1)
        _ = try await scenario.sync(manifest())
        for suffix in ["", "-wal", "-shm"] { unlink(scenario.rootPath(".mirror/state.sqlite" + suffix)) }
        serve(Self.v2, etag: "\"v2\"", date: Self.date2)

        let plan = await scenario.runner(try manifest()).plan()
        #expect(plan[0].action == .replace(reason: "no record says which version the local file is, and its date is not the server's Last-Modified"))
        let reports = try await scenario.sync(manifest())
        #expect(reports[0].outcome == .transferred)
        #expect(scenario.local("f.bin") == Self.v2)
        let verified = await scenario.verifier(try manifest()).verify(rehash: true)
        #expect(verified.map(\.status) == [.ok])
        #expect(verified.first?.sha256 == DigestHasher.hex(of: Self.v2))
    }

    /// A dynamic server that sends no ETag, no Last-Modified and no size: nothing tells one
    /// version from the next, so the file is fetched again on every run and compared. The same
    /// bytes leave DEST as it is (same inode); other bytes replace it. Never a silent skip.
    @Test func aServerThatNamesNoVersionIsFetchedAgainAndComparedNeverSkippedForever() async throws {
        func serveDynamic(_ data: Data) {
            for method in ["GET", "HEAD"] { server.route("/f.bin", method: method, reply: .file(data).chunked()) }
        }
        serveDynamic(Self.v1)
        #expect(try await scenario.sync(manifest()).map(\.outcome) == [.transferred])
        let inode = try FileManager.default.attributesOfItem(atPath: scenario.rootPath("f.bin"))[.systemFileNumber] as? Int

        let plan = await scenario.runner(try manifest()).plan()
        #expect(plan[0].action == .replace(reason: Planner.noVersion + ", so the local file is fetched again and compared"))
        server.clearRequests()
        let same = try await scenario.sync(manifest())
        #expect(same.map(\.outcome) == [.skipped], "the same bytes: up to date")
        #expect(server.requests.filter { $0.method == "GET" && $0.headers["Range"] == nil }.count == 1, "fetched to compare")
        #expect(try FileManager.default.attributesOfItem(atPath: scenario.rootPath("f.bin"))[.systemFileNumber] as? Int == inode)
        #expect(scenario.files() == ["f.bin"], "no partial file left")

        serveDynamic(Self.v2)
        let changed = try await scenario.sync(manifest())
        #expect(changed.map(\.outcome) == [.transferred])
        #expect(scenario.local("f.bin") == Self.v2)
    }

    @Test func aCorruptStoreIsReplacedAndSaidSo() async throws {
        serve(Self.v1, etag: "\"v1\"")
        _ = try await scenario.sync(manifest())
        for suffix in ["-wal", "-shm"] { unlink(scenario.rootPath(".mirror/state.sqlite" + suffix)) }
        try Data(repeating: 0x5a, count: 8192).write(to: URL(fileURLWithPath: scenario.rootPath(".mirror/state.sqlite")))
        let problems = Mutex<[StateStoreProblem]>([])
        let reports = try await scenario.sync(manifest(), .init(events: { event in
            if case .stateStoreProblem(let problem) = event { problems.withLock { $0.append(problem) } }
        }))

        #expect(reports[0].outcome == .skipped)
        #expect(local?.fingerprint == Self.v1.fingerprint)
        let said = problems.withLock { $0 }
        #expect(said.count == 1 && said[0].kind == .replaced && said[0].concernsTheRun, "\(said)")
        #expect(said.first?.text.contains("replaced it with a new one") == true, "\(said)")
        // The new store works: the next run reads what this one recorded.
        let record = try scenario.record("f.bin")
        #expect(record?.complete?.validators.etag == "\"v1\"")
    }

    @Test func aPinnedSyncedManifestPlansWithTheServerStopped() async throws {
        serve(Self.v1, etag: "\"v1\"")
        let pin = DigestHasher.hex(of: Self.v1)
        let pinned = try manifest("sha256: \(pin)")
        let synced = try await scenario.sync(pinned)
        #expect(synced[0].sha256 == pin)
        server.stop()

        let plan = await scenario.runner(pinned).plan()
        #expect(plan[0].action == .skip)
        let again = try await scenario.sync(pinned)
        #expect(again[0].outcome == .skipped)
    }

    @Test func aTouchedFileIsNoLongerVouchedFor() async throws {
        serve(Self.v1, etag: "\"v1\"")
        let pin = DigestHasher.hex(of: Self.v1)
        let pinned = try manifest("sha256: \(pin)")
        _ = try await scenario.sync(pinned)
        // Same size, other bytes, new mtime: the store's record no longer describes it.
        try Self.v2.write(to: URL(fileURLWithPath: scenario.rootPath("f.bin")))
        server.clearRequests()

        let reports = try await scenario.sync(pinned)
        #expect(reports[0].action == .replace(reason: "local file does not match its sha256 pin"))
        #expect(local?.fingerprint == Self.v1.fingerprint)
    }

    @Test func aDownloadThatFailsItsPinNeverReplacesTheOldFile() async throws {
        serve(Self.v1, etag: "\"v1\"")
        _ = try await scenario.sync(manifest())
        // The manifest now pins v2, but the server still has v1: the replacement fails its pin.
        let v2Hash = DigestHasher.hex(of: Self.v2)
        let reports = try await scenario.sync(try manifest("sha256: \(v2Hash)").withRetries(1))

        #expect(reports[0].outcome.isUnchangedPinMismatch(expected: v2Hash, actual: DigestHasher.hex(of: Self.v1)), "\(reports[0].outcome)")
        #expect(reports[0].attempts == 1, "the server still has v1: not fetched again")
        #expect(local?.fingerprint == Self.v1.fingerprint, "DEST untouched")
        #expect(scenario.files() == ["f.bin"], "the bad download was discarded")
    }

    /// The pinned upgrade: the manifest pins v2, DEST is v1, and the download of v2 is cut.
    /// DEST fails its pin, but the partial file of v2 is continued, not thrown away.
    @Test func aPinnedUpgradeCutMidwayIsResumedNotRestarted() async throws {
        serve(Self.v1, etag: "\"v1\"")
        _ = try await scenario.sync(manifest())
        let pinned = try manifest("sha256: \(DigestHasher.hex(of: Self.v2))")
        server.route("/f.bin", method: "HEAD", reply: .file(Self.v2, etag: "\"v2\"", lastModified: Self.date2))
        server.route("/f.bin", method: "GET", replies: [
            .file(Self.v2, etag: "\"v2\"", lastModified: Self.date2).cut(afterBodyBytes: 200_000),
            .file(Self.v2, etag: "\"v2\"", lastModified: Self.date2),
        ])
        #expect(try await scenario.sync(pinned)[0].failed, "cut, no retries")
        server.clearRequests()

        let reports = try await scenario.sync(pinned)
        #expect(reports[0].outcome == .transferred)
        let gets = server.requests.filter { $0.method == "GET" }
        #expect(gets.map { $0.headers["Range"] } == ["bytes=200000-"])
        #expect(local == Self.v2)
    }

    /// Some servers put validators on GET replies only. A HEAD that names no version is
    /// followed by a one-byte GET for them, so the entry is not fetched again on every run.
    @Test func validatorsOnlyOnGetRepliesStillMakeASecondRunANoOp() async throws {
        server.route("/f.bin", method: "HEAD", reply: .file(Self.v1))
        server.route("/f.bin", method: "GET", reply: .file(Self.v1, etag: "\"g1\"", lastModified: Self.date1))
        _ = try await scenario.sync(manifest())
        server.clearRequests()

        let reports = try await scenario.sync(manifest())
        #expect(reports[0].outcome == .skipped)
        // The first run recorded the GET's validators: the second asks with them, in one GET.
        #expect(server.requests.map { "\($0.method) \($0.headers["Range"] ?? "-") \($0.headers["If-None-Match"] ?? "-")" }
            == ["GET - \"g1\""])
    }

    /// The pin decides, not the server's size, and the same whether a record exists or not.
    @Test func aFileMatchingItsPinIsKeptWhateverTheServerSaysWithOrWithoutARecord() async throws {
        serve(Self.v1, etag: "\"v1\"")
        let pinned = try manifest("sha256: \(DigestHasher.hex(of: Self.v1))")
        _ = try await scenario.sync(pinned)
        let longer = Self.v2 + Data(count: 1_000)
        serve(longer, etag: "\"v3\"", date: Self.date2)
        #expect(try await scenario.sync(pinned).map(\.outcome) == [.skipped])
        for suffix in ["", "-wal", "-shm"] { unlink(scenario.rootPath(".mirror/state.sqlite" + suffix)) }
        #expect(await scenario.runner(pinned).plan().map(\.action) == [.skip])
        #expect(try await scenario.sync(pinned).map(\.outcome) == [.skipped])
        #expect(local == Self.v1)
    }

    @Test func aFailedOverlapCheckIsNeverTrustedByTheNextRun() async throws {
        serve(Self.v1, etag: "\"v1\"")
        // A partial file of unknown origin whose bytes are not the server's.
        try scenario.put(randomData(count: 150_000, seed: 300), at: "f.bin.part")
        let first = try await scenario.sync(manifest())
        #expect(first[0].outcome.isRangeMismatch, "\(first[0].outcome)")
        #expect(partial == nil, "the unproven bytes were discarded")

        let second = try await scenario.sync(manifest())
        #expect(second[0].outcome == .transferred)
        #expect(local?.fingerprint == Self.v1.fingerprint)
        #expect(try await scenario.verifier(manifest()).verify(rehash: true).map(\.status) == [.ok])
    }

    @Test func aPinAddedLaterIsEnforcedEvenIfTheRecordHasNoHash() async throws {
        serve(Self.v1, etag: "\"v1\"")
        // DEST has the right size but other bytes; the store vouches for its identity but
        // recorded no hash (as a store written by size alone would).
        try scenario.put(Self.v2, at: "f.bin")
        var info = stat()
        stat(scenario.rootPath("f.bin"), &info)
        try scenario.save(StateRecord(dest: "f.bin", url: server.url("/f.bin"), complete: CompleteVersion(
            validators: RemoteValidators(etag: "\"v1\"", lastModified: Self.date1, size: 300_000), sha256: nil,
            local: LocalIdentity(info))))

        let reports = try await scenario.sync(try manifest("sha256: \(DigestHasher.hex(of: Self.v1))"))
        #expect(reports[0].action == .replace(reason: "local file does not match its sha256 pin"))
        #expect(local?.fingerprint == Self.v1.fingerprint)
    }

    @Test func aFileEditedInPlaceIsRestoredNotAdopted() async throws {
        serve(Self.v1, etag: "\"v1\"")
        _ = try await scenario.sync(manifest())
        try await Task.sleep(for: .milliseconds(10))
        try Self.v2.write(to: URL(fileURLWithPath: scenario.rootPath("f.bin")))

        let before = try await scenario.verifier(manifest()).verify(rehash: false)
        #expect(before.map(\.status) == [.modified])
        let reports = try await scenario.sync(manifest())
        #expect(reports[0].action == .replace(reason: "local file was changed since mirror wrote it"))
        #expect(local?.fingerprint == Self.v1.fingerprint)
    }

    @Test func a416AtThePartialsSizeNeverPassesForTheWholeFile() async throws {
        serve(Self.v1, etag: "\"v1\"")
        _ = try await scenario.sync(manifest())
        // A new, longer version; its download stops after 100000 bytes.
        let v2 = randomData(count: 400_000, seed: 400)
        server.route("/f.bin", method: "HEAD", reply: .file(v2, etag: "\"v2\"", lastModified: Self.date2))
        server.route("/f.bin", method: "GET", reply: .file(v2, etag: "\"v2\"", lastModified: Self.date2).cut(afterBodyBytes: 100_000))
        _ = try await scenario.sync(manifest())
        #expect(partial?.count == 100_000)
        // Then a misbehaving server says the file ends where the partial does.
        server.route("/f.bin", method: "GET", reply: .status(416, headers: ["Content-Range": "bytes */100000"]))
        let reports = try await scenario.sync(manifest())

        #expect(reports[0].failed)
        #expect(local?.fingerprint == Self.v1.fingerprint, "the good old file stays")
    }

    @Test func aTouchedFileWithTheRecordedBytesIsStillComparedWithTheServer() async throws {
        serve(Self.v1, etag: "\"v1\"")
        _ = try await scenario.sync(manifest())
        // Copied over itself (new inode, new mtime), and the server moves to v2 of the same size.
        let path = scenario.rootPath("f.bin")
        try FileManager.default.copyItem(atPath: path, toPath: path + ".copy")
        try FileManager.default.removeItem(atPath: path)
        try FileManager.default.moveItem(atPath: path + ".copy", toPath: path)
        serve(Self.v2, etag: "\"v2\"")

        let reports = try await scenario.sync(manifest())
        #expect(reports[0].action == .replace(reason: "the remote file changed: ETag changed from \"v1\" to \"v2\""))
        #expect(local?.fingerprint == Self.v2.fingerprint)
    }

    @Test func afterAFailedOverlapCheckLaterCutsAreResumedNotRestarted() async throws {
        try scenario.put(randomData(count: 100_000, seed: 301), at: "f.bin.part")
        // Every body is cut after 300000 bytes; the file has 700000.
        let data = randomData(count: 700_000, seed: 302)
        server.route("/f.bin", method: "HEAD", reply: .file(data, etag: "\"d\""))
        server.route("/f.bin", method: "GET", reply: .file(data, etag: "\"d\"").cut(afterBodyBytes: 300_000))
        let reports = try await scenario.sync(try manifest().withRetries(4))

        #expect(reports[0].outcome == .transferred, "\(reports[0].outcome)")
        #expect(local?.fingerprint == data.fingerprint)
        let ranges = server.requests.filter { $0.method == "GET" }.map { $0.headers["Range"] }
        #expect(ranges.first == "bytes=34464-", "the foreign partial was checked")
        #expect(ranges.dropFirst().first == .some(nil), "then a restart from 0")
        #expect(ranges.dropFirst(2).allSatisfy { $0 != nil }, "and resumes after that: \(ranges)")
    }

    @Test func planWritesNothingEvenWithAStore() async throws {
        serve(Self.v1, etag: "\"v1\"")
        _ = try await scenario.sync(manifest())
        let before = scenario.directory.listing("root").map { path -> String in
            let attributes = try? FileManager.default.attributesOfItem(atPath: scenario.rootPath(path))
            return "\(path) \(attributes?[.size] ?? 0) \(attributes?[.modificationDate] ?? 0)"
        }
        serve(Self.v2, etag: "\"v2\"")
        _ = await scenario.runner(try manifest()).plan()
        let after = scenario.directory.listing("root").map { path -> String in
            let attributes = try? FileManager.default.attributesOfItem(atPath: scenario.rootPath(path))
            return "\(path) \(attributes?[.size] ?? 0) \(attributes?[.modificationDate] ?? 0)"
        }
        #expect(before == after)
    }

    @Test func aSecondRunOnTheSameRootIsRefused() async throws {
        let held = try await RunLock.acquire(root: scenario.root)
        serve(Self.v1, etag: "\"v1\"")
        await #expect(throws: RunLockError.self) { try await scenario.sync(manifest()) }
        do {
            _ = try await scenario.sync(manifest())
        } catch {
            #expect("\(error)".contains("process \(getpid())"))
        }
        withExtendedLifetime(held) {}
    }
}

extension Manifest {
    /// The same manifest with every entry's `retries` set.
    func withRetries(_ retries: Int) -> Manifest {
        var copy = self
        for index in copy.entries.indices { copy.entries[index].settings.retries = retries }
        return copy
    }
}

extension EntryReport.Outcome {
    var isRangeMismatch: Bool {
        if case .failed(.rangeMismatch) = self { return true }
        return false
    }
}
