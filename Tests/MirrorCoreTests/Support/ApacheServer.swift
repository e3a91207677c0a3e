import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A real Apache httpd (Debian's apache2) serving a directory on 127.0.0.1 and a random port:
/// the server whose ETags are weak (`W/"…"`) while a file is less than a second old and strong
/// afterwards, and which can label `.gz` files with a Content-Encoding.
///
/// It runs as one process (`-X`) with only the modules it needs, configured in a private
/// directory; as root, it serves as `nobody`, so the served directory is opened for reading.
final class ApacheServer: Sendable {
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

    /// Starts Apache serving `directory`.
    /// - Parameter extraConfiguration: directives added at the end, e.g. `AddEncoding x-gzip .gz`.
    static func start(serving directory: TemporaryDirectory, extraConfiguration: String = "") async throws -> ApacheServer {
        let executable = try ServerProcess.locate(
            "apache2", among: ["/usr/sbin/apache2", "/usr/sbin/httpd", "/usr/local/apache2/bin/httpd"],
            install: "apt-get install -y apache2")
        let modules = ["/usr/lib/apache2/modules", "/usr/lib64/httpd/modules", "/usr/local/apache2/modules"]
            .first { FileManager.default.fileExists(atPath: $0 + "/mod_mime.so") } ?? "/usr/lib/apache2/modules"
        try directory.openForReading()
        let server = try await ServerProcess.start("apache2", executable: executable, logs: ["error.log"]) { port, work in
            // Running as root, Apache must hand its work to an unprivileged user.
            let user = geteuid() == 0 ? "User nobody\nGroup nogroup\n" : ""
            let format = ServedRequest.format(
                method: "%m", uri: "%U", status: "%>s", requestHeader: { "%{\($0)}i" },
                responseHeader: { "%{\($0)}o" }, bodyBytes: "%B")
            let configuration = """
                # Written by ApacheServer for one test run.
                ServerRoot \(work.path.configQuoted)
                ServerName 127.0.0.1
                Listen 127.0.0.1:\(port)
                PidFile \(work.path("httpd.pid").configQuoted)
                ErrorLog \(work.path("error.log").configQuoted)
                LogLevel info
                LoadModule mpm_prefork_module \(modules)/mod_mpm_prefork.so
                LoadModule authz_core_module \(modules)/mod_authz_core.so
                LoadModule mime_module \(modules)/mod_mime.so
                \(user)
                DefaultRuntimeDir \(work.path.configQuoted)
                Mutex file:\(work.path)
                TypesConfig /dev/null
                DocumentRoot \(directory.path.configQuoted)
                <Directory \(directory.path.configQuoted)>
                    Require all granted
                </Directory>
                KeepAlive On
                LogFormat "\(format.replacingOccurrences(of: "\"", with: "\\\""))" served
                CustomLog \(work.path("access.log").configQuoted) served
                \(extraConfiguration)

                """
            try configuration.write(toFile: work.path("httpd.conf"), atomically: true, encoding: .utf8)
            return ["-X", "-f", work.path("httpd.conf")]
        }
        return ApacheServer(server: server, served: directory)
    }

    /// The access log so far. Apache writes a line as it finishes a response, so a line may
    /// trail the client by a moment: with `atLeast`, this waits up to 5 s for that many.
    func requests(atLeast count: Int = 0) async throws -> [ServedRequest] {
        try await server.requests(atLeast: count, within: .seconds(5), polling: .milliseconds(10))
    }

    func stop() { server.stop() }
}
