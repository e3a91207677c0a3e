import Foundation
import Testing

/// Shows, with curl as an independent client, that `FaultServer` keeps the promises integration
/// tests rely on: scripted sequences, correct range semantics, and each fault as advertised.
@Suite(.timeLimit(.minutes(1)))
struct FaultServerSelfTests {
    let data = randomData(count: 10_000, seed: 7)

    // MARK: Scripts and recording

    @Test func scriptedRepliesAreConsumedInOrderAndTheLastRepeats() throws {
        let server = try FaultServer.start()
        server.route("/a.bin", replies: [.status(503, headers: ["Retry-After": "1"]), .file(data, etag: "\"v1\"")])

        let first = try CurlTransfer.run(server.url("/a.bin"))
        #expect(first.status == 503)
        #expect(first.head?.headers["retry-after"] == "1")
        let second = try CurlTransfer.run(server.url("/a.bin"))
        #expect(second.status == 200)
        #expect(second.body.fingerprint == data.fingerprint)
        #expect(second.head?.headers["ETag"] == "\"v1\"")
        let third = try CurlTransfer.run(server.url("/a.bin"))
        #expect(third.status == 200)
        #expect(server.requests(for: "/a.bin").count == 3)
    }

    @Test func requestsAreRecordedInOrderWithCaseInsensitiveHeaders() throws {
        let server = try FaultServer.start()
        server.route("/one", reply: .status(200))
        server.route("/two", reply: .status(200))

        _ = try CurlTransfer.run(server.url("/one?x=1"), ["-H", "X-Custom: first", "-A", "test-agent"])
        _ = try CurlTransfer.run(server.url("/two"), ["-I"])

        let requests = server.requests
        try #require(requests.count == 2)
        #expect(requests.map(\.method) == ["GET", "HEAD"])
        #expect(requests.map(\.path) == ["/one", "/two"])
        #expect(requests[0].target == "/one?x=1")
        #expect(requests[0].headers["x-custom"] == "first")
        #expect(requests[0].headers["USER-AGENT"] == "test-agent")
        #expect(requests[0].headers["Range"] == nil)
        #expect(requests[0].receivedAt <= requests[1].receivedAt)
        #expect(server.requests(for: "/one").count == 1)

        server.clearRequests()
        #expect(server.requests.isEmpty)
    }

    @Test func unroutedPathsGet404() throws {
        let server = try FaultServer.start()
        let transfer = try CurlTransfer.run(server.url("/nothing-here"))
        #expect(transfer.status == 404)
        #expect(server.requests.map(\.path) == ["/nothing-here"])
    }

    @Test func aMethodSpecificRouteTakesPrecedence() throws {
        let server = try FaultServer.start()
        server.route("/a.bin", reply: .file(data))
        server.route("/a.bin", method: "HEAD", reply: .status(405, headers: ["Allow": "GET"]))

        #expect(try CurlTransfer.run(server.url("/a.bin"), ["-I"]).status == 405)
        let get = try CurlTransfer.run(server.url("/a.bin"))
        #expect(get.status == 200)
        #expect(get.body.fingerprint == data.fingerprint)
    }

    // MARK: Static-file semantics

    @Test func headGetsHeadersWithTheFullLengthAndNoBody() throws {
        let server = try FaultServer.start()
        server.route("/a.bin", reply: .file(data, etag: "\"v1\"", lastModified: "Sun, 06 Nov 1994 08:49:37 GMT"))
        server.route("/busy", reply: .status(503, body: Data("try later\n".utf8)))

        // HEAD then GET on one connection: had the HEAD carried a body, the GET's response would
        // be read from the middle of it.
        let scratch = try TemporaryDirectory()
        let result = try CurlCommand.run(["-sS", "-I", server.url("/a.bin"), server.url("/busy"), "--next",
                                          "-sS", "-o", scratch.path("body"), server.url("/a.bin")])
        #expect(result.exitCode == 0, "\(result)")
        let heads = CurlResponseHead.all(in: result.output)
        try #require(heads.count == 2)
        #expect(heads[0].status == 200)
        #expect(heads[0].headers["Content-Length"] == "10000")
        #expect(heads[0].headers["ETag"] == "\"v1\"")
        #expect(heads[0].headers["Last-Modified"] == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(heads[0].headers["Accept-Ranges"] == "bytes")
        #expect(heads[1].status == 503)
        #expect(heads[1].headers["Content-Length"] == "10")
        #expect(scratch.contents(of: "body")?.fingerprint == data.fingerprint)
        #expect(server.acceptedConnections == 1)
    }

