import Foundation
import Testing
@testable import MirrorCore

/// Segmented downloads against nginx, which caps each connection (`limit_rate`) as CDNs and
/// download mirrors do, and logs each request's connection, `Range`, `If-Match` and
/// `If-Unmodified-Since`.
@Suite(.serialized)
struct SegmentedDownloadTests {
    static let mebibyte = 1 << 20

    /// nginx in front of itself under /bare/, hiding ETag and Last-Modified: a server that
    /// names no version of its files.
    static let bare = """
            location /bare/ {
                rewrite ^/bare/(.*)$ /$1 break;
                proxy_pass http://127.0.0.1:$server_port;
                proxy_hide_header ETag;
                proxy_hide_header Last-Modified;
                proxy_buffering off;
            }
        """

    /// The GETs nginx logged for `path`, in the order they ended.
    static func gets(_ requests: [LoggedRequest], _ path: String) -> [LoggedRequest] {
        requests.filter { $0.method == "GET" && $0.uri == path }
    }

    /// The most requests nginx was serving at one moment.
    static func mostAtOnce(_ requests: [LoggedRequest]) -> Int {
        var edges: [(at: Double, step: Int)] = []
        for request in requests {
            edges.append((request.startedAt, 1))
            edges.append((request.endedAt, -1))
        }
        // An end before a start at the same moment: a connection handed on is not two.
        edges.sort { ($0.at, $0.step) < ($1.at, $1.step) }
        var current = 0
        var most = 0
        for edge in edges {
            current += edge.step
            most = max(most, current)
        }
        return most
    }

    /// A 16 MiB file at `concurrency: 4` from a server that sends 2 MiB/s per connection comes
    /// over 4 connections: the entry's GET of the whole file, then range requests for the rest,
    /// each with `If-Match` (nginx's strong ETag) and a `Range`; the file is byte-identical, and
    /// the transfers take well under the 8 s one connection would.
    @Test func aLargeFileComesOverAsManyConnectionsAsThereAreSlots() async throws {
        let data = randomData(count: 16 * Self.mebibyte, seed: 71)
        let scenario = try SyncScenario(.nginx(site: ["big.bin": data], options: NginxOptions(rateLimit: 2 * Self.mebibyte)))
        let manifest = ManifestText(top: ["concurrency: 4", "segment_min: 4MiB"], entries: [.init(scenario.url("/big.bin"))])
        let started = ContinuousClock.now
        let reports = try await scenario.sync(manifest)
        let elapsed = ContinuousClock.now - started
        #expect(reports.map(\.outcome) == [.transferred], "\(reports)")
        #expect(scenario.local("big.bin")?.fingerprint == data.fingerprint)
        #expect(scenario.files() == ["big.bin"], "no .part left")

        let gets = Self.gets(try scenario.nginxRequests(), "/big.bin")
        // Four at once, never more: a stream cut short by a split stops mid-body, and its next
        // range needs a new connection.
        #expect(Self.mostAtOnce(gets) == 4, "\(gets)")
        #expect(Set(gets.map(\.connection)).count >= 4, "\(gets)")
        let lead = try #require(gets.first { $0.range == nil }, "the entry's own GET: \(gets)")
        #expect(lead.ifMatch == nil)
        let ranges = gets.filter { $0.range != nil }
        #expect(ranges.count >= 3, "\(gets)")
        for request in ranges {
            #expect(request.status == 206, "\(request)")
            #expect(request.ifMatch != nil && request.ifMatch?.hasPrefix("W/") == false, "every range names the version: \(request)")
        }
        // On the wire, as nginx saw it (the disk's fsyncs, slow when other tests write, apart):
        // well under the 8 s one connection needs.
        let wire = (gets.map(\.endedAt).max() ?? 0) - (gets.map(\.startedAt).min() ?? 0)
        #expect(wire < 6, "16 MiB at 2 MiB/s per connection over 4 connections took \(wire) s on the wire (\(elapsed) in all)")
        let store = try #require(StateStore.open(root: scenario.root, mode: .readWrite).store)
        #expect(try store.segmentMap(for: "big.bin") == nil, "the map goes once the file is whole")
        store.close()
    }

