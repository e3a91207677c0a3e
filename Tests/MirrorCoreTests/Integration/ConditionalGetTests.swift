import Foundation
import Synchronization
import Testing
@testable import MirrorCore

/// `sync` of a `DEST` the store vouches for is one conditional GET (`If-None-Match`,
/// `If-Modified-Since`), not a HEAD then a GET: counted in the logs of real servers, and
/// against the fault server for servers that ignore the conditions.
@Suite(.serialized)
struct ConditionalGetTests {
    static let names = ["a.bin", "b.bin", "c.bin", "d.bin"]

    static func inode(_ path: String) -> UInt64? {
        (try? FileManager.default.attributesOfItem(atPath: path)[.systemFileNumber] as? UInt64) ?? nil
    }

    static func manifest(_ scenario: SyncScenario, _ url: (String) -> String) throws -> Manifest {
        try scenario.load(ManifestText(entries: names.map { .url(url("/\($0)"), dest: $0, "retries: 0") }))
    }

    @Test func aNoOpResyncAgainstNginxIsOneGetAnswered304PerFileAndNoHead() async throws {
        let site = Dictionary(uniqueKeysWithValues: Self.names.enumerated().map { ($1, randomData(count: 50_000 + $0, seed: 400 + UInt64($0))) })
        let scenario = try SyncScenario(.nginx(site: site))
        let manifest = try Self.manifest(scenario, scenario.url)
        #expect(try await scenario.sync(manifest).allSatisfy { $0.outcome == .transferred })
        let inodes = Self.names.map { Self.inode(scenario.rootPath($0)) }
        scenario.nginx.clearLog()

        let again = try await scenario.sync(manifest)

        #expect(again.map(\.outcome) == Array(repeating: .skipped, count: 4))
        #expect(again.map(\.action) == Array(repeating: .skip, count: 4))
        #expect(again.map(\.bytesTransferred) == [0, 0, 0, 0])
        let requests = try scenario.nginxRequests()
        #expect(requests.count == 4, "\(requests)")
        #expect(requests.allSatisfy { $0.method == "GET" && $0.status == 304 && $0.range == nil }, "\(requests)")
        #expect(Set(requests.map(\.uri)) == Set(Self.names.map { "/\($0)" }))
        for request in requests {
            let record = try #require(try scenario.record(String(request.uri.dropFirst()))?.complete?.validators)
            // The ETag only: a date asks "changed after?", not "the same version?".
            #expect(request.ifNoneMatch == record.etag && request.ifModifiedSince == nil, "\(request)")
        }
        #expect(Self.names.map { Self.inode(scenario.rootPath($0)) } == inodes, "DEST untouched")
        #expect(scenario.files().sorted() == Self.names)

        // plan keeps its HEAD.
        scenario.nginx.clearLog()
        let plan = await scenario.runner(manifest).plan()
        #expect(plan.map(\.action) == Array(repeating: .skip, count: 4))
        #expect(try scenario.nginxRequests().map(\.method) == Array(repeating: "HEAD", count: 4))
    }

    @Test func changedFilesAreOneRequestEachAndTheirNewBytesLand() async throws {
        let old = Dictionary(uniqueKeysWithValues: Self.names.enumerated().map { ($1, randomData(count: 60_000, seed: 500 + UInt64($0))) })
        let scenario = try SyncScenario(.nginx(site: old))
        let manifest = try Self.manifest(scenario, scenario.url)
        _ = try await scenario.sync(manifest)
        // Same size, new bytes, a new date: a new ETag and Last-Modified.
        var new: [String: Data] = [:]
        let later = Date(timeIntervalSinceNow: 3_600)
        for (index, name) in Self.names.enumerated() {
            new[name] = randomData(count: 60_000, seed: 600 + UInt64(index))
            let path = scenario.directory.path("site/" + name)
            try new[name]!.write(to: URL(fileURLWithPath: path))
            try FileManager.default.setAttributes([.modificationDate: later], ofItemAtPath: path)
        }
        scenario.nginx.clearLog()

        let reports = try await scenario.sync(manifest)

        #expect(reports.map(\.outcome) == Array(repeating: .transferred, count: 4))
        #expect(reports.allSatisfy { $0.action.name == "replace" && $0.action.reason?.hasPrefix("the remote file changed") == true },
                "\(reports.map(\.action))")
        for name in Self.names { #expect(scenario.local(name)?.fingerprint == new[name]!.fingerprint, "\(name)") }
        #expect(scenario.files().sorted() == Self.names, "no partial file left")
        let requests = try scenario.nginxRequests()
        #expect(requests.count == 4, "one request per file: \(requests)")
        #expect(requests.allSatisfy { $0.method == "GET" && $0.status == 200 && $0.ifNoneMatch != nil }, "\(requests)")
        #expect(Set(requests.map(\.uri)) == Set(Self.names.map { "/\($0)" }))
    }

