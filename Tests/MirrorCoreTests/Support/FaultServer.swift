import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// An in-process HTTP/1.1 server on a loopback address and a random port that answers each path
/// from a script of `FaultReply`s, the way curl's and wget's test servers do, and records every
/// request it receives.
///
/// ```swift
/// let server = try FaultServer.start()
/// server.route("/a.bin", replies: [.status(503, headers: ["Retry-After": "1"]), .file(data, etag: "\"v1\"")])
/// // … point the client at server.url("/a.bin") …
/// #expect(server.requests(for: "/a.bin").map(\.method) == ["GET", "GET"])
/// ```
///
/// Each request to a routed path consumes the next reply of its script; the last reply repeats.
/// Unrouted paths get 404. Connections are persistent (HTTP/1.1 keep-alive, pipelining) unless
/// the client or the reply says otherwise; each has its own thread, at most 64 at a time.
/// Every wait is bounded: idle connections close after 10 s, and `stop()` (also run when the
/// server is released) interrupts stalls and returns within about a second.
final class FaultServer: Sendable {
    let host: String
    let port: UInt16
    private let engine: Engine

    private init(engine: Engine) {
        self.engine = engine
        self.host = engine.address.host
        self.port = engine.port
    }

    /// Starts listening on `host` (any 127.0.0.0/8 address) and `port` (0: a free one).
    static func start(host: String = "127.0.0.1", port: UInt16 = 0) throws -> FaultServer {
        let address = try LoopbackAddress(host)
        return serve(address, try LoopbackSocket.listen(on: address, port: port))
    }

    /// Starts listening inside `namespace` (on its loopback, which the test can take down):
    /// only processes in there reach it.
    static func start(in namespace: NetworkNamespace, port: UInt16 = 0) throws -> FaultServer {
        let address = try LoopbackAddress("127.0.0.1")
        return serve(address, try namespace.entered { try LoopbackSocket.listen(on: address, port: port) })
    }

    private static func serve(_ address: LoopbackAddress, _ listener: (descriptor: Int32, port: UInt16)) -> FaultServer {
        let engine = Engine(listener: listener.descriptor, address: address, port: listener.port)
        engine.startAccepting()
        return FaultServer(engine: engine)
    }

    deinit { engine.stop() }

    /// "http://HOST:PORT", without a trailing slash.
    var baseURL: String { "http://\(host):\(port)" }

    /// The absolute URL of `path` (which starts with "/") on this server.
    func url(_ path: String) -> String { baseURL + path }

    /// Scripts the answers for `path` (query strings are not part of the match). With a method,
    /// the script applies to that method only and takes precedence over a script without one.
    /// Replaces any earlier script for the same path and method, starting again at its first reply.
    func route(_ path: String, method: String? = nil, replies: [FaultReply]) {
        precondition(!replies.isEmpty, "a route needs at least one reply")
        engine.state.withLock { $0.routes[RouteKey(method: method, path: path)] = Route(replies: replies) }
    }

    /// Scripts a single reply that answers every request for `path`.
    func route(_ path: String, method: String? = nil, reply: FaultReply) {
        route(path, method: method, replies: [reply])
    }

    /// Every request received so far, in arrival order.
    var requests: [RecordedRequest] {
        engine.state.withLock { $0.requests }
    }

    /// Waits until at least `count` requests have arrived (at most `timeout`) and returns all of
    /// them: for tests that act while a client is mid-transfer.
    func waitForRequests(_ count: Int, timeout: Duration = .seconds(5)) -> [RecordedRequest] {
        let deadline = ContinuousClock.now + timeout
        while true {
            let received = requests
            if received.count >= count || ContinuousClock.now >= deadline { return received }
            Thread.sleep(forTimeInterval: 0.005)
        }
    }

    /// The requests whose path (without query) is `path`, in arrival order.
    func requests(for path: String) -> [RecordedRequest] {
        requests.filter { $0.path == path }
    }

    /// How many TCP connections the server has accepted: fewer than requests means reuse.
    var acceptedConnections: Int {
        engine.state.withLock { $0.acceptedConnections }
    }

    /// Forgets the recorded requests (routes and their positions stay).
    func clearRequests() {
        engine.state.withLock { $0.requests.removeAll() }
    }

