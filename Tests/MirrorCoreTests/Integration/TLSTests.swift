import Foundation
import Testing

/// TLS verification is always on; `insecure: true` is the only way off, and is warned about.
/// The server is `openssl s_server` with a self-signed certificate, on loopback.
@Suite(.serialized)
struct TLSTests {
    /// `openssl s_server -WWW` serving a directory over HTTPS with a throwaway certificate.
    final class SelfSignedServer {
        let process = Process()
        let port: UInt16
        let directory: TemporaryDirectory

        init(serving files: [String: Data]) throws {
            directory = try TemporaryDirectory(prefix: "mirror-tls")
            for (name, data) in files { try directory.write(data, to: name) }
            let openssl = ["/usr/bin/openssl", "/usr/local/bin/openssl"].first { FileManager.default.isExecutableFile(atPath: $0) }
            guard let openssl else { throw MissingOpenSSL() }
            let certificate = Process()
            certificate.executableURL = URL(fileURLWithPath: openssl)
            certificate.arguments = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                                     "-keyout", directory.path("key.pem"), "-out", directory.path("cert.pem")]
            certificate.standardOutput = FileHandle.nullDevice
            certificate.standardError = FileHandle.nullDevice
            try certificate.run()
            certificate.waitUntilExit()
            port = try LoopbackSocket.pickFreePort(on: LoopbackAddress("127.0.0.1"))
            process.executableURL = URL(fileURLWithPath: openssl)
            process.arguments = ["s_server", "-accept", "127.0.0.1:\(port)", "-cert", directory.path("cert.pem"),
                                 "-key", directory.path("key.pem"), "-WWW", "-quiet"]
            process.currentDirectoryURL = directory.url
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.runWithDefaultSignalMask()
            let deadline = ContinuousClock.now + .seconds(5)
            while ContinuousClock.now < deadline {
                if (try? CurlCommand.run(["-sk", "-o", "/dev/null", "https://127.0.0.1:\(port)/"]))?.exitCode == 0 { return }
                Thread.sleep(forTimeInterval: 0.05)
            }
        }

        func url(_ path: String) -> String { "https://127.0.0.1:\(port)\(path)" }

        deinit {
            process.terminate()
            process.waitUntilExit()
        }
    }

    struct MissingOpenSSL: Error, CustomStringConvertible {
        var description: String { "openssl not found: install it with `apt-get install -y openssl`" }
    }

    @Test func anUntrustedCertificateFailsAtOnceAndInsecureIsWarned() throws {
        let data = randomData(count: 5_000, seed: 80)
        let server = try SelfSignedServer(serving: ["a.bin": data])
        let work = try TemporaryDirectory(prefix: "mirror-tls-client")
        let manifest = "version: 1\nroot: root\nfiles:\n  - url: \(server.url("/a.bin"))\n    retries: 3\n"
        try work.write(Data(manifest.utf8), to: "m.yaml")

        let refused = try MirrorBinary.run(["sync", "m.yaml"], in: work.path)
        #expect(refused.status == 1, "\(refused)")
        #expect(refused.stderr.contains("certificate"), "\(refused)")
        #expect(refused.stderr.contains("1 attempt)"), "a TLS verification failure is not retried")
        #expect(work.files("root").isEmpty)

        try work.write(Data((manifest + "    insecure: true\n").utf8), to: "m.yaml")
        let allowed = try MirrorBinary.run(["sync", "m.yaml"], in: work.path)
        #expect(allowed.status == 0, "\(allowed)")
        #expect(allowed.stderr.contains("warning") && allowed.stderr.contains("insecure: true"))
        #expect(work.contents(of: "root/a.bin")?.fingerprint == data.fingerprint)
    }
}
