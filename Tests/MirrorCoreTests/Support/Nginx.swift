import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Knobs for the nginx that `NginxServer` runs.
struct NginxOptions: Sendable {
    /// Bytes per second per response (nginx `limit_rate`), for transfers slow enough to interrupt;
    /// nil means unlimited.
    var rateLimit: Int?
    /// Directives inserted verbatim into the `server` block, e.g. extra `location`s.
    var extraServerConfiguration: String
    /// How long nginx may take to accept connections before `start` gives up.
    var startupTimeout: Duration
    /// Serve HTTPS with this certificate chain and key (PEM files) instead of plain HTTP.
    var tls: NginxTLS?
    /// With `tls`: offer HTTP/2 (by ALPN), as most HTTPS servers do.
    var http2: Bool
    /// The listening socket's send buffer (`listen … sndbuf=`), in bytes; nil: the kernel's,
    /// which grows to megabytes. A small one keeps what nginx counts as sent close to what the
    /// client has read.
    var sendBuffer: Int?

    init(rateLimit: Int? = nil, extraServerConfiguration: String = "", startupTimeout: Duration = .seconds(5),
         tls: NginxTLS? = nil, http2: Bool = false, sendBuffer: Int? = nil) {
        self.sendBuffer = sendBuffer
        self.rateLimit = rateLimit
        self.extraServerConfiguration = extraServerConfiguration
        self.startupTimeout = startupTimeout
        self.tls = tls
        self.http2 = http2
    }
}

/// The certificate an HTTPS `NginxServer` presents: PEM files of the chain and its key.
struct NginxTLS: Sendable {
    var certificate: String
    var key: String
}

/// One line of `NginxServer`'s access log: a request as nginx saw and answered it. Request
/// headers the client did not send are nil.
struct LoggedRequest: Sendable, Equatable, CustomStringConvertible {
    /// The most of `requests` whose spans, [startedAt - `seconds`, endedAt + `seconds`), overlap
    /// at one moment: with 0, the most nginx had under way at once. Spans that only touch do
    /// not overlap (at equal times an end is counted before a start).
    static func mostOverlapping(_ requests: [LoggedRequest], widenedBy seconds: Double) -> Int {
        var changes: [(at: Double, change: Int)] = []
        for request in requests {
            changes.append((at: request.startedAt - seconds, change: 1))
            changes.append((at: request.endedAt + seconds, change: -1))
        }
        changes.sort { $0.at != $1.at ? $0.at < $1.at : $0.change < $1.change }
        var under = 0
        var most = 0
        for (_, change) in changes {
            under += change
            most = max(most, under)
        }
        return most
    }

    var method: String
    /// The request target as sent, query included (`$request_uri`).
    var uri: String
    var status: Int
    /// Bytes nginx sent in total, head included.
    var bytesSent: Int
    /// Bytes of the response body nginx sent.
    var bodyBytesSent: Int
    var range: String?
    var ifRange: String?
    var ifNoneMatch: String?
    var ifModifiedSince: String?
    var authorization: String?
    var acceptEncoding: String?
    var userAgent: String?
    /// nginx's serial number of the connection: equal numbers mean the client reused it.
    var connection: Int
    /// How many requests this connection had carried, this one included.
    var connectionRequests: Int
    /// "HTTP/1.1" or "HTTP/2.0".
    var `protocol`: String = ""
    /// When nginx logged it (its last byte handed to the socket), in seconds since the epoch.
    var endedAt: Double = 0
    /// Seconds from the request's first byte read to the log line.
    var duration: Double = 0
    /// The `X-Test` request header.
    var xTest: String?
    var ifMatch: String?
    var ifUnmodifiedSince: String?

    /// When nginx read the request's first byte, in seconds since the epoch.
    var startedAt: Double { endedAt - duration }

    var description: String {
        "\(method) \(uri) → \(status) (\(bodyBytesSent) body bytes, connection \(connection))"
            + (range.map { " Range: \($0)" } ?? "") + (ifRange.map { " If-Range: \($0)" } ?? "")
    }
}

/// Why an `NginxServer` could not be started.
enum NginxError: Error, CustomStringConvertible {
    case notInstalled
    case failedToStart(reason: String, errorLog: String)

    var description: String {
        switch self {
        case .notInstalled:
            "nginx not found: install it with `apt-get install -y nginx-light` (make test does this)"
        case .failedToStart(let reason, let errorLog):
            "nginx failed to start: \(reason)\n--- nginx error log ---\n\(errorLog)"
        }
    }
}