    /// Closes the listener and every connection and waits for the server's threads. Idempotent.
    func stop() {
        engine.stop()
    }
}

// MARK: - Routing

extension FaultServer {
    fileprivate struct RouteKey: Hashable {
        var method: String?
        var path: String
    }

    fileprivate struct Route {
        var replies: [FaultReply]
        var served = 0

        mutating func next() -> FaultReply {
            defer { served += 1 }
            return replies[min(served, replies.count - 1)]
        }
    }
}

// MARK: - Sockets and threads

extension FaultServer {
    /// The listener, the connections and the shared state. Threads hold the engine, never the
    /// `FaultServer`, so releasing the server still runs its `deinit` and stops them.
    fileprivate final class Engine: Sendable {
        struct State {
            var stopping = false
            var routes: [RouteKey: Route] = [:]
            var requests: [RecordedRequest] = []
            var acceptedConnections = 0
            /// Descriptors of open connections, so that `stop()` can shut them down. A
            /// connection removes itself here before closing, under the lock, so `stop()` never
            /// touches a descriptor number that has been reused.
            var openConnections: Set<Int32> = []
        }

        static let maximumConnections = 64
        static let maximumHeadBytes = 64 * 1024
        static let maximumRequestBody = 16 * 1024 * 1024
        static let idleTimeout: Duration = .seconds(10)
        /// A client that reads nothing for this long is given up on.
        static let writeStallTimeout: Duration = .seconds(30)
        /// How often blocked loops look at the stop flag.
        static let pollSlice: Duration = .milliseconds(50)

        let listener: Int32
        let address: LoopbackAddress
        let port: UInt16
        let state = Mutex(State())
        private let threads = DispatchGroup()

        init(listener: Int32, address: LoopbackAddress, port: UInt16) {
            self.listener = listener
            self.address = address
            self.port = port
        }

        var isStopping: Bool { state.withLock { $0.stopping } }

        func startAccepting() {
            spawn { self.acceptLoop() }
        }

        func stop() {
            let firstCall = state.withLock { state in
                guard !state.stopping else { return false }
                state.stopping = true
                // Wakes threads blocked in poll on these sockets; each closes its own.
                for descriptor in state.openConnections {
                    shutdown(descriptor, Int32(SHUT_RDWR))
                }
                return true
            }
            guard firstCall else { return }
            // Every loop looks at the stop flag at least every pollSlice, so this is generous.
            if threads.wait(timeout: .now() + .seconds(5)) == .timedOut {
                FileHandle.standardError.write(Data("FaultServer: threads still running 5 s after stop()\n".utf8))
            }
            close(listener)
        }

        private func spawn(_ body: @escaping @Sendable () -> Void) {
            threads.enter()
            let thread = Thread { [threads] in
                body()
                threads.leave()
            }
            thread.start()
        }

        private func acceptLoop() {
            while !isStopping {
                let atCapacity = state.withLock { $0.openConnections.count >= Self.maximumConnections }
                if atCapacity {
                    // Leave further clients in the backlog until a connection thread finishes.
                    Thread.sleep(forTimeInterval: 0.01)
                    continue
                }
                guard LoopbackSocket.waitUntil(listener, isReadyFor: Int16(POLLIN), timeout: Self.pollSlice) else {
                    continue
                }
                let descriptor = accept(listener, nil, nil)
                guard descriptor >= 0 else { continue }
                // accept4 is not visible from Swift, so set the flags right away. Should a process
                // spawned in between inherit the socket anyway, the shutdown before close still
                // ends the connection for the client.
                _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
                _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
                let number: Int? = state.withLock { state in
                    guard !state.stopping else { return nil }
                    state.acceptedConnections += 1
                    state.openConnections.insert(descriptor)
                    return state.acceptedConnections
                }
                guard let number else {
                    close(descriptor)
                    return
                }
                spawn { self.serveConnection(descriptor, number: number) }
            }
        }

        // MARK: One connection

        private func serveConnection(_ descriptor: Int32, number: Int) {
            var resets = false
            defer {
                state.withLock { _ = $0.openConnections.remove(descriptor) }
                if !resets { shutdown(descriptor, Int32(SHUT_RDWR)) }
                close(descriptor)
            }
            var pending: [UInt8] = []
            while !isStopping {
                let request: RecordedRequest
                switch readRequest(from: descriptor, pending: &pending, connection: number) {
                case .closed:
                    return
                case .malformed(let status):
                    let response = FaultReply.status(status).prepare(for: Self.unparsedRequest(connection: number))
                    _ = deliver(response, on: descriptor)
                    return
                case .request(let received):
                    request = received
                }
                let reply = state.withLock { state in
                    state.requests.append(request)
                    return Self.nextReply(for: request, routes: &state.routes)
                }
                switch deliver(reply.prepare(for: request), on: descriptor) {
                case .keepOpen:
                    continue
                case .close:
                    return
                case .reset:
                    resets = true
                    return
                }
            }
        }

        private static func nextReply(for request: RecordedRequest, routes: inout [RouteKey: Route]) -> FaultReply {
            for key in [RouteKey(method: request.method, path: request.path), RouteKey(method: nil, path: request.path)] {
                if routes[key] != nil {
                    return routes[key]!.next()
                }
            }
            return .status(404, headers: ["Content-Type": "text/plain"],
                           body: Data("FaultServer: no route for \(request.path)\n".utf8))
        }

        /// Stands in for a request that could not be parsed, so that its error reply can be
        /// prepared like any other; HTTP/1.0 makes that reply close the connection.
        private static func unparsedRequest(connection: Int) -> RecordedRequest {
            RecordedRequest(method: "GET", target: "/", version: "HTTP/1.0", headers: [:], body: Data(),
                            receivedAt: .now, connection: connection)
        }

        private enum ReadOutcome {
            case request(RecordedRequest)
            case malformed(status: Int)
            case closed
        }

        /// Reads one request, leaving any bytes after it (a pipelined request) in `pending`.
        private func readRequest(from descriptor: Int32, pending: inout [UInt8], connection: Int) -> ReadOutcome {
            var searchedUpTo = 0
            var headEnd: Int?
            while headEnd == nil {
                headEnd = Self.endOfHead(in: pending, from: searchedUpTo)
                if headEnd != nil { break }
                searchedUpTo = max(0, pending.count - 3)
                if pending.count > Self.maximumHeadBytes { return .malformed(status: 431) }
                guard receive(from: descriptor, into: &pending) else { return .closed }
            }
            let blockEnd = headEnd! - 4
            let head: RequestHeadParser.Head
            do {
                head = try RequestHeadParser.parse(Data(pending[..<blockEnd]))
            } catch {
                return .malformed(status: 400)
            }
            pending.removeFirst(headEnd!)
            let receivedAt = ContinuousClock.now

            // Download clients send no bodies; chunked uploads are not worth supporting here.
            if head.headers.contains("Transfer-Encoding") { return .malformed(status: 501) }
            var bodyLength = 0
            if let declared = head.headers["Content-Length"] {
                guard let length = Int(declared), length >= 0, length <= Self.maximumRequestBody else {
                    return .malformed(status: 400)
                }
                bodyLength = length
            }
            while pending.count < bodyLength {
                guard receive(from: descriptor, into: &pending) else { return .closed }
            }
            let body = Data(pending[..<bodyLength])
            pending.removeFirst(bodyLength)

            return .request(RecordedRequest(method: head.method, target: head.target, version: head.version,
                                            headers: head.headers, body: body, receivedAt: receivedAt,
                                            connection: connection))
        }

        /// Index just past the CRLF CRLF that ends a request head, searching from `start`.
        private static func endOfHead(in bytes: [UInt8], from start: Int) -> Int? {
            guard bytes.count >= 4 else { return nil }
            var index = start
            while index + 3 < bytes.count {
                if bytes[index] == 13, bytes[index + 1] == 10, bytes[index + 2] == 13, bytes[index + 3] == 10 {
                    return index + 4
                }
                index += 1
            }
            return nil
        }

        /// Appends what the client sent next; false when it closed, erred, idled out or the server stops.
        private func receive(from descriptor: Int32, into pending: inout [UInt8]) -> Bool {
            let deadline = ContinuousClock.now + Self.idleTimeout
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            while !isStopping && ContinuousClock.now < deadline {
                guard LoopbackSocket.waitUntil(descriptor, isReadyFor: Int16(POLLIN), timeout: Self.pollSlice) else {
                    continue
                }
                let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
                if count > 0 {
                    pending.append(contentsOf: buffer[..<count])
                    return true
                }
                if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) { continue }
                return false
            }
            return false
        }