    /// Where the run opened early connections to the file's origin (one, for one entry), the
    /// streams' connections are opened too once the lead's head shows a file worth splitting,
    /// while its pace is measured: the split's range requests go out on them, each taken once,
    /// and none is left over.
    @Test func theStreamsConnectionsAreOpenedAtTheLeadsHead() async throws {
        let data = randomData(count: 16 * Self.mebibyte, seed: 73)
        let scenario = try SyncScenario(.nginx(site: ["big.bin": data], options: NginxOptions(rateLimit: 2 * Self.mebibyte)))
        let manifest = try scenario.load(ManifestText(top: ["concurrency: 4", "segment_min: 4MiB"], entries: [.init(scenario.url("/big.bin"))]))
        let early = try #require(EarlyConnections.open(for: manifest, concurrency: 4, proxies: .direct))
        #expect(early.target.count == 1)
        var settings = SyncScenario.Settings()
        settings.early = early
        let reports = try await scenario.sync(manifest, settings)
        #expect(reports.map(\.outcome) == [.transferred], "\(reports)")
        #expect(scenario.local("big.bin")?.fingerprint == data.fingerprint)
        let counts = early.counts
        #expect(counts.taken == 4 && counts.open == 0, "the lead's and the three streams': \(counts)")
        let gets = Self.gets(try scenario.nginxRequests(), "/big.bin")
        #expect(gets.filter { $0.range != nil }.count >= 3, "\(gets)")
    }