/// A real nginx serving a directory on 127.0.0.1 and a random port, for integration tests that
/// need a production-grade static file server (sendfile, ETags, ranges, keep-alive).
///
/// Locations, all serving the same directory:
/// - `/` — plain static files;
/// - `/nohead/` — HEAD answered with 405, so a client has to probe with GET;
/// - `/norange/` — Range ignored (`max_ranges 0`), so a resume gets a full 200.
///
/// Everything nginx writes (config, pid, logs, temp files) lives in a private temporary
/// directory that `stop()` removes. The access log has one JSON object per request; read it
/// with `requests()`. nginx runs as one foreground process (`master_process off`), stopped by
/// `stop()` or when the server is released.
final class NginxServer: Sendable {
    let port: UInt16
    /// The served directory.
    let root: String
    /// "http", or "https" when started with `NginxOptions.tls`.
    let scheme: String
    private let workDirectory: TemporaryDirectory
    /// Held so that a served temporary directory outlives the server that reads it.
    private let servedDirectory: TemporaryDirectory?
    private let process: Mutex<Process?>

    private init(port: UInt16, root: String, scheme: String, servedDirectory: TemporaryDirectory?,
                 workDirectory: TemporaryDirectory, process: consuming sending Process) {
        self.port = port
        self.root = root
        self.scheme = scheme
        self.servedDirectory = servedDirectory
        self.workDirectory = workDirectory
        self.process = Mutex(process)
    }

    deinit { stop() }

    /// "http://127.0.0.1:PORT" (https with TLS), without a trailing slash.
    var baseURL: String { "\(scheme)://127.0.0.1:\(port)" }

    /// The absolute URL of `path` (which starts with "/").
    func url(_ path: String) -> String { baseURL + path }

    /// Starts nginx serving `directory` and returns once it accepts connections. The server keeps
    /// `directory` alive until it is released, so a test may hand it over and forget it.
    static func start(serving directory: TemporaryDirectory, options: NginxOptions = .init()) throws -> NginxServer {
        try start(serving: directory.path, keeping: directory, options: options)
    }

    /// Starts nginx serving `directory` and returns once it accepts connections.
    /// - Throws: `NginxError.notInstalled` when no nginx binary exists, `NginxError.failedToStart`
    ///   with nginx's error log when it exits or does not come up in time.
    static func start(serving directory: String, options: NginxOptions = .init()) throws -> NginxServer {
        try start(serving: directory, keeping: nil, options: options)
    }

    private static func start(serving directory: String, keeping servedDirectory: TemporaryDirectory?,
                              options: NginxOptions) throws -> NginxServer {
        guard let executable = locateExecutable() else { throw NginxError.notInstalled }
        let root = URL(fileURLWithPath: directory).standardizedFileURL.path
        let address = try LoopbackAddress("127.0.0.1")

        // The port is free when picked but may be taken before nginx binds it; try a few.
        var lastFailure = NginxError.failedToStart(reason: "no attempt made", errorLog: "")
        for _ in 0..<5 {
            let workDirectory = try TemporaryDirectory(prefix: "mirror-nginx")
            let port = try LoopbackSocket.pickFreePort(on: address)
            try configuration(root: root, port: port, prefix: workDirectory.path, options: options)
                .write(toFile: workDirectory.path("nginx.conf"), atomically: true, encoding: .utf8)

            let process = Process()
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = ["-p", workDirectory.path + "/", "-c", workDirectory.path("nginx.conf"),
                                 "-e", workDirectory.path("error.log")]
            _ = FileManager.default.createFile(atPath: workDirectory.path("stdout.log"), contents: nil)
            _ = FileManager.default.createFile(atPath: workDirectory.path("stderr.log"), contents: nil)
            process.standardInput = FileHandle.nullDevice
            process.standardOutput = FileHandle(forWritingAtPath: workDirectory.path("stdout.log"))
            process.standardError = FileHandle(forWritingAtPath: workDirectory.path("stderr.log"))
            do {
                try process.runWithDefaultSignalMask()
            } catch {
                throw NginxError.failedToStart(reason: "could not run \(executable): \(error)", errorLog: "")
            }

            switch waitUntilReady(process, port: port, address: address, workDirectory: workDirectory,
                                  timeout: options.startupTimeout) {
            case .ready:
                return NginxServer(port: port, root: root, scheme: options.tls == nil ? "http" : "https", servedDirectory: servedDirectory,
                                   workDirectory: workDirectory, process: process)
            case .portTaken(let log):
                lastFailure = .failedToStart(reason: "port \(port) was taken", errorLog: log)
            case .failed(let reason, let log):
                process.terminateAndWait()
                throw NginxError.failedToStart(reason: reason, errorLog: log)
            }
        }
        throw lastFailure
    }

