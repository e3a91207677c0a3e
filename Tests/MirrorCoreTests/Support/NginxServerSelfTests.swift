import Foundation
import Testing

/// Shows, with curl as the client, that `NginxServer` serves files faithfully, offers the
/// `/nohead/` and `/norange/` variants, and logs the headers integration tests check.
@Suite(.timeLimit(.minutes(1)))
struct NginxServerSelfTests {
    let data = randomData(count: 1 << 20, seed: 11)

    /// nginx serving a fresh directory holding `files`; the server keeps the directory alive.
    private func serving(_ files: [String: Data]) throws -> NginxServer {
        let root = try TemporaryDirectory()
        for (path, contents) in files {
            try root.write(contents, to: path)
        }
        return try NginxServer.start(serving: root)
    }

    @Test func servesAFileByteForByteAndLogsTheRequest() throws {
        let nginx = try serving(["dir/a.bin": data])
        let transfer = try CurlTransfer.run(nginx.url("/dir/a.bin"))
        #expect(transfer.status == 200)
        #expect(transfer.body.fingerprint == data.fingerprint)
        #expect(transfer.head?.headers["ETag"] != nil)
        #expect(transfer.head?.headers["Last-Modified"] != nil)

        let logged = try nginx.requests(atLeast: 1)
        try #require(logged.count == 1)
        #expect(logged[0].method == "GET")
        #expect(logged[0].uri == "/dir/a.bin")
        #expect(logged[0].status == 200)
        #expect(logged[0].bodyBytesSent == data.count)
        #expect(logged[0].bytesSent > data.count)
        #expect(logged[0].range == nil)
        #expect(logged[0].userAgent?.hasPrefix("curl/") == true)
    }

    @Test func logsTheRangeAndIfRangeOfAResume() throws {
        let nginx = try serving(["a.bin": data])
        let etag = try #require(try CurlTransfer.run(nginx.url("/a.bin"), ["-I"]).head?.headers["ETag"])

        let resumed = try CurlTransfer.run(nginx.url("/a.bin"), ["-r", "10-", "-H", "If-Range: \(etag)"])
        #expect(resumed.status == 206)
        #expect(resumed.head?.headers["Content-Range"] == "bytes 10-\(data.count - 1)/\(data.count)")
        #expect(resumed.body.fingerprint == data.subdata(in: 10..<data.count).fingerprint)

        let stale = try CurlTransfer.run(nginx.url("/a.bin"), ["-r", "10-", "-H", "If-Range: \"other\""])
        #expect(stale.status == 200)
        #expect(stale.body.fingerprint == data.fingerprint)

        let logged = try nginx.requests(atLeast: 3)
        #expect(logged.map(\.method) == ["HEAD", "GET", "GET"])
        #expect(logged.map(\.status) == [200, 206, 200])
        #expect(logged.map(\.range) == [nil, "bytes=10-", "bytes=10-"])
        #expect(logged.map(\.ifRange) == [nil, etag, "\"other\""])
    }

    @Test func noheadRefusesHeadButServesGet() throws {
        let nginx = try serving(["a.bin": data])
        #expect(try CurlTransfer.run(nginx.url("/nohead/a.bin"), ["-I"]).status == 405)
        let probe = try CurlTransfer.run(nginx.url("/nohead/a.bin"), ["-r", "0-0"])
        #expect(probe.status == 206)
        #expect(probe.head?.headers["Content-Range"] == "bytes 0-0/\(data.count)")
        let get = try CurlTransfer.run(nginx.url("/nohead/a.bin"))
        #expect(get.status == 200)
        #expect(get.body.fingerprint == data.fingerprint)
    }

    @Test func norangeAnswersARangeWithTheWholeFile() throws {
        let nginx = try serving(["a.bin": data])
        let transfer = try CurlTransfer.run(nginx.url("/norange/a.bin"), ["-r", "10-"])
        #expect(transfer.status == 200)
        #expect(transfer.head?.headers["Content-Range"] == nil)
        #expect(transfer.body.fingerprint == data.fingerprint)
        #expect(try nginx.requests(atLeast: 1).map(\.range) == ["bytes=10-"])
    }

    @Test func missingFilesAre404() throws {
        let nginx = try serving(["a.bin": data])
        #expect(try CurlTransfer.run(nginx.url("/b.bin")).status == 404)
    }

    @Test func logsConnectionReuseAndCanBeCleared() throws {
        let nginx = try serving(["a.bin": data, "b.bin": Data("b".utf8)])
        let result = try CurlCommand.run(["-sS", "-o", "/dev/null", "-o", "/dev/null",
                                          nginx.url("/a.bin"), nginx.url("/b.bin")])
        #expect(result.exitCode == 0, "\(result)")
        let logged = try nginx.requests(atLeast: 2)
        try #require(logged.count == 2)
        #expect(logged[0].connection == logged[1].connection)
        #expect(logged.map(\.connectionRequests) == [1, 2])

        nginx.clearLog()
        #expect(try nginx.requests().isEmpty)
        _ = try CurlTransfer.run(nginx.url("/b.bin"))
        #expect(try nginx.requests(atLeast: 1).map(\.uri) == ["/b.bin"])
    }

    @Test func rateLimitSlowsTransfers() throws {
        let root = try TemporaryDirectory()
        let file = data.prefix(48 * 1024)
        try root.write(file, to: "a.bin")
        let nginx = try NginxServer.start(serving: root, options: NginxOptions(rateLimit: 16 * 1024))
        let started = ContinuousClock.now
        let transfer = try CurlTransfer.run(nginx.url("/a.bin"))
        let elapsed = ContinuousClock.now - started
        #expect(transfer.body.fingerprint == file.fingerprint)
        // limit_rate sends the first second's share at once and the rest at 16 KiB/s: about 2 s.
        #expect(elapsed >= .seconds(1))
    }

    @Test func stopEndsNginxAndRemovesItsDirectory() throws {
        let nginx = try serving(["a.bin": data])
        let port = nginx.port
        let directory = nginx.workingDirectory
        #expect(FileManager.default.fileExists(atPath: directory + "/nginx.conf"))
        let started = ContinuousClock.now
        nginx.stop()
        #expect(ContinuousClock.now - started < .seconds(1), "nginx should exit on SIGTERM at once")
        #expect(!FileManager.default.fileExists(atPath: directory))
        #expect(!LoopbackSocket.acceptsConnections(on: try LoopbackAddress("127.0.0.1"), port: port))
        nginx.stop()
    }

    @Test func twoServersRunSideBySide() throws {
        let first = try serving(["a.bin": data])
        let second = try serving(["a.bin": data.prefix(100)])
        #expect(first.port != second.port)
        #expect((try CurlTransfer.run(first.url("/a.bin")).body).fingerprint == data.fingerprint)
        #expect((try CurlTransfer.run(second.url("/a.bin")).body).fingerprint == data.prefix(100).fingerprint)
    }

    @Test func aBadConfigurationFailsWithNginxsOwnMessage() throws {
        let root = try TemporaryDirectory()
        let error = #expect(throws: NginxError.self) {
            try NginxServer.start(serving: root, options: NginxOptions(extraServerConfiguration: "no_such_directive on;"))
        }
        #expect(error?.description.contains("unknown directive \"no_such_directive\"") == true, "\(String(describing: error))")
    }

    @Test func aMissingNginxIsReportedWithHowToInstallIt() {
        #expect(NginxServer.locateExecutable(searchPath: "/nonexistent", fixedLocations: []) == nil)
        #expect(NginxError.notInstalled.description
            == "nginx not found: install it with `apt-get install -y nginx-light` (make test does this)")
    }
}
