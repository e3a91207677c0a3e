import Foundation
import Testing
@testable import MirrorCore

/// sync against the fault-injecting server: scripted replies, each test asserting the
/// requests received, the outcome and the bytes on disk (declarative, as curl's suite does).
@Suite(.serialized)
struct FaultTests {
    let scenario: SyncScenario
    var server: FaultServer { scenario.server }

    init() throws {
        scenario = try SyncScenario(.faultServer)
    }

    /// Every request names mirror and its version as its User-Agent, once: a download, a plan's
    /// probe, a re-check's conditional GET, with and without headers of the entry's own. A
    /// User-Agent of the manifest's goes instead of it, once, whatever its case; an empty one
    /// goes empty.
    @Test func everyRequestNamesMirrorOnceUnlessTheManifestNamesAnAgent() async throws {
        let files = ["/a.bin": randomData(count: 3_000, seed: 81), "/b.bin": randomData(count: 3_000, seed: 82),
                     "/c.bin": randomData(count: 3_000, seed: 83), "/d.bin": randomData(count: 3_000, seed: 84)]
        for (path, data) in files { server.route(path, reply: .file(data, etag: "\"\(path.dropFirst())\"")) }
        let manifest = ManifestText.files(
            .url(server.url("/a.bin")),
            .url(server.url("/b.bin"), "headers:", "  X-Test: b"),
            .url(server.url("/c.bin"), "headers:", "  user-agent: fetcher/2", "  X-Test: c"),
            .url(server.url("/d.bin"), "headers:", "  User-Agent: \"\""))
        for _ in 0..<2 {
            let reports = try await scenario.sync(manifest)
            #expect(reports.allSatisfy { $0.outcome == .transferred || $0.outcome == .skipped }, "\(reports.map(\.outcome))")
        }
        let planned = await scenario.runner(try scenario.load(manifest)).plan()
        #expect(planned.allSatisfy { $0.action == .skip }, "\(planned.map(\.action))")

        let mirror = "mirror/\(MirrorVersion.string)"
        for (path, agent) in [("/a.bin", mirror), ("/b.bin", mirror), ("/c.bin", "fetcher/2"), ("/d.bin", "")] {
            let requests = server.requests(for: path)
            #expect(Set(requests.map(\.method)) == ["GET", "HEAD"], "\(path): \(requests)")
            #expect(requests.contains { $0.headers.contains("If-None-Match") }, "\(path): a conditional GET among them")
            for request in requests {
                #expect(request.headers.values("User-Agent") == [agent], "\(path): \(request)")
            }
        }
    }

    @Test func serviceUnavailableThenSuccessIsRetried() async throws {
        let data = randomData(count: 50_000, seed: 1)
        server.route("/a.bin", method: "GET", replies: [.status(503, headers: ["Retry-After": "0"]), .file(data)])
        let reports = try await scenario.sync(.files(.url(server.url("/a.bin"))))

        #expect(reports[0].outcome == .transferred)
        #expect(reports[0].attempts == 2)
        #expect(scenario.local("a.bin")?.fingerprint == data.fingerprint)
        #expect(scenario.files() == ["a.bin"])
    }

    /// A same-size change whose new ETag is the old one's text in another Unicode form (a
    /// precomposed é, then e and a combining accent) is a new version, even when the server
    /// answers the conditional GET with 200 rather than judging it: the reply is the new file,
    /// never "up to date" over the old bytes.
    @Test func aTagThatChangedOnlyInItsBytesIsANewVersion() async throws {
        let old = randomData(count: 5_000, seed: 71)
        let new = randomData(count: 5_000, seed: 72)
        server.route("/t.bin", method: "GET", replies: [
            .file(old, etag: "\"caf\u{E9}\""), .file(new, etag: "\"cafe\u{301}\"", honorConditions: false),
        ])
        let manifest = ManifestText.files(.url(server.url("/t.bin")))
        _ = try await scenario.sync(manifest)
        let again = try await scenario.sync(manifest)

        #expect(again[0].outcome == .transferred, "\(again[0].outcome)")
        #expect(scenario.local("t.bin")?.fingerprint == new.fingerprint)
        // The server reads header bytes as Latin-1: the recorded tag went back as its UTF-8 bytes.
        let sent = server.requests(for: "/t.bin").filter { $0.method == "GET" }
            .map { $0.headers["If-None-Match"].map { $0.unicodeScalars.map { UInt8(truncatingIfNeeded: $0.value) } } }
        #expect(sent == [nil, Array("\"caf\u{E9}\"".utf8)])
    }

