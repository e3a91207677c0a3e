import Foundation
import Testing
@testable import MirrorCore

/// A server whose certificate a private CA signed: refused until `ca_file` or one of the
/// standard variables (`CURL_CA_BUNDLE`, `SSL_CERT_FILE`, `SSL_CERT_DIR`) trusts that CA. The
/// server is nginx with TLS on loopback; the CA is made with openssl by the test.
@Suite(.serialized)
struct PrivateCATests {
    static let data = randomData(count: 20_000, seed: 190)

    /// A private CA, an HTTPS nginx presenting its server certificate, another CA that signed
    /// nothing the server has, and the scenario's directory for the manifest and root.
    struct Setup {
        let ca: PrivateCA
        let otherCA: PrivateCA
        let scenario: SyncScenario

        init() throws {
            ca = try PrivateCA()
            otherCA = try PrivateCA(name: "another mirror test CA")
            scenario = try SyncScenario(.nginx(site: ["a.bin": PrivateCATests.data], options: NginxOptions(tls: ca.serverTLS)))
        }

        /// Writes `manifest` as m.yaml in the scenario's directory and syncs it there, with only
        /// the CA variables of `environment` set (an empty value counts as unset).
        func sync(_ manifest: ManifestText, environment: [String: String] = [:], in directory: String? = nil,
                  manifestPath: String = "m.yaml") throws -> MirrorBinary.Result {
            try scenario.write(manifest)
            try? FileManager.default.removeItem(atPath: scenario.rootPath("a.bin"))
            let unset = ["CURL_CA_BUNDLE": "", "SSL_CERT_FILE": "", "SSL_CERT_DIR": ""]
            return try scenario.run(["sync", manifestPath], in: directory, environment: unset.merging(environment) { $1 })
        }

        var downloaded: Bool { scenario.local("a.bin")?.fingerprint == PrivateCATests.data.fingerprint }
    }

    @Test func aPrivateCAIsRefusedAtOnceUntilCAFileTrustsIt() throws {
        let setup = try Setup()
        let work = setup.scenario.directory
        try FileManager.default.copyItem(atPath: setup.ca.caCertificate, toPath: work.path("private-ca.pem"))
        try FileManager.default.copyItem(atPath: setup.otherCA.caCertificate, toPath: work.path("other-ca.pem"))
        let url = setup.scenario.url("/a.bin")

        let refused = try setup.sync(.files(.url(url, "retries: 3")))
        #expect(refused.status == 1, "\(refused)")
        #expect(refused.stderr.contains("certificate"), "\(refused)")
        #expect(refused.stderr.contains("1 attempt)"), "a TLS verification failure is not retried: \(refused)")
        #expect(!setup.downloaded)

        // Relative to the manifest's directory, not to where mirror runs.
        let elsewhere = try TemporaryDirectory(prefix: "mirror-ca-cwd")
        let inDefaults = try setup.sync(ManifestText(top: ["defaults:", "  ca_file: private-ca.pem"], entries: [.url(url, "retries: 3")]),
                                        in: elsewhere.path, manifestPath: work.path("m.yaml"))
        #expect(inDefaults.status == 0, "\(inDefaults)")
        #expect(setup.downloaded)

        let perEntry = try setup.sync(ManifestText(top: ["defaults:", "  ca_file: other-ca.pem"], entries: [
            .url(url, "retries: 3", "ca_file: private-ca.pem"),
        ]))
        #expect(perEntry.status == 0, "an entry's ca_file replaces the defaults' one: \(perEntry)")
        #expect(setup.downloaded)

        let wrongCA = try setup.sync(.files(.url(url, "retries: 3", "ca_file: other-ca.pem")))
        #expect(wrongCA.status == 1 && wrongCA.stderr.contains("certificate"), "\(wrongCA)")
    }