    @Test func aRangeRequestGetsTheRequestedBytesWithContentRange() throws {
        let server = try FaultServer.start()
        server.route("/a.bin", reply: .file(data))

        let open = try CurlTransfer.run(server.url("/a.bin"), ["-r", "100-"])
        #expect(open.status == 206)
        #expect(open.head?.headers["Content-Range"] == "bytes 100-9999/10000")
        #expect(open.body.fingerprint == data.subdata(in: 100..<10_000).fingerprint)

        let closed = try CurlTransfer.run(server.url("/a.bin"), ["-r", "100-199"])
        #expect(closed.head?.headers["Content-Range"] == "bytes 100-199/10000")
        #expect(closed.head?.headers["Content-Length"] == "100")
        #expect(closed.body.fingerprint == data.subdata(in: 100..<200).fingerprint)

        let suffix = try CurlTransfer.run(server.url("/a.bin"), ["-r", "-10"])
        #expect(suffix.head?.headers["Content-Range"] == "bytes 9990-9999/10000")
        #expect(suffix.body.fingerprint == data.subdata(in: 9990..<10_000).fingerprint)

        #expect(server.requests.map { $0.headers["Range"] } == ["bytes=100-", "bytes=100-199", "bytes=-10"])
    }

    @Test func anUnsatisfiableRangeGets416WithTheTotal() throws {
        let server = try FaultServer.start()
        server.route("/a.bin", reply: .file(data))
        let transfer = try CurlTransfer.run(server.url("/a.bin"), ["-r", "10000-"])
        #expect(transfer.status == 416)
        #expect(transfer.head?.headers["Content-Range"] == "bytes */10000")
    }

    @Test func ifRangeDecidesBetweenThePartAndTheWholeFile() throws {
        let lastModified = "Sun, 06 Nov 1994 08:49:37 GMT"
        let server = try FaultServer.start()
        server.route("/a.bin", reply: .file(data, etag: "\"v1\"", lastModified: lastModified))

        let matching = try CurlTransfer.run(server.url("/a.bin"), ["-r", "100-", "-H", "If-Range: \"v1\""])
        #expect(matching.status == 206)
        #expect(matching.body.fingerprint == data.subdata(in: 100..<10_000).fingerprint)

        let stale = try CurlTransfer.run(server.url("/a.bin"), ["-r", "100-", "-H", "If-Range: \"v0\""])
        #expect(stale.status == 200)
        #expect(stale.head?.headers["Content-Range"] == nil)
        #expect(stale.body.fingerprint == data.fingerprint)

        let weak = try CurlTransfer.run(server.url("/a.bin"), ["-r", "100-", "-H", "If-Range: W/\"v1\""])
        #expect(weak.status == 200, "If-Range needs a strong match")

        let date = try CurlTransfer.run(server.url("/a.bin"), ["-r", "100-", "-H", "If-Range: \(lastModified)"])
        #expect(date.status == 206)

        let otherDate = try CurlTransfer.run(server.url("/a.bin"),
                                             ["-r", "100-", "-H", "If-Range: Mon, 07 Nov 1994 08:49:37 GMT"])
        #expect(otherDate.status == 200)
    }