    /// An ETag whose bytes are not UTF-8 (obs-text) names no version mirror can compare or send
    /// back: a same-size change under such tags is fetched, and no `If-None-Match` is made of
    /// a mangled tag.
    @Test func aTagThatIsNotUTF8NamesNoVersion() async throws {
        let old = randomData(count: 5_000, seed: 73)
        let new = randomData(count: 5_000, seed: 74)
        func reply(_ tag: UInt8, _ body: Data, head: Bool = false) -> FaultReply {
            var bytes = Data("HTTP/1.1 200 OK\r\nContent-Length: \(body.count)\r\nETag: \"".utf8)
            bytes.append(tag)
            bytes.append(contentsOf: Array("\"\r\n\r\n".utf8))
            if !head { bytes.append(body) }
            return .raw(bytes)
        }
        server.route("/o.bin", method: "GET", replies: [reply(0xE9, old), reply(0xE8, new)])
        server.route("/o.bin", method: "HEAD", reply: reply(0xE8, new, head: true))
        let manifest = ManifestText.files(.url(server.url("/o.bin")))
        _ = try await scenario.sync(manifest)
        let again = try await scenario.sync(manifest)

        #expect(again[0].outcome == .transferred, "\(again[0].outcome)")
        #expect(scenario.local("o.bin")?.fingerprint == new.fingerprint)
        #expect(server.requests(for: "/o.bin").allSatisfy { $0.headers["If-None-Match"] == nil })
    }

    /// 200,000 bytes stream into their partial file; 40,000 are held in memory (a new file's
    /// short body), and the cut attempt writes what it held to the partial file before the
    /// next one resumes it.
    @Test(arguments: [(200_000, 70_000), (40_000, 20_000)])
    func aCutBodyIsResumedFromWhereItStopped(size: Int, cut: Int) async throws {
        let data = randomData(count: size, seed: 2)
        server.route("/cut.bin", method: "GET", replies: [.file(data, etag: "\"c\"").cut(afterBodyBytes: cut), .file(data, etag: "\"c\"")])
        server.route("/cut.bin", method: "HEAD", reply: .file(data, etag: "\"c\""))
        let reports = try await scenario.sync(.files(.url(server.url("/cut.bin"))))

        #expect(reports[0].outcome == .transferred)
        let gets = server.requests(for: "/cut.bin").filter { $0.method == "GET" }
        if size <= DownloadMachine.overlapLength {
            // No record is kept of so short a file's version: the resume asks again for every
            // byte it has, to check them, and goes on from there.
            #expect(gets.map { $0.headers["Range"] } == [nil, "bytes=0-"])
        } else {
            #expect(gets.map { $0.headers["Range"] } == [nil, "bytes=\(cut)-"])
            #expect(gets.map { $0.headers["If-Range"] } == [nil, "\"c\""])
        }
        #expect(scenario.local("cut.bin")?.fingerprint == data.fingerprint)
    }

