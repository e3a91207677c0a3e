import Foundation
import Testing
@testable import MirrorCore

/// `rewrite:` through the binary, against two real nginx servers (the upstream and an internal
/// mirror of it under `/gh/`) and, for `only: true`, a host that counts every connection.
@Suite(.serialized)
struct RewriteTests {
    static let files: [String: Data] = [
        "a.bin": Data((0..<30_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) }),
        "b.bin": Data((0..<12_345).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 3) }),
        "c.bin": Data((0..<4_000).map { UInt8(truncatingIfNeeded: $0 &* 29 &+ 11) }),
    ]

    static func sums(_ names: [String]) -> Data {
        Data(names.map { "\(DigestHasher.hex(of: files[$0]!))  \($0)\n" }.joined().utf8)
    }

    let scenario: SyncScenario
    let mirrorSite: TemporaryDirectory
    let mirror: NginxServer

    /// The upstream serves every file and `SHA256SUMS`; the mirror serves a.bin, b.bin and the
    /// sums under `/gh/`, not c.bin.
    init() throws {
        var site = Self.files
        site["SHA256SUMS"] = Self.sums(["a.bin", "b.bin", "c.bin"])
        scenario = try SyncScenario(.nginx(site: site))
        mirrorSite = try TemporaryDirectory(prefix: "mirror-internal")
        for name in ["a.bin", "b.bin"] { _ = try mirrorSite.write(Self.files[name]!, to: "gh/\(name)") }
        _ = try mirrorSite.write(site["SHA256SUMS"]!, to: "gh/SHA256SUMS")
        mirror = try NginxServer.start(serving: mirrorSite)
    }

    /// The mirror by name (`localhost`), so that netrc can tell its host from the upstream's.
    var mirrorBase: String { "http://localhost:\(mirror.port)/gh/" }

    func mirrorRequests(atLeast count: Int) throws -> [LoggedRequest] {
        try mirror.requests(atLeast: count)
    }

    func manifest(_ names: [String], rule: [String], top: [String] = []) throws {
        let base = scenario.url("/")
        var lines = ["version: 1", "root: root", "defaults:", "  checksums: \(base)SHA256SUMS", "  headers:", "    X-Test: upstream-only"] + top
        lines += ["rewrite:", "  - from: \(base)", "    to: \(mirrorBase)"] + rule.map { "    " + $0 }
        lines += ["files:"] + names.map { "  - url: \(base)\($0)" }
        _ = try scenario.write(text: lines.joined(separator: "\n") + "\n", to: "m.yaml")
    }

    @Test func aRewriteToASecondServerServesEveryFileAndFallsBackToTheOriginal() throws {
        let netrc = try scenario.directory.write(Data("machine localhost login robot password m1rr0r\n".utf8), to: "netrc")
        let environment = ["NETRC": netrc]
        try manifest(["a.bin", "b.bin", "c.bin"], rule: [])

        let plan = try scenario.run(["plan", "--json", "m.yaml"], environment: environment)
        #expect(plan.status == 0, "\(plan)")
        #expect(plan.stdout.contains(#""url":"\#(mirrorBase)a.bin","manifest_url":"\#(scenario.url("/a.bin"))""#), "plan names the URL it goes to: \(plan.stdout)")
        let table = try scenario.run(["plan", "m.yaml"], environment: environment)
        #expect(table.stdout.contains("from \(mirrorBase)b.bin (rewritten)"), "\(table)")
        scenario.nginx.clearLog()
        mirror.clearLog()

        let synced = try scenario.run(["sync", "m.yaml"], environment: environment)
        #expect(synced.status == 0, "\(synced)")
        for (name, data) in Self.files {
            #expect(FileManager.default.contents(atPath: scenario.rootPath(name)) == data, "\(name) is the pinned bytes")
        }
        let atMirror = try mirrorRequests(atLeast: 4).filter { $0.method == "GET" }
        #expect(Set(atMirror.map(\.uri)) == ["/gh/SHA256SUMS", "/gh/a.bin", "/gh/b.bin", "/gh/c.bin"], "\(atMirror)")
        #expect(atMirror.allSatisfy { $0.xTest == nil }, "the entry's header was written for the upstream: \(atMirror.map(\.xTest))")
        let basic = "Basic " + Data("robot:m1rr0r".utf8).base64EncodedString()
        #expect(atMirror.allSatisfy { $0.authorization == basic }, "the mirror's own netrc login: \(atMirror.map(\.authorization))")
        let upstream = try scenario.nginxRequests()
        #expect(upstream.map(\.uri) == ["/c.bin"], "only what the mirror lacks comes from the upstream: \(upstream)")
        #expect(upstream.allSatisfy { $0.xTest == "upstream-only" && $0.authorization == nil }, "\(upstream)")
    }

    @Test func aRulesHeadersGoToItsReplacementOnly() throws {
        try manifest(["a.bin", "c.bin"], rule: ["headers:", "  X-Test: mirror-key"])
        mirror.clearLog()
        let synced = try scenario.run(["sync", "-q", "m.yaml"])
        #expect(synced.status == 0, "\(synced)")
        let atMirror = try mirrorRequests(atLeast: 3)
        #expect(!atMirror.isEmpty && atMirror.allSatisfy { $0.xTest == "mirror-key" }, "\(atMirror)")
        let upstream = try scenario.nginxRequests()
        #expect(upstream.map(\.uri) == ["/c.bin"] && upstream.allSatisfy { $0.xTest == "upstream-only" }, "\(upstream)")
    }

    @Test func anOnlyRuleNeverConnectsToTheOriginalHost() throws {
        let original = try FaultServer.start()
        let base = original.url("/")
        let text = """
            version: 1
            root: root
            concurrency: 4
            defaults:
              checksums: \(base)SHA256SUMS
            rewrite:
              - from: \(base)
                to: \(mirrorBase)
                only: true
            files:
              - url: \(base)a.bin
              - url: \(base)b.bin

            """
        _ = try scenario.write(text: text, to: "only.yaml")
        let plan = try scenario.run(["plan", "only.yaml"])
        #expect(plan.status == 0, "\(plan)")
        let synced = try scenario.run(["sync", "only.yaml"])
        #expect(synced.status == 0, "\(synced)")
        #expect(FileManager.default.contents(atPath: scenario.rootPath("a.bin")) == Self.files["a.bin"])
        #expect(FileManager.default.contents(atPath: scenario.rootPath("b.bin")) == Self.files["b.bin"])

        // A file the mirror lacks fails, naming the URL it was asked at: the original is not tried.
        _ = try scenario.write(text: text + "  - url: \(base)c.bin\n", to: "only.yaml")
        let missing = try scenario.run(["sync", "--report", "r.json", "only.yaml"])
        #expect(missing.status == 1, "\(missing)")
        #expect(missing.stderr.contains("\(mirrorBase)c.bin") || missing.stdout.contains("\(mirrorBase)c.bin"), "\(missing)")

        // A manifest of the failed entries keeps the rules: its retry goes to the mirror too.
        let merged = try scenario.run(["report", "--failed-manifest", "retry.yaml", "r.json"])
        let retry = String(decoding: scenario.directory.contents(of: "retry.yaml") ?? Data(), as: UTF8.self)
        #expect(retry.contains("rewrite:") && retry.contains("only: true") && retry.contains("c.bin"), "\(merged)\n\(retry)")
        _ = try mirrorSite.write(Self.files["c.bin"]!, to: "gh/c.bin")
        let retried = try scenario.run(["sync", "retry.yaml"])
        #expect(retried.status == 0, "\(retried)")
        #expect(FileManager.default.contents(atPath: scenario.rootPath("c.bin")) == Self.files["c.bin"])
        #expect(original.acceptedConnections == 0, "an `only` rule's host saw \(original.acceptedConnections) connections")
    }

    @Test func aMirrorThatRedirectsToTheForbiddenHostIsNotFollowed() throws {
        let original = try FaultServer.start()
        let redirecting = try FaultServer.start()
        redirecting.route("/m/r.bin", reply: .redirect(to: original.url("/r.bin")))
        redirecting.route("/m/elsewhere.bin", reply: .redirect(to: mirror.url("/gh/a.bin")))
        _ = try scenario.write(text: """
            version: 1
            root: root
            rewrite:
              - from: \(original.url("/"))
                to: \(redirecting.url("/m/"))
                only: true
            files:
              - url: \(original.url("/r.bin"))
              - url: \(original.url("/elsewhere.bin"))

            """, to: "redirect.yaml")
        let synced = try scenario.run(["sync", "redirect.yaml"])
        #expect(synced.status == 1, "\(synced)")
        #expect(synced.stderr.contains("r.bin") && synced.stderr.contains("`only: true` rewrite rule"), "\(synced)")
        #expect(FileManager.default.contents(atPath: scenario.rootPath("elsewhere.bin")) == Self.files["a.bin"],
                "a redirect anywhere else is followed")
        #expect(original.acceptedConnections == 0, "the forbidden host saw \(original.acceptedConnections) connections")
    }
}