    @Test func withoutRangeSupportTheWholeFileComesBack() throws {
        let server = try FaultServer.start()
        server.route("/a.bin", reply: .file(data, honorRange: false, acceptRanges: false))
        let transfer = try CurlTransfer.run(server.url("/a.bin"), ["-r", "100-"])
        #expect(transfer.status == 200)
        #expect(transfer.head?.headers["Accept-Ranges"] == nil)
        #expect(transfer.body.fingerprint == data.fingerprint)
    }

    @Test func conditionalGetsAreAnsweredWith304() throws {
        let server = try FaultServer.start()
        server.route("/a.bin", reply: .file(data, etag: "\"v1\"", lastModified: "Sun, 06 Nov 1994 08:49:37 GMT"))
        let byTag = try CurlTransfer.run(server.url("/a.bin"), ["-H", "If-None-Match: \"v1\""])
        #expect(byTag.status == 304)
        #expect(byTag.body.isEmpty)
        let byDate = try CurlTransfer.run(server.url("/a.bin"), ["-H", "If-Modified-Since: Mon, 07 Nov 1994 00:00:00 GMT"])
        #expect(byDate.status == 304)
        let changed = try CurlTransfer.run(server.url("/a.bin"), ["-H", "If-None-Match: \"v0\""])
        #expect(changed.status == 200)
    }

    // MARK: Faults

    @Test func aCutBodyIsAPartialTransferForCurl() throws {
        let server = try FaultServer.start()
        server.route("/a.bin", reply: .file(data).cut(afterBodyBytes: 1000))
        let transfer = try CurlTransfer.run(server.url("/a.bin"))
        #expect(transfer.result.exitCode == 18, "curl: partial file\n\(transfer.result)")
        #expect(transfer.head?.headers["Content-Length"] == "10000")
        #expect(transfer.body.fingerprint == data.prefix(1000).fingerprint)
    }

    @Test func aContentLengthLargerThanTheBodyIsAPartialTransfer() throws {
        let server = try FaultServer.start()
        server.route("/a.bin", reply: .file(data).contentLength(20_000))
        let transfer = try CurlTransfer.run(server.url("/a.bin"))
        #expect(transfer.result.exitCode == 18, "\(transfer.result)")
        #expect(transfer.body.fingerprint == data.fingerprint)
    }

    @Test func aMisreportedRangeSaysSoInContentRange() throws {
        let server = try FaultServer.start()
        server.route("/shifted", reply: .file(data).misreportingRange(start: 0))
        server.route("/total", reply: .file(data).misreportingRange(total: 20_000))

        let shifted = try CurlTransfer.run(server.url("/shifted"), ["-r", "100-"])
        #expect(shifted.status == 206)
        #expect(shifted.head?.headers["Content-Range"] == "bytes 0-9999/10000")
        #expect(shifted.body.fingerprint == data.fingerprint)

        let total = try CurlTransfer.run(server.url("/total"), ["-r", "100-"])
        #expect(total.head?.headers["Content-Range"] == "bytes 100-9999/20000")
        #expect(total.body.fingerprint == data.subdata(in: 100..<10_000).fingerprint)

        // curl itself refuses to resume onto a range that starts elsewhere.
        let resume = try CurlTransfer.run(server.url("/shifted"), ["-C", "100"])
        #expect(resume.result.exitCode == 33, "\(resume.result)")
    }

    @Test func aRangeCanBeServedDespiteAStaleIfRange() throws {
        let changed = randomData(count: 10_000, seed: 8)
        let server = try FaultServer.start()
        server.route("/a.bin", reply: .file(changed, etag: "\"v2\"", honorIfRange: false))
        let transfer = try CurlTransfer.run(server.url("/a.bin"), ["-r", "100-", "-H", "If-Range: \"v1\""])
        #expect(transfer.status == 206)
        #expect(transfer.head?.headers["ETag"] == "\"v2\"")
        #expect(transfer.body.fingerprint == changed.subdata(in: 100..<10_000).fingerprint)
    }