    /// A held body's attempt that ends the entry (no retry left) leaves the bytes it received
    /// in the partial file, as a streamed one does, for the next run to resume.
    @Test func aCutShortBodyWithNoRetryLeftKeepsWhatCame() async throws {
        let data = randomData(count: 40_000, seed: 3)
        server.route("/short-cut.bin", method: "GET", replies: [.file(data, etag: "\"s\"").cut(afterBodyBytes: 25_000), .file(data, etag: "\"s\"")])
        server.route("/short-cut.bin", method: "HEAD", reply: .file(data, etag: "\"s\""))
        let reports = try await scenario.sync(.files(.url(server.url("/short-cut.bin"), "retries: 0")))

        #expect(reports[0].outcome != .transferred)
        #expect(scenario.local("short-cut.bin") == nil)
        #expect(scenario.local("short-cut.bin.part") == data.prefix(25_000), "the bytes received are in the partial file")
        let again = try await scenario.sync(.files(.url(server.url("/short-cut.bin"))))
        #expect(again[0].outcome == .transferred)
        // A resume of so short a file asks again for every byte it has, to check them.
        let gets = server.requests(for: "/short-cut.bin").filter { $0.method == "GET" }
        #expect(gets.map { $0.headers["Range"] } == [nil, "bytes=0-"])
        #expect(scenario.local("short-cut.bin") == data)
    }

    /// With no ETag and no Last-Modified nothing says the bytes on disk are of the version the
    /// server has now: a change before the 64 KiB that a resume re-reads would be spliced in.
    @Test func aCutBodyFromAServerWithNoValidatorIsFetchedAgainNeverSpliced() async throws {
        let old = randomData(count: 200_000, seed: 2)
        var new = old
        new.replaceSubrange(0..<1_000, with: randomData(count: 1_000, seed: 22))
        server.route("/nv.bin", method: "GET", replies: [.file(old).cut(afterBodyBytes: 100_000), .file(new)])
        server.route("/nv.bin", method: "HEAD", reply: .file(new))
        let reports = try await scenario.sync(.files(.url(server.url("/nv.bin"))))

        #expect(reports[0].outcome == .transferred)
        // (The one-byte GETs ask a HEAD with no validators for the GET's.)
        let ranges = server.requests(for: "/nv.bin").filter { $0.method == "GET" && $0.headers["Range"] != "bytes=0-0" }.map { $0.headers["Range"] }
        #expect(ranges == [nil, nil], "restarted, not resumed")
        #expect(scenario.local("nv.bin")?.fingerprint == new.fingerprint)
    }

    /// The same after a run was killed: a partial file left by a server with no validators is
    /// not continued.
    @Test func aPartialFromAServerWithNoValidatorIsRestartedAndSaysWhy() async throws {
        let old = randomData(count: 200_000, seed: 23)
        var new = old
        new.replaceSubrange(0..<1_000, with: randomData(count: 1_000, seed: 24))
        try scenario.put(old.prefix(150_000), at: "nvp.bin.part")
        server.route("/nvp.bin", reply: .file(new))
        let plan = try await scenario.runner(.files(.url(server.url("/nvp.bin")))).plan()
        #expect(plan[0].action == .restart(reason: Planner.noVersion + ", so the partial file cannot be resumed safely"))
        let reports = try await scenario.sync(.files(.url(server.url("/nvp.bin"))))

        #expect(reports[0].outcome == .transferred)
        #expect(server.requests(for: "/nvp.bin").filter { $0.method == "GET" && $0.headers["Range"] != "bytes=0-0" }.map { $0.headers["Range"] } == [nil])
        #expect(scenario.local("nvp.bin")?.fingerprint == new.fingerprint)
    }

    /// Bodies longer than the write buffer are written a megabyte at a time: the bytes still
    /// in the buffer when the connection drops must reach the partial file, so the resume
    /// asks for exactly what is missing.
    @Test func aCutLongBodyKeepsEveryByteReceived() async throws {
        let data = randomData(count: 3 << 20, seed: 12)
        let cut = (2 << 20) + 123_457
        server.route("/long-cut.bin", method: "GET", replies: [.file(data, etag: "\"l1\"").cut(afterBodyBytes: cut), .file(data, etag: "\"l1\"")])
        server.route("/long-cut.bin", method: "HEAD", reply: .file(data, etag: "\"l1\""))
        let reports = try await scenario.sync(.files(.url(server.url("/long-cut.bin"))))

        #expect(reports[0].outcome == .transferred)
        let ranges = server.requests(for: "/long-cut.bin").filter { $0.method == "GET" }.map { $0.headers["Range"] }
        #expect(ranges == [nil, "bytes=\(cut)-"])
        #expect(scenario.local("long-cut.bin")?.fingerprint == data.fingerprint)
    }

