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
            try OpenSSL.run(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                             "-keyout", directory.path("key.pem"), "-out", directory.path("cert.pem")], in: directory)
            port = try LoopbackSocket.pickFreePort(on: LoopbackAddress("127.0.0.1"))
            process.executableURL = URL(fileURLWithPath: try OpenSSL.executable())
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

    @Test func anUntrustedCertificateFailsAtOnceAndInsecureIsWarned() throws {
        let data = randomData(count: 5_000, seed: 80)
        let server = try SelfSignedServer(serving: ["a.bin": data])
        let scenario = try SyncScenario()
        try scenario.write(.files(.url(server.url("/a.bin"), "retries: 3")))

        let refused = try scenario.run(["sync", "m.yaml"])
        #expect(refused.status == 1, "\(refused)")
        #expect(refused.stderr.contains("certificate"), "\(refused)")
        #expect(refused.stderr.contains("1 attempt)"), "a TLS verification failure is not retried")
        #expect(scenario.files().isEmpty)

        try scenario.write(.files(.url(server.url("/a.bin"), "retries: 3", "insecure: true")))
        let allowed = try scenario.run(["sync", "m.yaml"])
        #expect(allowed.status == 0, "\(allowed)")
        #expect(allowed.stderr.contains("warning") && allowed.stderr.contains("insecure: true"))
        #expect(scenario.local("a.bin")?.fingerprint == data.fingerprint)
    }
}