    @Test func closingWithoutAResponseIsAnEmptyReply() throws {
        let server = try FaultServer.start()
        server.route("/a.bin", reply: .closeWithoutResponse)
        let transfer = try CurlTransfer.run(server.url("/a.bin"))
        #expect(transfer.result.exitCode == 52, "curl: empty reply from server\n\(transfer.result)")
    }

    @Test func aResetConnectionIsAReceiveFailure() throws {
        let server = try FaultServer.start()
        server.route("/a.bin", reply: .resetConnection)
        let transfer = try CurlTransfer.run(server.url("/a.bin"))
        #expect(transfer.result.exitCode == 56, "curl: failure receiving data\n\(transfer.result)")
    }

    @Test func rawBytesGoOutVerbatim() throws {
        let server = try FaultServer.start()
        server.route("/raw", reply: .raw("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Raw: yes\r\n\r\nhello"))
        let transfer = try CurlTransfer.run(server.url("/raw"))
        #expect(transfer.result.exitCode == 0)
        #expect(transfer.head?.headers["X-Raw"] == "yes")
        #expect(transfer.body.fingerprint == Data("hello".utf8).fingerprint)
    }

    @Test func aRedirectIsFollowed() throws {
        let server = try FaultServer.start()
        server.route("/old", reply: .redirect(to: server.url("/new")))
        server.route("/new", reply: .file(data))
        let transfer = try CurlTransfer.run(server.url("/old"), ["-L"])
        #expect(transfer.heads.map(\.status) == [302, 200])
        #expect(transfer.heads.first?.headers["Location"] == server.url("/new"))
        #expect(transfer.body.fingerprint == data.fingerprint)
        #expect(server.requests.map(\.path) == ["/old", "/new"])
    }

    @Test func aDelayBeforeHeadersTimesCurlOut() throws {
        let server = try FaultServer.start()
        server.route("/slow", reply: .file(data).delayed(by: .seconds(30)))
        let transfer = try CurlTransfer.run(server.url("/slow"), timeout: .seconds(1))
        #expect(transfer.result.exitCode == 28, "curl: operation timed out\n\(transfer.result)")
        #expect(transfer.heads.isEmpty)
    }

    @Test func aStallMidBodyDelaysButCompletesTheTransfer() throws {
        let server = try FaultServer.start()
        server.route("/a.bin", reply: .file(data).stalled(afterBodyBytes: 5000, for: .milliseconds(600)))
        let started = ContinuousClock.now
        let transfer = try CurlTransfer.run(server.url("/a.bin"))
        let elapsed = ContinuousClock.now - started
        #expect(transfer.result.exitCode == 0)
        #expect(transfer.body.fingerprint == data.fingerprint)
        #expect(elapsed >= .milliseconds(600))
    }

    @Test func aLongStallMidBodyHoldsBackTheRest() throws {
        let server = try FaultServer.start()
        server.route("/a.bin", reply: .file(data).stalled(afterBodyBytes: 5000, for: .seconds(30)))
        let transfer = try CurlTransfer.run(server.url("/a.bin"), timeout: .seconds(1))
        #expect(transfer.result.exitCode == 28, "\(transfer.result)")
        #expect(transfer.body.fingerprint == data.prefix(5000).fingerprint)
    }

    @Test func aDrippedBodyArrivesSlowlyAndWhole() throws {
        let server = try FaultServer.start()
        server.route("/a.bin", reply: .file(data.prefix(1000)).dripped(bytes: 100, every: .milliseconds(50)))
        let started = ContinuousClock.now
        let transfer = try CurlTransfer.run(server.url("/a.bin"))
        let elapsed = ContinuousClock.now - started
        #expect(transfer.body.fingerprint == data.prefix(1000).fingerprint)
        // Ten writes with nine pauses between them.
        #expect(elapsed >= .milliseconds(450))
    }