    /// A reply of the whole file that ends early, with nothing in it to say so (no
    /// Content-Length, the connection just closes): the size the probe gave must be met.
    @Test func aBodyCutShortWithoutContentLengthNeverReplacesTheFile() async throws {
        let old = randomData(count: 300_000, seed: 30)
        let data = randomData(count: 200_000, seed: 31)
        try scenario.put(old, at: "short.bin")
        server.route("/short.bin", method: "HEAD", reply: .file(data, etag: "\"s2\""))
        let head = "HTTP/1.1 200 OK\r\nETag: \"s2\"\r\nConnection: close\r\n\r\n"
        server.route("/short.bin", method: "GET", reply: .raw(Data(head.utf8) + data.prefix(100_000)))
        let reports = try await scenario.sync(.files(.url(server.url("/short.bin"), "retries: 1")))

        #expect(reports[0].outcome == .failed(.partialBody(received: 100_000, expected: 200_000)))
        #expect(scenario.local("short.bin") == old, "the old file stays whole")
    }

    /// The same with nothing on disk, when the GET is sent without a probe: a body that ends
    /// at the connection's close, with no length, is checked against the server's size.
    @Test func aFirstDownloadEndingEarlyWithoutALengthIsCaughtByAProbe() async throws {
        let data = randomData(count: 200_000, seed: 34)
        server.route("/first.bin", method: "HEAD", reply: .file(data, etag: "\"f1\""))
        let head = "HTTP/1.1 200 OK\r\nETag: \"f1\"\r\nConnection: close\r\n\r\n"
        server.route("/first.bin", method: "GET", reply: .raw(Data(head.utf8) + data.prefix(100_000)))
        let reports = try await scenario.sync(.files(.url(server.url("/first.bin"), "retries: 0")))

        #expect(reports[0].outcome == .failed(.partialBody(received: 100_000, expected: 200_000)))
        #expect(scenario.local("first.bin") == nil)
    }

    /// A part is not the file: a 206 to a request without Range is refused, whatever its
    /// Content-Range says.
    @Test func aPartialContentReplyToAPlainGetIsRefused() async throws {
        let data = randomData(count: 100_000, seed: 32)
        let head = "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-99999/*\r\nContent-Length: 100000\r\n\r\n"
        server.route("/part.bin", method: "GET", reply: .raw(Data(head.utf8) + data))
        let reports = try await scenario.sync(.files(.url(server.url("/part.bin"), "retries: 0")))

        #expect(reports[0].outcome == .failed(.contradictoryReply("206 Partial Content to a request for the whole file")))
        #expect(scenario.files().isEmpty)
    }

    /// Two different Content-Lengths: libcurl believes one, so which bytes arrived is unknown.
    @Test func conflictingContentLengthsAreRefusedInTheGetAndInTheProbe() async throws {
        let data = randomData(count: 100, seed: 33)
        let head = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nContent-Length: 200000\r\n\r\n"
        server.route("/two.bin", method: "GET", reply: .raw(Data(head.utf8) + data))
        let reports = try await scenario.sync(.files(.url(server.url("/two.bin"), "retries: 0")))
        #expect(reports[0].outcome == .failed(.contradictoryReply("Content-Length given as `100` and `200000`")))
        #expect(scenario.files().isEmpty)

        // The probe of an existing file: `plan` fails the entry rather than believe one length.
        try scenario.put(data, at: "two.bin")
        server.route("/two.bin", method: "HEAD", reply: .raw(head))
        let plan = try await scenario.runner(.files(.url(server.url("/two.bin")))).plan()
        #expect(plan[0].action == .fail(.contradictoryReply("Content-Length given as `100` and `200000`")))
    }