    /// A thread still inside OpenSSL while `mirror` exits (the engine's thread closing its last
    /// TLS connection after the run was released, a hashing thread, a second Ctrl-C in the middle
    /// of a handshake) must not crash it: OpenSSL's exit handler, which frees OpenSSL's locks
    /// under such a thread, is never registered. The shim makes that moment happen at every
    /// exit instead of in one run of many; with the handler, about 1 exit in 3 crashed.
    @Test func aThreadInsideOpenSSLWhileMirrorExitsDoesNotCrashIt() throws {
        let shim = try CCompiler.build("Tests/Shims/openssl-at-exit.c", into: "openssl-at-exit.so",
                                       arguments: ["-O2", "-shared", "-fPIC"], libraries: ["-lcrypto", "-lpthread"]).get()
        let setup = try Setup()
        let work = setup.scenario.directory
        try FileManager.default.copyItem(atPath: setup.ca.caCertificate, toPath: work.path("private-ca.pem"))
        try FileManager.default.copyItem(atPath: setup.otherCA.caCertificate, toPath: work.path("other-ca.pem"))
        let url = setup.scenario.url("/a.bin")
        let pin = "sha256: \(DigestHasher.hex(of: PrivateCATests.data))"
        let preload = ["LD_PRELOAD": shim]
        for round in 1...10 {
            // Downloaded and hashed, then refused by the wrong CA: both ways out of a run.
            let trusted = try setup.sync(.files(.url(url, "ca_file: private-ca.pem", pin)), environment: preload)
            #expect(trusted.status == 0 && setup.downloaded, "round \(round): \(trusted)")
            let refused = try setup.sync(.files(.url(url, "ca_file: other-ca.pem")), environment: preload)
            #expect(refused.status == 1 && refused.stderr.contains("certificate"), "round \(round): \(refused)")
        }
    }

    @Test func theStandardCAVariablesAreHonouredAndCAFileBeatsThem() throws {
        let setup = try Setup()
        let url = setup.scenario.url("/a.bin")
        let right = setup.ca.caCertificate, wrong = setup.otherCA.caCertificate
        let trusted: [(String, [String: String])] = [
            ("SSL_CERT_FILE", ["SSL_CERT_FILE": right]),
            ("CURL_CA_BUNDLE", ["CURL_CA_BUNDLE": right]),
            ("SSL_CERT_DIR", ["SSL_CERT_DIR": try setup.ca.hashedDirectory()]),
        ]
        for (name, environment) in trusted {
            let result = try setup.sync(.files(.url(url)), environment: environment)
            #expect(result.status == 0, "\(name): \(result)")
            #expect(setup.downloaded, "\(name)")
        }

        // curl's precedence: CURL_CA_BUNDLE alone when set; a manifest ca_file over all of them.
        let bundleWins = try setup.sync(.files(.url(url)), environment: ["CURL_CA_BUNDLE": wrong, "SSL_CERT_FILE": right])
        #expect(bundleWins.status == 1 && bundleWins.stderr.contains("certificate"), "\(bundleWins)")
        let caFileWins = try setup.sync(.files(.url(url, "ca_file: \(wrong)")), environment: ["SSL_CERT_FILE": right])
        #expect(caFileWins.status == 1 && caFileWins.stderr.contains("certificate"), "\(caFileWins)")
        #expect(!setup.downloaded)
    }

    @Test func anUnusableCAFileStopsTheRunBeforeAnyTransfer() throws {
        let setup = try Setup()
        let work = setup.scenario.directory
        try work.write(Data("not a certificate\n".utf8), to: "notes.txt")
        let url = setup.scenario.url("/a.bin")

        let missing = try setup.sync(ManifestText(top: ["defaults:", "  ca_file: missing.pem"], entries: [.url(url)]))
        #expect(missing.status == 2, "\(missing)")
        #expect(missing.stderr.contains("m.yaml:4:12: defaults.ca_file: cannot read `\(work.path("missing.pem"))`"), "\(missing)")

        let notPEM = try setup.sync(.files(.url(url, "ca_file: notes.txt")))
        #expect(notPEM.status == 2, "\(notPEM)")
        #expect(notPEM.stderr.contains("m.yaml:5:14: files[0].ca_file:") && notPEM.stderr.contains("holds no PEM certificate"), "\(notPEM)")

        let fromEnvironment = try setup.sync(.files(.url(url)), environment: ["SSL_CERT_DIR": work.path("nowhere")])
        #expect(fromEnvironment.status == 2, "\(fromEnvironment)")
        #expect(fromEnvironment.stderr.contains("SSL_CERT_DIR: cannot read `\(work.path("nowhere"))`"), "\(fromEnvironment)")

        #expect(try setup.scenario.nginx.requests().isEmpty, "nothing was requested")
        #expect(!setup.downloaded)
    }
}
