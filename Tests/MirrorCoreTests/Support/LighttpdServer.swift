import Foundation

/// A real lighttpd (Debian's package) serving a directory on 127.0.0.1 and a random port: a
/// second production server for the Range and If-Range rules. One foreground process (`-D`).
final class LighttpdServer: Sendable {
    let server: ServerProcess
    /// Held so that the served directory outlives the server.
    let served: TemporaryDirectory

    private init(server: ServerProcess, served: TemporaryDirectory) {
        self.server = server
        self.served = served
    }

    var port: UInt16 { server.port }

    /// The absolute URL of `path` (which starts with "/").
    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    static func start(serving directory: TemporaryDirectory) async throws -> LighttpdServer {
        let executable = try ServerProcess.locate(
            "lighttpd", among: ["/usr/sbin/lighttpd", "/usr/local/sbin/lighttpd"], install: "apt-get install -y lighttpd")
        try directory.openForReading()
        let server = try await ServerProcess.start("lighttpd", executable: executable, logs: ["error.log"]) { port, work in
            let format = ServedRequest.format(
                method: "%m", uri: "%U", status: "%>s", requestHeader: { "%{\($0)}i" },
                responseHeader: { "%{\($0)}o" }, bodyBytes: "%b")
            let configuration = """
                # Written by LighttpdServer for one test run.
                server.document-root = \(directory.path.configQuoted)
                server.bind = "127.0.0.1"
                server.port = \(port)
                server.errorlog = \(work.path("error.log").configQuoted)
                server.modules = ("mod_accesslog")
                accesslog.filename = \(work.path("access.log").configQuoted)
                accesslog.format = \(format.configQuoted)
                mimetype.assign = ("" => "application/octet-stream")
                # Each answer from the file as it is now: a cached stat would hide a change.
                server.stat-cache-engine = "disable"

                """
            try configuration.write(toFile: work.path("lighttpd.conf"), atomically: true, encoding: .utf8)
            return ["-D", "-f", work.path("lighttpd.conf")]
        }
        return LighttpdServer(server: server, served: directory)
    }

    /// The access log so far. lighttpd writes it out about once a second, so with `atLeast`
    /// this waits up to 10 s for that many lines.
    func requests(atLeast count: Int = 0) async throws -> [ServedRequest] {
        try await server.requests(atLeast: count, within: .seconds(10), polling: .milliseconds(50))
    }

    func stop() { server.stop() }
}