    @Test func aChunkedBodyHasNoContentLength() throws {
        let server = try FaultServer.start()
        server.route("/a.bin", reply: .file(data).chunked(chunkSize: 3000))
        let transfer = try CurlTransfer.run(server.url("/a.bin"))
        #expect(transfer.result.exitCode == 0)
        #expect(transfer.head?.headers["Transfer-Encoding"] == "chunked")
        #expect(transfer.head?.headers["Content-Length"] == nil)
        #expect(transfer.body.fingerprint == data.fingerprint)
    }

    @Test func aBodyWithoutContentLengthEndsAtClose() throws {
        let server = try FaultServer.start()
        server.route("/a.bin", reply: .file(data).header("Content-Length", nil))
        let transfer = try CurlTransfer.run(server.url("/a.bin"))
        #expect(transfer.result.exitCode == 0)
        #expect(transfer.head?.headers["Content-Length"] == nil)
        #expect(transfer.head?.headers["Connection"] == "close")
        #expect(transfer.body.fingerprint == data.fingerprint)
    }

    // MARK: Connections

    @Test func twoURLsInOneCurlRunShareAConnection() throws {
        let server = try FaultServer.start()
        server.route("/a.bin", reply: .file(data))
        server.route("/b.bin", reply: .file(data.prefix(10)))
        let result = try CurlCommand.run(["-v", "-o", "/dev/null", "-o", "/dev/null",
                                          server.url("/a.bin"), server.url("/b.bin")])
        #expect(result.exitCode == 0, "\(result)")
        #expect(result.standardError.contains("Re-using existing connection"), "\(result)")
        #expect(server.acceptedConnections == 1)
        #expect(server.requests.map(\.connection) == [1, 1])
    }

    @Test func aFaultClosesTheConnectionSoTheNextRequestGetsAFreshOne() throws {
        let server = try FaultServer.start()
        server.route("/cut", reply: .file(data).cut(afterBodyBytes: 10))
        server.route("/whole", reply: .file(data))
        let result = try CurlCommand.run(["-sS", "-o", "/dev/null", server.url("/cut"), "--next",
                                          "-sS", "-o", "/dev/null", server.url("/whole")])
        #expect(result.exitCode == 0, "\(result)")
        #expect(server.acceptedConnections == 2)
    }