    /// A Content-Length too large for any file: libcurl drops it and reads the body until the
    /// connection closes, so a body cut after 195 KiB looked whole and was committed (exit 0).
    /// A length that cannot be one is a contradiction, like two different lengths: refused
    /// in the GET and in the probe, retried as such a reply is, and never committed.
    @Test func aContentLengthThatCannotBeALengthIsRefusedNotTakenAsAbsent() async throws {
        let data = randomData(count: 1 << 20, seed: 34)
        let huge = "99999999999999999999"
        // No ranges: the one-byte GET that measures a body with no length learns nothing either.
        let reply = FaultReply.file(data, etag: "\"h\"", honorRange: false, acceptRanges: false)
            .header("Content-Length", huge).cut(afterBodyBytes: 195 << 10)
        server.route("/huge.bin", reply: reply)
        let reports = try await scenario.sync(.files(.url(server.url("/huge.bin"), "retries: 1")))

        let refusal = TransferFailure.contradictoryReply("Content-Length `\(huge)` is not a number of bytes from 0 to \(Int64.max)")
        #expect(reports[0].outcome == .failed(refusal))
        #expect(reports[0].attempts == 2, "retried, as a contradictory reply is")
        #expect(scenario.files().isEmpty, "nothing committed, no partial file kept")

        // The binary, as cron runs it: not 0, and still nothing under DEST.
        try scenario.write(.files(.url(server.url("/huge.bin"), "retries: 0")))
        let result = try scenario.run(["sync", "--quiet", "m.yaml"])
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("Content-Length `\(huge)`"), "\(result)")
        #expect(scenario.files().isEmpty)

        // The probe of a file already there: `plan` fails the entry instead of asking on.
        try scenario.put(data.prefix(1000), at: "huge.bin")
        let plan = try await scenario.runner(.files(.url(server.url("/huge.bin")))).plan()
        #expect(plan[0].action == .fail(refusal))