    /// The same bytes under a new date on the server (a `touch`, a copy that kept no date): one
    /// GET each brings them, `DEST` is kept (the same inode) and dated with the new version,
    /// whose ETag the store records; the next sync is a 304 each.
    @Test func theSameBytesUnderANewDateKeepDestinationAndRecordTheNewVersion() async throws {
        let site = Dictionary(uniqueKeysWithValues: Self.names.enumerated().map { ($1, randomData(count: 30_000, seed: 450 + UInt64($0))) })
        let scenario = try SyncScenario(.nginx(site: site))
        let manifest = try Self.manifest(scenario, scenario.url)
        #expect(try await scenario.sync(manifest).allSatisfy { $0.outcome == .transferred })
        let inodes = Self.names.map { Self.inode(scenario.rootPath($0)) }
        let before = try Self.names.map { try #require(try scenario.record($0)?.complete?.validators.etag) }
        let later = Date(timeIntervalSince1970: 1_900_000_000)
        for name in Self.names {
            try FileManager.default.setAttributes([.modificationDate: later], ofItemAtPath: scenario.directory.path("site/" + name))
        }
        scenario.nginx.clearLog()

        let reports = try await scenario.sync(manifest)

        #expect(reports.map(\.outcome) == Array(repeating: .skipped, count: 4), "\(reports)")
        #expect(Self.names.map { Self.inode(scenario.rootPath($0)) } == inodes, "DEST kept, not replaced")
        #expect(scenario.files().sorted() == Self.names, "no partial file left")
        let requests = try scenario.nginxRequests()
        #expect(requests.map { "\($0.method) \($0.status)" } == Array(repeating: "GET 200", count: 4), "\(requests)")
        for (index, name) in Self.names.enumerated() {
            #expect(scenario.local(name)?.fingerprint == site[name]!.fingerprint, "\(name)")
            let record = try #require(try scenario.record(name)?.complete, "\(name)")
            #expect(record.validators.etag != before[index] && record.validators.etag != nil, "\(name): the new version recorded")
            let modified = try #require(FileManager.default.attributesOfItem(atPath: scenario.rootPath(name))[.modificationDate] as? Date)
            #expect(modified == later, "\(name): dated with the new version")
            #expect(record.local.modifiedNanoseconds == 1_900_000_000 * 1_000_000_000, "\(name): recorded as it is now")
        }

        scenario.nginx.clearLog()
        let again = try await scenario.sync(manifest)
        #expect(again.map(\.outcome) == Array(repeating: .skipped, count: 4))
        #expect(try scenario.nginxRequests().map { "\($0.method) \($0.status)" } == Array(repeating: "GET 304", count: 4))
    }

    @Test func aNoOpResyncAgainstLighttpdIsOneGetAnswered304PerFile() async throws {
        let site = try TemporaryDirectory(prefix: "mirror-lighttpd-site")
        for (index, name) in Self.names.enumerated() { try site.write(randomData(count: 40_000, seed: 700 + UInt64(index)), to: name) }
        let lighttpd = try await LighttpdServer.start(serving: site)
        defer { lighttpd.stop() }
        let work = try SyncScenario()
        let manifest = try Self.manifest(work, lighttpd.url)
        #expect(try await work.sync(manifest).allSatisfy { $0.outcome == .transferred })
        let before = try await lighttpd.requests(atLeast: 4).count

        let again = try await work.sync(manifest)

        #expect(again.map(\.outcome) == Array(repeating: .skipped, count: 4))
        let requests = try await lighttpd.requests(atLeast: before + 4).dropFirst(before)
        #expect(requests.map { "\($0.method) \($0.status)" } == Array(repeating: "GET 304", count: 4), "\(requests)")
        for request in requests {
            let record = try #require(try work.record(String(request.uri.dropFirst()))?.complete?.validators)
            #expect(request.ifNoneMatch == record.etag, "\(request)")
        }
    }

    // MARK: Servers that ignore the conditions

    static let v1 = randomData(count: 200_000, seed: 800)
    static let v2 = randomData(count: 200_000, seed: 801)
    static let date1 = "Sun, 06 Nov 1994 08:49:37 GMT"
    static let date2 = "Mon, 07 Nov 1994 08:49:37 GMT"

    /// `f.bin` synced once from a fault server answering v1 (ETag `"v1"`), then its requests forgotten.
    static func syncedOnce(_ lines: String...) async throws -> (SyncScenario, Manifest) {
        let scenario = try SyncScenario(.faultServer)
        scenario.server.route("/f.bin", reply: .file(v1, etag: "\"v1\"", lastModified: date1))
        let manifest = try scenario.load(.files(.init(scenario.server.url("/f.bin"), dest: "f.bin", lines: ["retries: 0"] + lines)))
        #expect(try await scenario.sync(manifest)[0].outcome == .transferred)
        scenario.server.clearRequests()
        return (scenario, manifest)
    }

    @Test func a200OfTheRecordedVersionIsRecognisedFromItsHeadAndWritesNothing() async throws {
        // The same ETag sent weak, as a server may for a young file: compared weakly.
        for etag in ["\"v1\"", "W/\"v1\""] {
            let (scenario, manifest) = try await Self.syncedOnce()
            scenario.server.route("/f.bin", reply: .file(Self.v1, etag: etag, lastModified: Self.date1, honorConditions: false))
            let inode = Self.inode(scenario.rootPath("f.bin"))
            let watch = try WriteWatch(scenario.root)

            let reports = try await scenario.sync(manifest)

            #expect(reports[0].outcome == .skipped && reports[0].action == .skip, "\(etag)")
            #expect(reports[0].bytesTransferred == 0)
            #expect(scenario.server.requests.map(\.method) == ["GET"])
            #expect(scenario.server.requests.first?.headers["If-None-Match"] == "\"v1\"")
            #expect(scenario.server.requests.first?.headers["If-Modified-Since"] == nil)
            #expect(Self.inode(scenario.rootPath("f.bin")) == inode, "DEST untouched")
            #expect(scenario.local("f.bin")?.fingerprint == Self.v1.fingerprint)
            let touched = watch.changes().filter { $0.hasSuffix("/f.bin") || $0.hasSuffix("/f.bin.part") }
            #expect(touched.isEmpty, "neither DEST nor a .part was written: \(touched)")
            #expect(scenario.files() == ["f.bin"])
        }
    }

    /// A server that names its versions by date alone keeps the probe: a 304 to
    /// `If-Modified-Since` means "not newer", and a new version whose date went back (a
    /// rollback, a copy that kept its date) or stayed (a rebuild under a fixed date) with other
    /// bytes would be kept stale. The probe compares date and size for equality, as `plan` does.
    @Test(arguments: [("1994-11-05: an older date", "Sat, 05 Nov 1994 08:49:37 GMT", 200_000),
                      ("the same date, another size", "Sun, 06 Nov 1994 08:49:37 GMT", 150_000)])
    func aRecordWithoutAnETagKeepsTheProbeAndSeesANewVersionAtAnOlderOrTheSameDate(
        _ case: (String, String, Int)) async throws {
        let scenario = try SyncScenario(.faultServer)
        scenario.server.route("/f.bin", reply: .file(Self.v1, lastModified: Self.date1))
        let manifest = try scenario.load(.files(.init(scenario.server.url("/f.bin"), dest: "f.bin", lines: ["retries: 0"])))
        _ = try await scenario.sync(manifest)
        #expect(try await scenario.sync(manifest)[0].outcome == .skipped, "unchanged: skipped after a HEAD")
        #expect(scenario.server.requests.suffix(1).map(\.method) == ["HEAD"])
        let changed = randomData(count: `case`.2, seed: 803)
        // Honoured as python's http.server and many others do: 304 when not newer.
        scenario.server.route("/f.bin", reply: .file(changed, lastModified: `case`.1))
        scenario.server.clearRequests()

        let reports = try await scenario.sync(manifest)

        #expect(reports[0].outcome == .transferred, "\(`case`.0)")
        #expect(scenario.local("f.bin")?.fingerprint == changed.fingerprint, "\(`case`.0)")
        #expect(scenario.server.requests.map(\.method) == ["HEAD", "GET"], "\(`case`.0)")
        #expect(scenario.server.requests.allSatisfy { $0.headers["If-Modified-Since"] == nil })
    }

    /// A 304 carries the validators a 200 would have (RFC 9110 §15.4.5): one that names another
    /// version than the one asked about proves nothing, and the attempt asks again with a probe,
    /// which decides as `plan` does.
    @Test func a304NamingAnotherVersionIsCheckedWithAProbe() async throws {
        let (scenario, manifest) = try await Self.syncedOnce()
        scenario.server.route("/f.bin", replies: [
            .status(304, headers: ["ETag": "\"v2\"", "Last-Modified": Self.date2]),
            .file(Self.v2, etag: "\"v2\"", lastModified: Self.date2),
            .file(Self.v2, etag: "\"v2\"", lastModified: Self.date2),
        ])

        let reports = try await scenario.sync(manifest)

        #expect(reports[0].outcome == .transferred)
        #expect(reports[0].action == .replace(reason: "the remote file changed: ETag changed from \"v1\" to \"v2\""))
        #expect(scenario.local("f.bin")?.fingerprint == Self.v2.fingerprint)
        #expect(scenario.server.requests.map(\.method) == ["GET", "HEAD", "GET"])
    }

    /// An ETag that is not one entity-tag (`*`, a list, an unquoted token) is never sent back
    /// as a condition: `If-None-Match: *` is answered 304 for any version at all.
    @Test(arguments: ["*", "\"a\", \"b\"", "bare-token"])
    func anETagThatIsNotOneTagIsNeverSentAsACondition(_ etag: String) async throws {
        let scenario = try SyncScenario(.faultServer)
        scenario.server.route("/f.bin", reply: .file(Self.v1, etag: etag, lastModified: Self.date1))
        let manifest = try scenario.load(.files(.init(scenario.server.url("/f.bin"), dest: "f.bin", lines: ["retries: 0"])))
        _ = try await scenario.sync(manifest)
        let changed = randomData(count: 150_000, seed: 804)
        scenario.server.route("/f.bin", reply: .file(changed, etag: etag, lastModified: Self.date2))
        scenario.server.clearRequests()

        let reports = try await scenario.sync(manifest)

        #expect(scenario.server.requests.allSatisfy { $0.headers["If-None-Match"] == nil }, "\(etag)")
        #expect(scenario.server.requests.first?.method == "HEAD", "\(etag)")
        #expect(reports[0].outcome == .transferred, "\(etag)")
        #expect(scenario.local("f.bin")?.fingerprint == changed.fingerprint, "\(etag)")
    }

    /// A `size` pin the recorded size contradicts is reported with the server's own number,
    /// from a probe: a 304 says no size.
    @Test func aSizePinTheRecordContradictsKeepsTheProbe() async throws {
        let (scenario, _) = try await Self.syncedOnce()
        let manifest = try scenario.load(.files(.init(scenario.server.url("/f.bin"), dest: "f.bin", lines: ["retries: 0", "size: 200001"])))

        let reports = try await scenario.sync(manifest)

        #expect(reports[0].outcome == .failed(.sizePinConflict(pinned: 200_001, remote: 200_000)))
        #expect(scenario.server.requests.map(\.method) == ["HEAD"])
        #expect(scenario.local("f.bin")?.fingerprint == Self.v1.fingerprint)
    }

    @Test func a200WithAnotherETagReplacesDEST() async throws {
        let (scenario, manifest) = try await Self.syncedOnce()
        scenario.server.route("/f.bin", reply: .file(Self.v2, etag: "\"v2\"", lastModified: Self.date2, honorConditions: false))

        let reports = try await scenario.sync(manifest)

        #expect(reports[0].outcome == .transferred)
        #expect(reports[0].action == .replace(reason: "the remote file changed: ETag changed from \"v1\" to \"v2\""))
        #expect(reports[0].bytesTransferred == 200_000)
        #expect(scenario.local("f.bin")?.fingerprint == Self.v2.fingerprint)
        #expect(scenario.server.requests.map(\.method) == ["GET"])
        #expect(try scenario.record("f.bin")?.complete?.validators == RemoteValidators(etag: "\"v2\"", lastModified: Self.date2, size: 200_000))
    }

    @Test func a200ThatContradictsTheSizePinFailsAndWritesNothing() async throws {
        let (scenario, manifest) = try await Self.syncedOnce("size: 200000")
        scenario.server.route("/f.bin", reply: .file(randomData(count: 150_000, seed: 802), etag: "\"v3\""))
        let inode = Self.inode(scenario.rootPath("f.bin"))

        let reports = try await scenario.sync(manifest)

        #expect(reports[0].outcome == .failed(.sizePinConflict(pinned: 200_000, remote: 150_000)))
        #expect(reports[0].action == .fail(.sizePinConflict(pinned: 200_000, remote: 150_000)))
        #expect(scenario.server.requests.map(\.method) == ["GET"])
        #expect(Self.inode(scenario.rootPath("f.bin")) == inode)
        #expect(scenario.local("f.bin")?.fingerprint == Self.v1.fingerprint)
        #expect(scenario.files() == ["f.bin"])
    }

    /// The events of a re-run are those a probe's answer would have led to: `probed` with what
    /// the reply stands for (a 304: the recorded facts), then `decided`.
    @Test func eventsAreThoseOfTheProbesPath() async throws {
        let (scenario, manifest) = try await Self.syncedOnce()
        let events = Mutex<[String]>([])
        let settings = SyncScenario.Settings(events: { event in
            let line: String? = switch event {
            case .started(let dest, _): "started \(dest)"
            case .probed(let dest, _, let facts): "probed \(dest) \(facts)"
            case .decided(let dest, let action): "decided \(dest) \(action)"
            case .finished(let report): "finished \(report.dest) \(report.outcome)"
            default: nil
            }
            if let line { events.withLock { $0.append(line) } }
        })
        let recorded = RemoteFacts.available(RemoteFile(size: 200_000, etag: "\"v1\"", lastModified: Self.date1))
        _ = try await scenario.sync(manifest, settings)
        #expect(events.withLock { $0 } == [
            "started f.bin", "probed f.bin \(recorded)", "decided f.bin \(Action.skip)", "finished f.bin \(EntryReport.Outcome.skipped)",
        ])