    /// The access log so far, oldest first. nginx logs a request just after sending its response,
    /// so a client can finish a moment before its line appears: with `atLeast`, this waits up to
    /// `timeout` for that many lines and then returns whatever is there.
    func requests(atLeast count: Int = 0, timeout: Duration = .seconds(2)) throws -> [LoggedRequest] {
        let deadline = ContinuousClock.now + timeout
        while true {
            let logged = try parseAccessLog()
            if logged.count >= count || ContinuousClock.now >= deadline { return logged }
            Thread.sleep(forTimeInterval: 0.01)
        }
    }

    /// Empties the access log; nginx appends, so later requests start a fresh list.
    func clearLog() {
        _ = truncate(workDirectory.path("access.log"), 0)
    }

    /// The private directory holding nginx's config, pid file, logs and temp files.
    var workingDirectory: String { workDirectory.path }

    /// nginx's error log so far, for failure messages.
    var errorLog: String {
        (try? String(contentsOfFile: workDirectory.path("error.log"), encoding: .utf8)) ?? ""
    }

    /// Stops nginx (SIGTERM, SIGKILL after 5 s), waits for it and removes its directory. Idempotent.
    func stop() {
        process.withLock { process in
            if let running = process {
                running.terminateAndWait()
            }
            process = nil
        }
        workDirectory.remove()
    }

    // MARK: - Starting