    @Test func pipelinedRequestsAreAnsweredInOrder() throws {
        let server = try FaultServer.start()
        server.route("/a", reply: .status(200, body: Data("first".utf8)))
        server.route("/b", reply: .status(200, body: Data("second".utf8)))
        let connection = try RawConnection(port: server.port)
        try connection.send("GET /a HTTP/1.1\r\nHost: x\r\n\r\nHEAD /b HTTP/1.1\r\nHost: x\r\n\r\n"
            + "GET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let text = String(decoding: connection.receiveUntilClosed(), as: UTF8.self)
        let bodies = text.components(separatedBy: "\r\n\r\n")
        #expect(bodies.count == 4, "\(text)")
        #expect(text.hasSuffix("\r\n\r\nsecond"), "\(text)")
        #expect(bodies[1].hasPrefix("firstHTTP/1.1 200 OK"), "HEAD must not send a body: \(text)")
        #expect(server.requests.map(\.method) == ["GET", "HEAD", "GET"])
    }

    @Test func http10ConnectionsCloseAfterOneResponse() throws {
        let server = try FaultServer.start()
        server.route("/a", reply: .status(200, body: Data("x".utf8)))
        let connection = try RawConnection(port: server.port)
        try connection.send("GET /a HTTP/1.0\r\n\r\n")
        let text = String(decoding: connection.receiveUntilClosed(timeout: .seconds(2)), as: UTF8.self)
        #expect(text.contains("Connection: close"))
        #expect(text.hasSuffix("\r\n\r\nx"))
    }

    @Test func concurrentClientsAreServedInParallel() throws {
        let server = try FaultServer.start()
        let paths = (1...6).map { "/file\($0)" }
        for path in paths {
            server.route(path, reply: .file(data.prefix(500)).dripped(bytes: 100, every: .milliseconds(200)))
        }
        let scratch = try TemporaryDirectory()
        let started = ContinuousClock.now
        let result = try CurlCommand.run(["-sS", "--parallel", "--parallel-max", "6"]
            + paths.flatMap { ["-o", scratch.path(String($0.dropFirst())), server.url($0)] })
        let elapsed = ContinuousClock.now - started
        #expect(result.exitCode == 0, "\(result)")
        for path in paths {
            #expect(scratch.contents(of: String(path.dropFirst()))?.fingerprint == data.prefix(500).fingerprint)
        }
        // One at a time would take 6 × 800 ms. curl may reuse a connection that is already done.
        #expect(elapsed < .milliseconds(3000))
        #expect(server.acceptedConnections > 1)
    }

    @Test func bindsToAnotherLoopbackAddress() throws {
        let server = try FaultServer.start(host: "127.0.0.2")
        server.route("/a.bin", reply: .file(data))
        #expect(server.url("/a.bin") == "http://127.0.0.2:\(server.port)/a.bin")
        let transfer = try CurlTransfer.run(server.url("/a.bin"))
        #expect(transfer.body.fingerprint == data.fingerprint)
        // Bound to 127.0.0.2 only: the same port on 127.0.0.1 is someone else's (another test's
        // server may hold it while tests run in parallel) or no one's, never this server's.
        let before = server.requests.count
        _ = try CurlTransfer.run("http://127.0.0.1:\(server.port)/a.bin")
        #expect(server.requests.count == before)
    }

    @Test func refusesAddressesOutsideLoopback() {
        #expect(throws: LoopbackAddress.NotLoopback.self) { try FaultServer.start(host: "0.0.0.0") }
        #expect(throws: LoopbackAddress.NotLoopback.self) { try FaultServer.start(host: "10.1.2.3") }
        #expect(throws: LoopbackAddress.NotLoopback.self) { try FaultServer.start(host: "localhost") }
    }

    @Test func stopReturnsPromptlyDespiteIdleAndStalledConnections() throws {
        let server = try FaultServer.start()
        server.route("/stall", reply: .file(data).delayed(by: .seconds(60)))
        let idle = try RawConnection(port: server.port)
        let stalled = try RawConnection(port: server.port)
        try stalled.send("GET /stall HTTP/1.1\r\nHost: x\r\n\r\n")
        // Both connections must be accepted (and the request read) before stopping.
        #expect(server.waitForRequests(1).count == 1)
        #expect(server.acceptedConnections == 2)

        let started = ContinuousClock.now
        server.stop()
        #expect(ContinuousClock.now - started < .milliseconds(1000))
        #expect(idle.isClosedByServer(within: .seconds(1)))
        #expect(stalled.isClosedByServer(within: .seconds(1)))
        #expect(!LoopbackSocket.acceptsConnections(on: try LoopbackAddress("127.0.0.1"), port: server.port))
        server.stop()
    }

    /// On a loopback address of its own, so that no other test's server (or client) can have
    /// taken the port once it is free: on 127.0.0.1, under a full test run's load, the port was
    /// once found accepting again.
    @Test func releasingTheServerStopsIt() throws {
        let host = "127.83.41.7"
        var server: FaultServer? = try FaultServer.start(host: host)
        let port = server!.port
        #expect(LoopbackSocket.acceptsConnections(on: try LoopbackAddress(host), port: port))
        server = nil
        // Closed at once in this process; a child another test spawns at that moment holds the
        // listener (close-on-exec) until its exec, so the port may answer a moment longer.
        let deadline = ContinuousClock.now + .seconds(2)
        var accepting = LoopbackSocket.acceptsConnections(on: try LoopbackAddress(host), port: port)
        while accepting && ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.02)
            accepting = LoopbackSocket.acceptsConnections(on: try LoopbackAddress(host), port: port)
        }
        #expect(!accepting)
    }
}