        events.withLock { $0 = [] }
        scenario.server.route("/f.bin", reply: .file(Self.v2, etag: "\"v2\"", lastModified: Self.date2))
        _ = try await scenario.sync(manifest, settings)
        let changed = RemoteFacts.available(RemoteFile(size: 200_000, etag: "\"v2\"", lastModified: Self.date2))
        let replace = Action.replace(reason: "the remote file changed: ETag changed from \"v1\" to \"v2\"")
        #expect(events.withLock { $0 } == [
            "started f.bin", "probed f.bin \(changed)", "decided f.bin \(replace)", "finished f.bin \(EntryReport.Outcome.transferred)",
        ])
    }

    @Test func aFailedConditionalGetIsRetriedAsOne() async throws {
        let (scenario, _) = try await Self.syncedOnce()
        scenario.server.route("/f.bin", replies: [
            .status(503, headers: ["Retry-After": "0"]), .status(304, headers: ["ETag": "\"v1\""]),
        ])
        let manifest = try scenario.load(.files(.init(scenario.server.url("/f.bin"), dest: "f.bin", lines: ["retries: 1"])))

        let reports = try await scenario.sync(manifest)

        #expect(reports[0].outcome == .skipped && reports[0].attempts == 2)
        #expect(scenario.server.requests.map(\.method) == ["GET", "GET"])
        #expect(scenario.server.requests.allSatisfy { $0.headers["If-None-Match"] == "\"v1\"" })
    }

    @Test func theConditionsGoToEveryHopAndSecretsStayWithTheirOrigin() async throws {
        let other = try FaultServer.start(host: "127.0.0.2")
        defer { other.stop() }
        let scenario = try SyncScenario(.faultServer)
        let server = scenario.server
        server.route("/same", reply: .redirect(to: server.url("/moved")))
        server.route("/moved", reply: .redirect(to: other.url("/final")))
        other.route("/final", reply: .file(Self.v1, etag: "\"v1\"", lastModified: Self.date1))
        let manifest = try scenario.load(.files(.url(server.url("/same"), dest: "r.bin", "retries: 0", "headers:", "  X-Token: s3cret")))
        _ = try await scenario.sync(manifest)
        server.clearRequests()
        other.clearRequests()
        other.route("/final", reply: .status(304, headers: ["ETag": "\"v1\""]))

        let reports = try await scenario.sync(manifest)

        #expect(reports[0].outcome == .skipped)
        let hops = server.requests + other.requests
        #expect(hops.map(\.method) == ["GET", "GET", "GET"], "\(hops)")
        #expect(hops.allSatisfy { $0.headers["If-None-Match"] == "\"v1\"" && $0.headers["If-Modified-Since"] == nil })
        #expect(server.requests.allSatisfy { $0.headers["X-Token"] == "s3cret" })
        #expect(other.requests.allSatisfy { $0.headers["X-Token"] == nil }, "another host never sees it")
    }
}