        // MARK: Writing a response

        private enum ConnectionFate {
            case keepOpen
            case close
            case reset
        }

        /// Carries out `response` and says what becomes of the connection.
        private func deliver(_ response: PreparedResponse, on descriptor: Int32) -> ConnectionFate {
            guard sleep(response.delayBeforeHeaders) else { return .close }
            switch response.action {
            case .closeWithoutResponse:
                return .close
            case .resetConnection:
                // A zero linger time turns close() into an RST.
                var hardClose = linger(l_onoff: 1, l_linger: 0)
                setsockopt(descriptor, SOL_SOCKET, SO_LINGER, &hardClose, socklen_t(MemoryLayout<linger>.size))
                return .reset
            case .raw(let bytes):
                _ = send(bytes, on: descriptor)
                return .close
            case .respond:
                break
            }
            guard send(response.headBytes, on: descriptor) else { return .close }
            if response.sendsBody {
                guard sendBody(of: response, on: descriptor) else { return .close }
            }
            return response.closesConnection ? .close : .keepOpen
        }

        private func sendBody(of response: PreparedResponse, on descriptor: Int32) -> Bool {
            let body = response.bodyToSend
            let isCut = body.count < response.body.count
            var pauseAt = response.pause.map { min($0.afterBodyBytes, body.count) }
            let pieceSize = response.drip?.bytes ?? response.chunkSize ?? 64 * 1024
            var offset = 0
            while true {
                if let pauseOffset = pauseAt, pauseOffset == offset, let pause = response.pause {
                    pauseAt = nil
                    guard sleep(pause.duration) else { return false }
                }
                guard offset < body.count else { break }
                var end = min(offset + pieceSize, body.count)
                if let pauseOffset = pauseAt, pauseOffset > offset { end = min(end, pauseOffset) }
                var piece = body.subdata(in: offset..<end)
                if response.chunkSize != nil {
                    piece = Data(String(piece.count, radix: 16).utf8) + Data("\r\n".utf8) + piece + Data("\r\n".utf8)
                }
                guard send(piece, on: descriptor) else { return false }
                offset = end
                if let drip = response.drip, offset < body.count {
                    guard sleep(drip.interval) else { return false }
                }
            }
            if response.chunkSize != nil && !isCut {
                guard send(Data("0\r\n\r\n".utf8), on: descriptor) else { return false }
            }
            return true
        }