        // A checksum file, whose cut list could lose the line of the entry it pins.
        let sums = Data("\(DigestHasher.hex(of: data))  huge.bin\n".utf8)
        server.route("/SHA256SUMS", reply: .file(sums).header("Content-Length", huge))
        let pinned = try await scenario.sync(.files(.url(server.url("/huge.bin"), dest: "pinned.bin", "retries: 0",
                                                        "checksums: \(server.url("/SHA256SUMS"))")))
        #expect(pinned[0].outcome == .failed(.checksumFileUnavailable(url: server.url("/SHA256SUMS"), refusal)))
    }

    /// Every length-bearing value goes through one reader, and one that cannot be read refuses
    /// the reply: a Content-Range whose total overflows is no more "no total" than a
    /// Content-Length that overflows is "no length".
    @Test func aContentRangeThatCannotBeARangeIsRefusedInTheProbe() async throws {
        let data = randomData(count: 100_000, seed: 35)
        try scenario.put(data.prefix(1000), at: "cr.bin")
        // HEAD gives no length, so the probe asks for one byte; the 206 says an impossible total.
        server.route("/cr.bin", method: "HEAD", reply: .status(200, headers: ["ETag": "\"c\"", "Transfer-Encoding": "chunked"]))
        let range = "HTTP/1.1 206 Partial Content\r\nETag: \"c\"\r\nContent-Range: bytes 0-0/99999999999999999999\r\nContent-Length: 1\r\n\r\nx"
        server.route("/cr.bin", method: "GET", reply: .raw(range))
        let plan = try await scenario.runner(.files(.url(server.url("/cr.bin")))).plan()

        guard case .fail(.contradictoryReply(let detail)) = plan[0].action else {
            Issue.record("expected a contradictory reply, got \(plan[0].action)")
            return
        }
        #expect(detail.contains("Content-Range `bytes 0-0/99999999999999999999`"), "\(detail)")
    }

    @Test func retriesRunOutAndTheEntryFailsWithThePartialKept() async throws {
        let data = randomData(count: 100_000, seed: 3)
        server.route("/flaky.bin", method: "GET", replies: [.file(data, etag: "\"f\"").cut(afterBodyBytes: 10_000), .status(503)])
        server.route("/flaky.bin", method: "HEAD", reply: .file(data, etag: "\"f\""))
        let reports = try await scenario.sync(.files(.url(server.url("/flaky.bin"), "retries: 2")))

        #expect(reports[0].outcome == .failed(.httpStatus(503)))
        #expect(reports[0].attempts == 3)
        #expect(scenario.local("flaky.bin") == nil)
        #expect(scenario.local("flaky.bin.part")?.count == 10_000, "the next run resumes it")
    }

    @Test func aRangeReplyStartingElsewhereIsNotAppended() async throws {
        let data = randomData(count: 300_000, seed: 4)
        try scenario.put(data.prefix(100_000), at: "w.bin.part")
        server.route("/w.bin", method: "HEAD", reply: .file(data, etag: "\"w\""))
        // First a 206 that claims to start at 0 though 34464 was asked for, then a good server.
        server.route("/w.bin", method: "GET", replies: [.file(data, etag: "\"w\"").misreportingRange(start: 0), .file(data, etag: "\"w\"")])
        let reports = try await scenario.sync(.files(.url(server.url("/w.bin"))))

        #expect(reports[0].outcome == .transferred)
        let gets = server.requests(for: "/w.bin").filter { $0.method == "GET" }
        // The bad reply made mirror restart from 0 rather than splice.
        #expect(gets.map { $0.headers["Range"] } == ["bytes=\(100_000 - 65_536)-", nil])
        #expect(scenario.local("w.bin")?.fingerprint == data.fingerprint)
    }

    @Test func aFourSixteenThatContradictsTheProbeIsNotTakenForComplete() async throws {
        let data = randomData(count: 30_000, seed: 5)
        try scenario.put(data.prefix(20_000), at: "s.bin.part")
        try scenario.save(StateRecord(dest: "s.bin", url: server.url("/s.bin"),
                                      partial: RemoteValidators(etag: "\"v1\"", lastModified: nil, size: 30_000)))
        // The probe says 30000 bytes, then a GET claims the file ends at the partial's 20000.
        server.route("/s.bin", method: "HEAD", reply: .file(data, etag: "\"v1\""))
        server.route("/s.bin", method: "GET", replies: [.status(416, headers: ["Content-Range": "bytes */20000"]), .file(data, etag: "\"v1\"")])
        let reports = try await scenario.sync(.files(.url(server.url("/s.bin"), "retries: 1")))

        #expect(reports[0].outcome == .transferred)
        let gets = server.requests(for: "/s.bin").filter { $0.method == "GET" }
        #expect(gets.first?.headers["If-Range"] == "\"v1\"")
        #expect(gets.last?.headers["Range"] == nil, "restarted from 0 instead")
        #expect(scenario.local("s.bin")?.fingerprint == data.fingerprint)
    }

    /// The store records which version a partial file holds before its first byte. When that
    /// record cannot be written and the store still holds one of another version, no byte may
    /// land: a later resume would trust the old record and splice that version onto them.
    @Test func noByteIsWrittenUnderARecordOfAnotherVersion() async throws {
        let data = randomData(count: 200_000, seed: 9)
        try scenario.save(StateRecord(dest: "x.bin", url: server.url("/x.bin"),
                                      partial: RemoteValidators(etag: "\"v1\"", lastModified: nil, size: 200_000)))
        let lock = try StoreWriteLock(path: scenario.rootPath(".mirror/state.sqlite"))
        server.route("/x.bin", method: "GET", reply: .file(data, etag: "\"v2\""))
        let reports = try await scenario.sync(.files(.url(server.url("/x.bin"), "retries: 0")))
        lock.release()

        guard case .failed(.localConflict(let message)) = reports[0].outcome else {
            Issue.record("expected the transfer to be refused, got \(reports[0].outcome)")
            return
        }
        #expect(message.contains("the record there is of another version; not writing to it"))
        #expect(scenario.local("x.bin.part") == nil)
        #expect(scenario.local("x.bin") == nil)
        #expect(try scenario.record("x.bin")?.partial?.etag == "\"v1\"", "the old record is still there")
    }

    /// A short DEST is copied to DEST.part and continued with the overlap check. A record of
    /// another version must not survive the copy: when the first GET fails before any reply,
    /// the next attempt would otherwise resume the copy with If-Range, as if it were that
    /// version, and splice.
    @Test func aCopyOfAShortDestIsNeverResumedUnderAnOldRecord() async throws {
        let v1 = randomData(count: 300_000, seed: 21)
        let other = randomData(count: 150_000, seed: 22)
        try scenario.save(StateRecord(dest: "y.bin", url: server.url("/y.bin"),
                                      partial: RemoteValidators(etag: "\"v1\"", lastModified: nil, size: 300_000)))
        try scenario.put(other, at: "y.bin")
        server.route("/y.bin", method: "HEAD", reply: .file(v1, etag: "\"v1\""))
        server.route("/y.bin", method: "GET", replies: [.status(503), .file(v1, etag: "\"v1\"")])
        let reports = try await scenario.sync(.files(.url(server.url("/y.bin"), "retries: 1")))

        let gets = server.requests(for: "/y.bin").filter { $0.method == "GET" }
        #expect(gets.allSatisfy { $0.headers["If-Range"] == nil }, "the copy is never vouched for by the old record")
        if reports[0].outcome == .transferred {
            #expect(scenario.local("y.bin")?.fingerprint == v1.fingerprint)
        } else {
            #expect(scenario.local("y.bin")?.fingerprint == other.fingerprint, "DEST untouched")
        }
    }

    @Test func aBodyLongerThanAnnouncedIsStopped() async throws {
        let data = randomData(count: 50_000, seed: 6)
        server.route("/long.bin", method: "GET", reply: .file(data).contentLength(20_000).header("Connection", "close"))
        let reports = try await scenario.sync(.files(.url(server.url("/long.bin"), "retries: 0", "size: 20000")))

        // The response ends where its Content-Length says; the extra bytes are never written.
        #expect(reports[0].outcome == .transferred)
        #expect(scenario.local("long.bin")?.fingerprint == data.prefix(20_000).fingerprint)
        #expect(scenario.files() == ["long.bin"])
    }

    @Test func maxSizeStopsAnOversizedBody() async throws {
        let data = randomData(count: 80_000, seed: 7)
        server.route("/big.bin", method: "GET", reply: .file(data))
        let reports = try await scenario.sync(.files(.url(server.url("/big.bin"), "max_size: 10000")))

        #expect(reports[0].outcome == .failed(.bodyTooLarge(limit: 10_000)))
        #expect(reports[0].attempts == 1, "not retried")
        #expect(scenario.files().isEmpty)
    }

    @Test func headersAreDroppedWhenARedirectLeavesTheOrigin() async throws {
        let other = try FaultServer.start(host: "127.0.0.2")
        defer { other.stop() }
        let data = randomData(count: 5_000, seed: 8)
        server.route("/same", reply: .redirect(to: server.url("/moved")))
        server.route("/moved", reply: .redirect(to: other.url("/final")))
        other.route("/final", reply: .file(data))
        let withCredentials = server.url("/same").replacingOccurrences(of: "http://", with: "http://robot:hunter2@")
        let reports = try await scenario.sync(.files(.url(withCredentials, dest: "r.bin", "headers:", "  X-Token: s3cret")))

        #expect(reports[0].outcome == .transferred)
        #expect(scenario.local("r.bin")?.fingerprint == data.fingerprint)
        #expect(server.requests(for: "/same").allSatisfy { $0.headers["X-Token"] == "s3cret" })
        #expect(server.requests(for: "/moved").allSatisfy { $0.headers["X-Token"] == "s3cret" }, "same origin keeps it")
        #expect(!other.requests.isEmpty)
        #expect(other.requests.allSatisfy { $0.headers["X-Token"] == nil }, "another host never sees it")
        #expect(server.requests(for: "/same").allSatisfy { $0.headers["Authorization"] != nil }, "the URL's credentials went to their host")
        #expect(other.requests.allSatisfy { $0.headers["Authorization"] == nil }, "and nowhere else")
    }

    @Test func redirectsAreLimitedToTen() async throws {
        for hop in 0..<12 { server.route("/hop\(hop)", reply: .redirect(to: server.url("/hop\(hop + 1)"))) }
        let reports = try await scenario.sync(.files(.url(server.url("/hop0"), dest: "h.bin")))

        #expect(reports[0].outcome == .failed(.redirectRefused("more than 10 redirects")))
        #expect(server.requests.count == 11)
        #expect(scenario.files().isEmpty)
    }

    @Test func aMirrorServesWhenThePrimaryIsGone() async throws {
        let data = randomData(count: 9_000, seed: 9)
        server.route("/gone.bin", reply: .status(404))
        server.route("/copy.bin", reply: .file(data))
        let reports = try await scenario.sync(.files(
            .url(server.url("/gone.bin"), dest: "m.bin", "mirrors: [\"\(server.url("/copy.bin"))\"]")))

        #expect(reports[0].outcome == .transferred)
        #expect(reports[0].url == server.url("/copy.bin"))
        #expect(scenario.local("m.bin")?.fingerprint == data.fingerprint)
    }

    @Test func noAcceptEncodingIsSentAndAnEncodedBodyIsSavedAsSent() async throws {
        let data = randomData(count: 1_000, seed: 10)
        server.route("/z.bin", reply: .file(data).header("Content-Encoding", "gzip"))
        let reports = try await scenario.sync(.files(.url(server.url("/z.bin"))))

        #expect(reports[0].outcome == .transferred && reports[0].size == 1_000)
        #expect(server.requests.allSatisfy { $0.headers["Accept-Encoding"] == nil })
        #expect(scenario.local("z.bin")?.fingerprint == data.fingerprint)
    }

    @Test func aStalledServerTimesOutAndTheRetrySucceeds() async throws {
        let data = randomData(count: 200_000, seed: 11)
        server.route("/slow.bin", method: "GET", replies: [.file(data, etag: "\"s\"").stalled(afterBodyBytes: 100_000, for: .seconds(4)), .file(data, etag: "\"s\"")])
        server.route("/slow.bin", method: "HEAD", reply: .file(data, etag: "\"s\""))
        let reports = try await scenario.sync(.files(.url(server.url("/slow.bin"), "timeout: 1s")))

        #expect(reports[0].outcome == .transferred)
        #expect(reports[0].attempts == 2)
        let ranges = server.requests(for: "/slow.bin").filter { $0.method == "GET" }.map { $0.headers["Range"] }
        #expect(ranges == [nil, "bytes=100000-"])
        #expect(scenario.local("slow.bin")?.fingerprint == data.fingerprint)
    }

    @Test func theStallGuardAbandonsADripFedTransfer() async throws {
        let data = randomData(count: 100_000, seed: 12)
        server.route("/drip.bin", method: "GET", replies: [.file(data).dripped(bytes: 200, every: .milliseconds(100)), .file(data)])
        server.route("/drip.bin", method: "HEAD", reply: .file(data))
        let started = ContinuousClock.now
        let reports = try await scenario.sync(.files(.url(server.url("/drip.bin"), "min_speed: 10KiB", "min_speed_time: 1s")))

        #expect(reports[0].outcome == .transferred)
        #expect(reports[0].attempts == 2, "the 2 KB/s attempt was abandoned")
        #expect(ContinuousClock.now - started < .seconds(10))
        #expect(scenario.local("drip.bin")?.fingerprint == data.fingerprint)
    }

    @Test func theStallGuardIsReadFromDefaultsAndEntries() throws {
        let text = """
            version: 1
            defaults:
              min_speed: 1KiB
            files:
              - url: http://127.0.0.1/a
              - url: http://127.0.0.1/b
                min_speed: 0
              - url: http://127.0.0.1/c
                min_speed_time: 2m
            """
        let manifest = try ManifestLoader.parse(text: text, path: "m.yaml", baseDirectory: "/", environment: [:])
        #expect(manifest.entries.map(\.settings.minSpeed) == [1024, nil, 1024])
        #expect(manifest.entries.map(\.settings.minSpeedTime) == [.seconds(30), .seconds(30), .seconds(120)])
    }
}