    /// Where Debian puts nginx, then the directories of `searchPath` (a PATH value), then the
    /// usual places of a source build: the first executable `nginx` found.
    static func locateExecutable(
        searchPath: String = ProcessInfo.processInfo.environment["PATH"] ?? "",
        fixedLocations: [String] = ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx"]
    ) -> String? {
        let candidates = fixedLocations.prefix(1) + searchPath.split(separator: ":").map { "\($0)/nginx" }
            + fixedLocations.dropFirst()
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    private static func configuration(root: String, port: UInt16, prefix: String, options: NginxOptions) -> String {
        func quoted(_ text: String) -> String {
            "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
        }
        // As root, a worker would otherwise switch to "nobody", which cannot enter the 0700
        // directories mkdtemp makes; as anyone else nginx cannot switch users at all.
        let user = geteuid() == 0 ? "user root;\n" : ""
        let rateLimit = options.rateLimit.map { "        limit_rate \($0);\n" } ?? ""
        let tls = options.tls.map {
            "        ssl_certificate \(quoted($0.certificate));\n        ssl_certificate_key \(quoted($0.key));\n"
        } ?? ""
        return """
            # Written by NginxServer for one test run; everything nginx writes stays in this directory.
            \(user)daemon off;
            master_process off;
            worker_processes 1;
            pid \(quoted(prefix + "/nginx.pid"));
            error_log \(quoted(prefix + "/error.log")) info;

            events {
                worker_connections 256;
            }

            http {
                types {}
                default_type application/octet-stream;
                sendfile on;
                etag on;
                keepalive_timeout 30s;
                server_tokens off;
                client_body_temp_path \(quoted(prefix + "/client_body"));
                proxy_temp_path \(quoted(prefix + "/proxy"));
                fastcgi_temp_path \(quoted(prefix + "/fastcgi"));
                uwsgi_temp_path \(quoted(prefix + "/uwsgi"));
                scgi_temp_path \(quoted(prefix + "/scgi"));

                # One JSON object per request; absent headers log as "".
                log_format mirror_test escape=json
                    '{"method":"$request_method","uri":"$request_uri","status":"$status",'
                    '"bytes_sent":"$bytes_sent","body_bytes_sent":"$body_bytes_sent",'
                    '"range":"$http_range","if_range":"$http_if_range",'
                    '"if_none_match":"$http_if_none_match","if_modified_since":"$http_if_modified_since",'
                    '"authorization":"$http_authorization","accept_encoding":"$http_accept_encoding",'
                    '"user_agent":"$http_user_agent",'
                    '"connection":"$connection","connection_requests":"$connection_requests",'
                    '"protocol":"$server_protocol","msec":"$msec","request_time":"$request_time",'
                    '"x_test":"$http_x_test","if_match":"$http_if_match",'
                    '"if_unmodified_since":"$http_if_unmodified_since"}';
                access_log \(quoted(prefix + "/access.log")) mirror_test;

                server {
                    listen 127.0.0.1:\(port)\(options.tls == nil ? "" : " ssl")\(options.tls != nil && options.http2 ? " http2" : "")\(options.sendBuffer.map { " sndbuf=\($0)" } ?? "");
                    server_name localhost;
                    root \(quoted(root));
            \(rateLimit)\(tls)
                    location / {
                    }

                    # HEAD refused, so clients must fall back to a GET probe. (rewrite, not
                    # alias: "if" inside a location loses the alias.)
                    location /nohead/ {
                        if ($request_method = HEAD) {
                            return 405;
                        }
                        rewrite ^/nohead/(.*)$ /$1 break;
                    }

                    # Range ignored: every request gets the whole file with 200.
                    location /norange/ {
                        rewrite ^/norange/(.*)$ /$1 break;
                        max_ranges 0;
                    }

            \(options.extraServerConfiguration)
                }
            }

            """
    }

    private enum Readiness {
        case ready
        case portTaken(errorLog: String)
        case failed(reason: String, errorLog: String)
    }

    private static func waitUntilReady(_ process: Process, port: UInt16, address: LoopbackAddress,
                                       workDirectory: TemporaryDirectory, timeout: Duration) -> Readiness {
        let deadline = ContinuousClock.now + timeout
        let pidFile = workDirectory.path("nginx.pid")
        while ContinuousClock.now < deadline {
            if !process.isRunning {
                let log = startupLog(workDirectory)
                if log.contains("Address already in use") { return .portTaken(errorLog: log) }
                return .failed(reason: "nginx exited with status \(process.terminationStatus)", errorLog: log)
            }
            // nginx writes its pid file only after binding its sockets, so a connection that
            // succeeds from then on reaches this nginx and not some other process on the port.
            if FileManager.default.fileExists(atPath: pidFile),
               LoopbackSocket.acceptsConnections(on: address, port: port) {
                return .ready
            }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return .failed(reason: "nginx did not accept connections on port \(port) within \(timeout)",
                       errorLog: startupLog(workDirectory))
    }

    private static func startupLog(_ workDirectory: TemporaryDirectory) -> String {
        ["error.log", "stderr.log", "stdout.log"]
            .compactMap { try? String(contentsOfFile: workDirectory.path($0), encoding: .utf8) }
            .filter { !$0.isEmpty }
            .joined(separator: "\n")
    }

    // MARK: - Access log

    private func parseAccessLog() throws -> [LoggedRequest] {
        guard let contents = FileManager.default.contents(atPath: workDirectory.path("access.log")) else { return [] }
        return try contents.split(separator: UInt8(ascii: "\n")).map { line in
            let fields: [String: String]
            do {
                fields = try JSONDecoder().decode([String: String].self, from: Data(line))
            } catch {
                throw NginxLogLineError(line: String(decoding: line, as: UTF8.self), underlying: "\(error)")
            }
            func header(_ key: String) -> String? {
                guard let value = fields[key], !value.isEmpty else { return nil }
                return value
            }
            func number(_ key: String) -> Int { fields[key].flatMap { Int($0) } ?? -1 }
            return LoggedRequest(
                method: fields["method"] ?? "", uri: fields["uri"] ?? "", status: number("status"),
                bytesSent: number("bytes_sent"), bodyBytesSent: number("body_bytes_sent"),
                range: header("range"), ifRange: header("if_range"), ifNoneMatch: header("if_none_match"),
                ifModifiedSince: header("if_modified_since"), authorization: header("authorization"),
                acceptEncoding: header("accept_encoding"), userAgent: header("user_agent"),
                connection: number("connection"), connectionRequests: number("connection_requests"),
                protocol: fields["protocol"] ?? "",
                endedAt: fields["msec"].flatMap { Double($0) } ?? 0, duration: fields["request_time"].flatMap { Double($0) } ?? 0,
                xTest: header("x_test"), ifMatch: header("if_match"), ifUnmodifiedSince: header("if_unmodified_since"))
        }
    }
}

/// An access log line that is not the JSON object `NginxServer` configured.
struct NginxLogLineError: Error, CustomStringConvertible {
    let line: String
    let underlying: String
    var description: String { "unparsable nginx access log line (\(underlying)): \(line)" }
}