    /// A large file that changed on the server: its conditional GET is answered 200, and that
    /// reply leads segments as a plain GET's would. The entry's one GET carries `If-None-Match`
    /// (the version on disk) and no range; the other segments are range requests for the new
    /// version only (`If-Match` with its strong ETag, no `If-None-Match`), answered 206.
    @Test func aChangedLargeFileComesInSegmentsFromItsConditionalGet() async throws {
        let old = randomData(count: 8 * Self.mebibyte, seed: 81)
        let scenario = try SyncScenario(.nginx(site: ["big.bin": old], options: NginxOptions(rateLimit: 2 * Self.mebibyte)))
        let manifest = ManifestText(top: ["concurrency: 4", "segment_min: 4MiB"], entries: [.init(scenario.url("/big.bin"))])
        #expect(try await scenario.sync(manifest).map(\.outcome) == [.transferred])
        // The same size, new bytes and a new date: a new ETag.
        let new = randomData(count: 8 * Self.mebibyte, seed: 82)
        let path = scenario.directory.path("site/big.bin")
        try new.write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: 3_600)], ofItemAtPath: path)
        scenario.nginx.clearLog()

        let reports = try await scenario.sync(manifest)

        #expect(reports.map(\.outcome) == [.transferred], "\(reports)")
        #expect(reports.first?.action.name == "replace", "\(reports)")
        #expect(scenario.local("big.bin")?.fingerprint == new.fingerprint)
        #expect(scenario.files() == ["big.bin"], "no .part left")
        let requests = try scenario.nginxRequests()
        #expect(!requests.contains { $0.method == "HEAD" }, "no probe: \(requests)")
        let gets = Self.gets(requests, "/big.bin")
        let lead = try #require(gets.first { $0.range == nil }, "the entry's own GET: \(gets)")
        #expect(lead.ifNoneMatch != nil && lead.status == 200 && lead.ifMatch == nil, "\(lead)")
        #expect(gets.filter { $0.range == nil }.count == 1, "one conditional GET: \(gets)")
        let ranges = gets.filter { $0.range != nil }
        #expect(!ranges.isEmpty, "the changed file came over one connection: \(gets)")
        for request in ranges {
            #expect(request.status == 206, "\(request)")
            #expect(request.ifNoneMatch == nil, "a range asks for the new version, not on the old one's condition: \(request)")
            #expect(request.ifMatch != nil && request.ifMatch?.hasPrefix("W/") == false, "every range names the version: \(request)")
        }
        let store = try #require(StateStore.open(root: scenario.root, mode: .readWrite).store)
        #expect(try store.segmentMap(for: "big.bin") == nil, "the map goes once the file is whole")
        store.close()
    }

    /// Below `segment_min` a file stays one request, as before.
    @Test func aFileUnderSegmentMinIsOneRequest() async throws {
        let data = randomData(count: 3 * Self.mebibyte, seed: 72)
        let scenario = try SyncScenario(.nginx(site: ["small.bin": data]))
        let manifest = ManifestText(top: ["concurrency: 4", "segment_min: 4MiB"], entries: [.init(scenario.url("/small.bin"))])
        let reports = try await scenario.sync(manifest)
        #expect(reports.map(\.outcome) == [.transferred], "\(reports)")
        let gets = Self.gets(try scenario.nginxRequests(), "/small.bin")
        #expect(gets.count == 1 && gets[0].range == nil, "\(gets)")
        #expect(scenario.local("small.bin")?.fingerprint == data.fingerprint)
    }

    /// A server that answers ranges with the whole file (nginx `max_ranges 0`): the range
    /// requests are refused unwritten and the entry's own GET takes back the whole file.
    @Test func aWholeFileAnswerToARangeFoldsTheHostBackToOneStream() async throws {
        let first = randomData(count: 8 * Self.mebibyte, seed: 73)
        // Ranges offered, then ignored: as a server behind a cache that strips them.
        let rangeless = """
                location /rangeless/ {
                    rewrite ^/rangeless/(.*)$ /$1 break;
                    max_ranges 0;
                    add_header Accept-Ranges bytes;
                }
            """
        let scenario = try SyncScenario(.nginx(site: ["a.bin": first], options: NginxOptions(
            rateLimit: 2 * Self.mebibyte, extraServerConfiguration: rangeless)))
        let manifest = ManifestText(top: ["concurrency: 4", "segment_min: 4MiB"], entries: [
            .init(scenario.url("/rangeless/a.bin")),
        ])
        let reports = try await scenario.sync(manifest)
        #expect(reports.map(\.outcome) == [.transferred], "\(reports)")
        #expect(scenario.local("a.bin")?.fingerprint == first.fingerprint)
        let gets = Self.gets(try scenario.nginxRequests(), "/rangeless/a.bin")
        let ranged = gets.filter { $0.range != nil }
        #expect(!ranged.isEmpty && ranged.allSatisfy { $0.status == 200 && $0.ifMatch != nil }, "\(gets)")
        // Folded: no range request goes out after a start over. On a loaded machine
        // the entry's own GET may reach the end of its range before the 200s to the ranges come
        // back; it is then no longer there to take the ranges back, and the entry starts over once,
        // as one stream.
        let whole = gets.filter { $0.range == nil }.sorted { $0.startedAt < $1.startedAt }
        #expect(whole.count == 1 || whole.count == 2, "at most one start over: \(gets) \(reports)")
        if whole.count == 2 {
            // The start over comes after the fold: every range was asked for before it.
            #expect(ranged.allSatisfy { $0.startedAt <= whole[1].startedAt }, "no range after the fold: \(gets)")
        }

    }

    /// A pinned file from a server that names no version (nginx in front of itself, hiding
    /// ETag and Last-Modified): the sha256 pin checks the whole file, so it still comes over
    /// several connections; its ranges carry no precondition (there is nothing to name), each
    /// answered 206, and the file is byte-identical.
    @Test func aPinnedFileFromAServerWithoutValidatorsIsSegmentedToo() async throws {
        let data = randomData(count: 12 * Self.mebibyte, seed: 74)
        let scenario = try SyncScenario(.nginx(site: ["big.bin": data], options: NginxOptions(
            rateLimit: 2 * Self.mebibyte, extraServerConfiguration: Self.bare)))
        let pin = DigestHasher.hex(of: data)
        let manifest = ManifestText(top: ["concurrency: 4", "segment_min: 4MiB"], entries: [
            .init(scenario.url("/bare/big.bin"), "sha256: \(pin)"),
        ])
        let reports = try await scenario.sync(manifest)
        #expect(reports.map(\.outcome) == [.transferred], "\(reports)")
        #expect(scenario.local("big.bin")?.fingerprint == data.fingerprint)
        #expect(scenario.files() == ["big.bin"], "no .part left")
        let gets = Self.gets(try scenario.nginxRequests(), "/bare/big.bin")
        let ranges = gets.filter { $0.range != nil }
        #expect(!ranges.isEmpty, "split although no validator names the version: \(gets)")
        for request in ranges {
            #expect(request.status == 206, "\(request)")
            #expect(request.ifMatch == nil && request.ifUnmodifiedSince == nil, "nothing to name: \(request)")
        }
    }

    /// Streams that take several ranges each (a 32 MiB file at 1 MiB/s per connection over 4):
    /// the hash, computed over the written prefix as it grows, must read only bytes that were
    /// written. Progress is posted, and a stream's late progress for the range it had before
    /// once counted for its next range, so the hash read that range before it was written and
    /// the pin failed on a correct file (about one run in two).
    ///
    /// A second entry (3 MiB, about 3 s) holds a slot through the first split (also when the
    /// lead's pace takes a while to settle), which is then in three pieces of about 10 MiB. Its
    /// slot, given back, splits one of them (half of about 8 MiB left each); that pair ends
    /// about 4 s before the other two, which then have 4 MiB left each: the streams that ended
    /// take second ranges. (With every slot free at the first
    /// split the pieces end together, as they are planned to, and no stream takes another.)
    @Test func aPinnedFileWhoseStreamsTakeSeveralRangesVerifies() async throws {
        let data = randomData(count: 32 * Self.mebibyte, seed: 75)
        let slow = randomData(count: 3 * Self.mebibyte, seed: 76)
        let scenario = try SyncScenario(.nginx(site: ["big.bin": data, "slow.bin": slow], options: NginxOptions(rateLimit: Self.mebibyte)))
        let pin = DigestHasher.hex(of: data)
        let manifest = ManifestText(top: ["concurrency: 4", "segment_min: 4MiB"], entries: [
            .init(scenario.url("/big.bin"), "sha256: \(pin)"),
            .init(scenario.url("/slow.bin")),
        ])
        let reports = try await scenario.sync(manifest)
        #expect(reports.map(\.outcome) == [.transferred, .transferred], "\(reports)")
        #expect(reports.first?.attempts == 1, "\(reports)")
        #expect(scenario.local("big.bin")?.fingerprint == data.fingerprint)
        #expect(scenario.local("slow.bin")?.fingerprint == slow.fingerprint)
        let gets = Self.gets(try scenario.nginxRequests(), "/big.bin")
        #expect(gets.filter { $0.range != nil }.count > 3, "some stream took a second range: \(gets)")
    }

    /// A pinned file from a server that names no version changes under the download: the
    /// entry's GET reads the other version (its file was replaced once its first bytes were
    /// on disk), the ranges read the pinned one. The joined file fails the pin, and since
    /// nothing tied the ranges to one version, that is not taken for the server's settled
    /// answer: the entry starts over and gets the pinned file.
    @Test func aPinnedUnnamedFileThatChangesUnderItsRangesIsFetchedAgain() async throws {
        let data = randomData(count: 12 * Self.mebibyte, seed: 76)
        let other = randomData(count: 12 * Self.mebibyte, seed: 77)
        let scenario = try SyncScenario(.nginx(site: ["big.bin": other, "pinned.bin": data], options: NginxOptions(
            rateLimit: Self.mebibyte, extraServerConfiguration: Self.bare)))
        let pin = DigestHasher.hex(of: data)
        let manifest = ManifestText(top: ["concurrency: 4", "segment_min: 4MiB"], entries: [
            .init(scenario.url("/bare/big.bin"), "sha256: \(pin)"),
        ])
        let part = scenario.rootPath("big.bin.part")
        let site = scenario.directory.path("site")
        let swapper = Task {
            // Once the entry's GET has written its first bytes (it reads the file it opened,
            // whatever is renamed over it), the pinned version takes the name: the ranges, which
            // start a quarter of a second later at the earliest, read that one.
            for _ in 0..<1000 {
                if let size = try? FileManager.default.attributesOfItem(atPath: part)[.size] as? Int, size > 0 { break }
                try await Task.sleep(for: .milliseconds(5))
            }
            guard rename(site + "/pinned.bin", site + "/big.bin") == 0 else { throw POSIXError(.EIO) }
        }
        let reports = try await scenario.sync(manifest)
        try await swapper.value
        #expect(reports.map(\.outcome) == [.transferred], "\(reports)")
        #expect((reports.first?.attempts ?? 0) >= 2, "the joined file failed its pin and was fetched again: \(reports)")
        #expect(scenario.local("big.bin")?.fingerprint == data.fingerprint)
    }

    /// The same wrong file from a server that names no version: the segmented attempt's
    /// mismatch is retried once, as one GET (nothing tied the ranges to one version); that
    /// GET's mismatch is the server's settled answer. Two downloads, not one per retry.
    @Test func aStableWrongFileWithoutValidatorsIsFetchedTwiceNotOncePerRetry() async throws {
        let data = randomData(count: 12 * Self.mebibyte, seed: 78)
        let scenario = try SyncScenario(.nginx(site: ["big.bin": data], options: NginxOptions(
            rateLimit: 4 * Self.mebibyte, extraServerConfiguration: Self.bare)))
        let wrongPin = DigestHasher.hex(of: randomData(count: 16, seed: 79))
        let manifest = ManifestText(top: ["concurrency: 4", "segment_min: 4MiB"], entries: [
            .init(scenario.url("/bare/big.bin"), "sha256: \(wrongPin)", "retries: 5"),
        ])
        let reports = try await scenario.sync(manifest)
        let report = try #require(reports.first)
        guard case .failed(let failure) = report.outcome, case .checksumMismatchUnchanged = failure else {
            Issue.record("a settled mismatch: \(reports)")
            return
        }
        #expect(report.attempts == 2, "\(reports)")
        #expect(scenario.local("big.bin") == nil)
        let gets = Self.gets(try scenario.nginxRequests(), "/bare/big.bin")
        #expect(gets.contains { $0.range != nil }, "the first attempt came in ranges: \(gets)")
        #expect(gets.filter { $0.range == nil }.count == 2, "then one plain GET: \(gets)")
        #expect(gets.last?.range == nil, "\(gets)")
    }
}
