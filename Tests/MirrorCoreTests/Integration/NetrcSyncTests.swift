import Foundation
import Testing

/// `$NETRC` (or `~/.netrc`) logins against nginx with basic auth on loopback: sent to the
/// URL's own origin, and never carried by a redirect to another one.
@Suite(.serialized)
struct NetrcSyncTests {
    static let data = randomData(count: 12_000, seed: 191)

    @Test func theNetrcLoginGoesToItsOriginOnlyAndNeverAcrossARedirect() throws {
        // The other origin: same address, another port; it asks for no login, and logs any.
        let elsewhere = try SyncScenario(.nginx(site: ["a.bin": Self.data]))
        let work = try TemporaryDirectory(prefix: "mirror-netrc")
        let users = try work.write(Data("deploy:{PLAIN}s3cret pw\n".utf8), to: "htpasswd")
        let scenario = try SyncScenario(.nginx(site: ["private/a.bin": Self.data], options: NginxOptions(extraServerConfiguration: """
            location /private/ {
                auth_basic "mirror test";
                auth_basic_user_file \(users);
            }
            location = /same {
                absolute_redirect off;
                return 302 /private/a.bin;
            }
            location = /elsewhere {
                return 302 \(elsewhere.url("/a.bin"));
            }
            """)))
        try work.write(Data("machine 127.0.0.1 login deploy password \"s3cret pw\"\n".utf8), to: "netrc")
        try scenario.write(.files(
            .url(scenario.url("/private/a.bin"), dest: "direct.bin"), .url(scenario.url("/same"), dest: "same.bin"),
            .url(scenario.url("/elsewhere"), dest: "elsewhere.bin")))

        let result = try scenario.run(["sync", "m.yaml"], environment: ["NETRC": work.path("netrc")])
        #expect(result.status == 0, "\(result)")
        for dest in ["direct.bin", "same.bin", "elsewhere.bin"] {
            #expect(scenario.local(dest)?.fingerprint == Self.data.fingerprint, "\(dest)")
        }
        let basic = "Basic " + Data("deploy:s3cret pw".utf8).base64EncodedString()
        let first = try scenario.nginxRequests()
        #expect(first.filter { $0.uri == "/private/a.bin" }.allSatisfy { $0.authorization == basic && $0.status < 400 }, "\(first)")
        let second = try elsewhere.nginxRequests()
        #expect(!second.isEmpty)
        #expect(second.allSatisfy { $0.authorization == nil }, "the login stayed with its origin: \(second.map(\.authorization))")
        #expect(!(result.stdout + result.stderr).contains("s3cret"))
    }

    @Test func withoutANetrcEntryTheServerRefusesAndTheFailureSaysSo() throws {
        let work = try TemporaryDirectory(prefix: "mirror-netrc")
        let users = try work.write(Data("deploy:{PLAIN}s3cret\n".utf8), to: "htpasswd")
        let scenario = try SyncScenario(.nginx(site: ["private/a.bin": Self.data], options: NginxOptions(extraServerConfiguration: """
            location /private/ {
                auth_basic "mirror test";
                auth_basic_user_file \(users);
            }
            """)))
        try work.write(Data("machine files.example login deploy password s3cret\n".utf8), to: "netrc")
        try scenario.write(.files(.url(scenario.url("/private/a.bin"), dest: "a.bin")))

        let result = try scenario.run(["sync", "m.yaml"], environment: ["NETRC": work.path("netrc")])
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("FAILED a.bin: HTTP 401 Unauthorized") && result.stderr.contains("1 attempt)"), "\(result)")
        #expect(scenario.local("a.bin") == nil)
        #expect(try scenario.nginxRequests().allSatisfy { $0.authorization == nil })
    }
}
