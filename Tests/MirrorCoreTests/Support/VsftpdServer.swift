import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// How a `VsftpdServer` speaks TLS.
enum FTPServerTLS: Sendable {
    /// Plain FTP only.
    case none
    /// Explicit FTPS: the client must send `AUTH TLS` before logging in, and protect the data
    /// connections; a client that does not is refused ("530 Non-anonymous sessions must use
    /// encryption" or the like).
    case explicitRequired
    /// Implicit FTPS: TLS from the first byte (what `ftps://` means to curl).
    case implicit
}

/// A real vsftpd (Debian's package) serving a directory to anonymous clients on 127.0.0.1 and
/// a random port, plain or with TLS under a certificate that a test's own `PrivateCA` signed
/// for `IP:127.0.0.1` (trust it with `ca_file: authority.caCertificate`).
///
/// vsftpd runs in the foreground (`background=NO`) and forks a process per session, which ends
/// with its client's connection; stopping it stops the listener by its pid. It chroots its
/// sessions, so it needs root.
final class VsftpdServer: Sendable {
    let server: ServerProcess
    /// Held so that the served directory outlives the server.
    let served: TemporaryDirectory
    /// The CA that signed the server's certificate, when the server speaks TLS.
    let authority: PrivateCA?

    private init(server: ServerProcess, served: TemporaryDirectory, authority: PrivateCA?) {
        self.server = server
        self.served = served
        self.authority = authority
    }

    var port: UInt16 { server.port }

    /// `ftp://127.0.0.1:PORT/path`, or `ftps://` for an implicit FTPS server.
    func url(_ path: String, scheme: String = "ftp") -> String { "\(scheme)://127.0.0.1:\(port)\(path)" }

    static func start(serving directory: TemporaryDirectory, tls: FTPServerTLS = .none) async throws -> VsftpdServer {
        let executable = try ServerProcess.locate(
            "vsftpd", among: ["/usr/sbin/vsftpd", "/usr/local/sbin/vsftpd"], install: "apt-get install -y vsftpd")
        guard geteuid() == 0 else {
            throw ServerProcessError.failedToStart(server: "vsftpd", reason: "vsftpd chroots its sessions and must be started as root; run the tests as root (make test in CI does)", log: "")
        }
        try directory.openForReading()
        let authority = tls == .none ? nil : try PrivateCA(name: "mirror vsftpd test CA")
        let server = try await ServerProcess.start("vsftpd", executable: executable, logs: ["vsftpd.log"]) { port, work in
            let empty = work.path("empty")
            try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
            var lines = [
                "listen=YES", "listen_ipv6=NO", "listen_address=127.0.0.1", "listen_port=\(port)", "background=NO",
                "anonymous_enable=YES", "anon_root=\(directory.path)", "no_anon_password=YES",
                "local_enable=NO", "write_enable=NO", "secure_chroot_dir=\(empty)", "nopriv_user=nobody",
                // Containers often forbid the namespaces and seccomp filters vsftpd sets up.
                "seccomp_sandbox=NO", "isolate=NO", "isolate_network=NO",
                "vsftpd_log_file=\(work.path("vsftpd.log"))", "xferlog_enable=YES", "log_ftp_protocol=YES",
            ]
            if let authority {
                lines += [
                    "ssl_enable=YES", "rsa_cert_file=\(authority.serverTLS.certificate)", "rsa_private_key_file=\(authority.serverTLS.key)",
                    "allow_anon_ssl=YES", "force_anon_logins_ssl=YES", "force_anon_data_ssl=YES",
                    // vsftpd's default cipher list is one that OpenSSL 3 no longer offers.
                    "ssl_ciphers=HIGH", "require_ssl_reuse=NO",
                ]
                if tls == .implicit { lines.append("implicit_ssl=YES") }
            }
            try (lines.joined(separator: "\n") + "\n").write(toFile: work.path("vsftpd.conf"), atomically: true, encoding: .utf8)
            return [work.path("vsftpd.conf")]
        }
        return VsftpdServer(server: server, served: directory, authority: authority)
    }

    /// The FTP commands the server logged, in order (`RETR f.bin`, `REST 100`, `AUTH TLS`).
    var commands: [String] {
        server.contents(of: "vsftpd.log").split(separator: "\n").compactMap { line in
            guard let range = line.range(of: "FTP command: Client \"127.0.0.1\", \"") else { return nil }
            return String(line[range.upperBound...].dropLast())
        }
    }

    func stop() { server.stop() }
}