        /// Writes all of `bytes`; false when the client is gone, stops reading for too long, or
        /// the server stops.
        private func send(_ bytes: Data, on descriptor: Int32) -> Bool {
            var offset = 0
            var lastProgress = ContinuousClock.now
            while offset < bytes.count {
                if isStopping || ContinuousClock.now - lastProgress > Self.writeStallTimeout { return false }
                let written = bytes.withUnsafeBytes { buffer in
                    Glibc.send(descriptor, buffer.baseAddress!.advanced(by: offset), buffer.count - offset,
                               Int32(MSG_NOSIGNAL))
                }
                if written > 0 {
                    offset += written
                    lastProgress = .now
                } else if written < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
                    _ = LoopbackSocket.waitUntil(descriptor, isReadyFor: Int16(POLLOUT), timeout: Self.pollSlice)
                } else {
                    return false
                }
            }
            return true
        }

        /// Sleeps for `duration` in short slices; false when the server is stopping.
        private func sleep(_ duration: Duration) -> Bool {
            let deadline = ContinuousClock.now + duration
            while ContinuousClock.now < deadline {
                if isStopping { return false }
                let remaining = deadline - ContinuousClock.now
                let slice = min(remaining, .milliseconds(20))
                Thread.sleep(forTimeInterval: Double(slice.components.seconds)
                    + Double(slice.components.attoseconds) / 1e18)
            }
            return !isStopping
        }
    }
}
