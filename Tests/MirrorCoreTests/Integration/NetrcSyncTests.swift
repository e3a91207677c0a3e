import Foundation
import Testing

/// `$NETRC` (or `~/.netrc`) logins against nginx with basic auth on loopback: sent to the
/// URL's own origin, and never carried by a redirect to another one.
@Suite(.serialized)
struct NetrcSyncTests {
    static let data = randomData(count: 12_000, seed: 191)

    @Test func theNetrcLoginGoesToItsOriginOnlyAndNeverAcrossARedirect() throws {
        // The other origin: same address, another port; it asks for no login, and logs any.
        let elsewhere = try SyncFixture(files: ["a.bin": Self.data])
        let work = try TemporaryDirectory(prefix: "mirror-netrc")
        let users = try work.write(Data("deploy:{PLAIN}s3cret pw\n".utf8), to: "htpasswd")
        let fixture = try SyncFixture(files: ["private/a.bin": Self.data], nginx: NginxOptions(extraServerConfiguration: """
            location /private/ {
                auth_basic "mirror test";
                auth_basic_user_file \(users);
            }
            location = /same {
                absolute_redirect off;
                return 302 /private/a.bin;
            }
            location = /elsewhere {
                return 302 \(elsewhere.nginx.url("/a.bin"));
            }
            """))
        try work.write(Data("machine 127.0.0.1 login deploy password \"s3cret pw\"\n".utf8), to: "netrc")
        let manifest = fixture.manifest([("/private/a.bin", "direct.bin"), ("/same", "same.bin"), ("/elsewhere", "elsewhere.bin")])
        try fixture.directory.write(Data(manifest.utf8), to: "m.yaml")

        let result = try MirrorBinary.run(["sync", "m.yaml"], in: fixture.directory.path, environment: ["NETRC": work.path("netrc")])
        #expect(result.status == 0, "\(result)")
        for dest in ["direct.bin", "same.bin", "elsewhere.bin"] {
            #expect(fixture.local(dest)?.fingerprint == Self.data.fingerprint, "\(dest)")
        }
        let basic = "Basic " + Data("deploy:s3cret pw".utf8).base64EncodedString()
        let first = try fixture.settledRequests()
        #expect(first.filter { $0.uri == "/private/a.bin" }.allSatisfy { $0.authorization == basic && $0.status < 400 }, "\(first)")
        let second = try elsewhere.settledRequests()
        #expect(!second.isEmpty)
        #expect(second.allSatisfy { $0.authorization == nil }, "the login stayed with its origin: \(second.map(\.authorization))")
        #expect(!(result.stdout + result.stderr).contains("s3cret"))
    }

    @Test func withoutANetrcEntryTheServerRefusesAndTheFailureSaysSo() throws {
        let work = try TemporaryDirectory(prefix: "mirror-netrc")
        let users = try work.write(Data("deploy:{PLAIN}s3cret\n".utf8), to: "htpasswd")
        let fixture = try SyncFixture(files: ["private/a.bin": Self.data], nginx: NginxOptions(extraServerConfiguration: """
            location /private/ {
                auth_basic "mirror test";
                auth_basic_user_file \(users);
            }
            """))
        try work.write(Data("machine files.example login deploy password s3cret\n".utf8), to: "netrc")
        try fixture.directory.write(Data(fixture.manifest([("/private/a.bin", "a.bin")]).utf8), to: "m.yaml")

        let result = try MirrorBinary.run(["sync", "m.yaml"], in: fixture.directory.path, environment: ["NETRC": work.path("netrc")])
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("FAILED a.bin: HTTP 401 Unauthorized") && result.stderr.contains("1 attempt)"), "\(result)")
        #expect(fixture.local("a.bin") == nil)
        #expect(try fixture.settledRequests().allSatisfy { $0.authorization == nil })
    }
}
