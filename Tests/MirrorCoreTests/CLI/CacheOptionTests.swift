import Foundation
import Testing
@testable import MirrorCore

/// `--cache`, `--no-cache`, `MIRROR_CACHE` and `cache:` on the command line: which cache a run
/// uses, what `plan` shows, and a cache that may not be used.
@Suite(.serialized)
struct CacheOptionTests {
    static let data = Data((0..<20_000).map { UInt8(truncatingIfNeeded: $0 &* 17 &+ 5) })

    let scenario: SyncScenario

    init() throws {
        scenario = try SyncScenario(.nginx(site: ["a.bin": Self.data]))
    }

    /// A manifest of the pinned a.bin into `root`, with `top` lines.
    @discardableResult
    func manifest(_ name: String, root: String, top: [String] = []) throws -> String {
        try scenario.write(ManifestText(root: root, top: top, entries: [
            .init(scenario.url("/a.bin"), "sha256: \(DigestHasher.hex(of: Self.data))"),
        ]), to: name)
    }

    func blobExists(in cache: String) -> Bool {
        FileManager.default.fileExists(atPath: scenario.directory.path("\(cache)/sha256/\(DigestHasher.hex(of: Self.data).prefix(2))/\(DigestHasher.hex(of: Self.data))"))
    }

    @Test func theFlagWinsOverTheVariableWhichWinsOverTheManifest() throws {
        try manifest("m.yaml", root: "one", top: ["cache: from-manifest"])
        let variable = ["MIRROR_CACHE": scenario.directory.path("from-variable")]
        let flagged = try scenario.run(["sync", "--json", "--cache", "from-flag", "m.yaml"], environment: variable)
        #expect(flagged.status == 0, "\(flagged)")
        #expect(flagged.stdout.contains(#""cache":{"hits":0,"misses":1,"bytes_placed":0}"#), "\(flagged)")
        #expect(blobExists(in: "from-flag") && !blobExists(in: "from-variable") && !blobExists(in: "from-manifest"))

        try manifest("m2.yaml", root: "two", top: ["cache: from-manifest"])
        #expect(try scenario.run(["sync", "-q", "m2.yaml"], environment: variable).status == 0)
        #expect(blobExists(in: "from-variable") && !blobExists(in: "from-manifest"))

        try manifest("m3.yaml", root: "three", top: ["cache: from-manifest"])
        #expect(try scenario.run(["sync", "-q", "m3.yaml"]).status == 0)
        #expect(blobExists(in: "from-manifest"))

        try manifest("m4.yaml", root: "four", top: ["cache: none-wanted"])
        #expect(try scenario.run(["sync", "-q", "--no-cache", "m4.yaml"], environment: variable).status == 0)
        #expect(!FileManager.default.fileExists(atPath: scenario.directory.path("none-wanted")))
    }

    @Test func planShowsCachedAndSyncPlacesWithNoRequest() throws {
        try manifest("m.yaml", root: "one")
        #expect(try scenario.run(["sync", "-q", "--cache", "c", "m.yaml"]).status == 0)
        try manifest("n.yaml", root: "two")
        scenario.nginx.clearLog()
        let plan = try scenario.run(["plan", "--cache", "c", "n.yaml"])
        #expect(plan.status == 0 && plan.stdout.contains("cached") && plan.stdout.contains("as a reflink where the file system can"), "\(plan)")
        try manifest("h.yaml", root: "two", top: ["cache_place: hardlink"])
        let linked = try scenario.run(["plan", "--cache", "c", "h.yaml"])
        #expect(linked.stdout.contains("as another name of the blob"), "how a placement would be made: \(linked)")
        let changes = try scenario.run(["plan", "--exit-code", "--cache", "c", "n.yaml"])
        #expect(changes.status == 5, "a placement is a change: \(changes)")
        let json = try scenario.run(["plan", "--json", "--cache", "c", "n.yaml"])
        #expect(json.stdout.contains(#""action":"cached""#), "\(json)")
        let synced = try scenario.run(["sync", "--json", "--metrics-file", "metrics.prom", "--cache", "c", "n.yaml"])
        #expect(synced.status == 0, "\(synced)")
        #expect(synced.stdout.contains(#""cache":{"hits":1,"misses":0,"bytes_placed":20000}"#), "\(synced)")
        let metrics = String(decoding: scenario.directory.contents(of: "metrics.prom") ?? Data(), as: UTF8.self)
        #expect(metrics.contains("mirror_cache_hits{") && metrics.contains("} 1\n") && metrics.contains("mirror_cache_bytes_placed{"), "\(metrics)")
        let text = try scenario.run(["sync", "--cache", "c", "n.yaml"])
        #expect(!text.stdout.contains("placed from the cache"), "nothing placed the second time: \(text)")
        #expect(try scenario.nginxRequests().isEmpty, "neither plan nor sync asked the server")
        let stats = try scenario.run(["cache", "stats", "--json", "--cache", "c"])
        #expect(stats.stdout.contains(#""hits":1"#), "one placement counted: \(stats)")
        let list = try scenario.run(["cache", "list", "--cache", "c"])
        #expect(list.stdout.contains("1 hits"), "\(list)")
        #expect(FileManager.default.contents(atPath: scenario.directory.path("two/a.bin")) == Self.data)
        // Without the cache, the same plan downloads.
        let without = try scenario.run(["plan", "--no-cache", "n.yaml"], environment: ["MIRROR_CACHE": scenario.directory.path("c")])
        #expect(!without.stdout.contains("cached"), "\(without)")
    }

    @Test func aCacheInsideTheRootIsRefusedBeforeAnythingIsWritten() throws {
        try manifest("m.yaml", root: "one")
        let flagged = try scenario.run(["sync", "--cache", "one/blobs", "m.yaml"])
        #expect(flagged.status == 2 && flagged.stderr.contains("--cache") && flagged.stderr.contains("inside it"), "\(flagged)")
        let variable = try scenario.run(["plan", "m.yaml"], environment: ["MIRROR_CACHE": scenario.directory.path("one")])
        #expect(variable.status == 2 && variable.stderr.contains("MIRROR_CACHE"), "\(variable)")
        try manifest("bad.yaml", root: "one", top: ["cache: one/cache"])
        let manifested = try scenario.run(["sync", "bad.yaml"])
        #expect(manifested.status == 2 && manifested.stderr.contains("bad.yaml:3:") && manifested.stderr.contains("cache"), "\(manifested)")
        #expect(!FileManager.default.fileExists(atPath: scenario.directory.path("one")))
        let both = try scenario.run(["sync", "--cache", "c", "--no-cache", "m.yaml"])
        #expect(both.status == 2 && both.stderr.contains("contradict"), "\(both)")
    }

    @Test func offlineMakesNoRequestAndFailsNamingWhatIsMissing() throws {
        let other = Data("another file, never cached\n".utf8)
        try other.write(to: URL(fileURLWithPath: scenario.directory.path("site/b.bin")))
        try manifest("m.yaml", root: "one")
        #expect(try scenario.run(["sync", "-q", "--cache", "c", "m.yaml"]).status == 0)
        // A second root: a.bin pinned and cached, b.bin neither pinned nor anywhere.
        try scenario.write(ManifestText(root: "two", entries: [
            .init(scenario.url("/a.bin"), "sha256: \(DigestHasher.hex(of: Self.data))"),
            .init(scenario.url("/b.bin")),
        ]), to: "n.yaml")
        scenario.nginx.clearLog()
        let check = try scenario.run(["plan", "--offline", "--exit-code", "--cache", "c", "n.yaml"])
        #expect(check.status == 1, "something cannot be had offline: \(check)")
        #expect(check.stdout.contains("cached") && check.stdout.contains("offline"), "\(check)")
        let synced = try scenario.run(["sync", "--offline", "--cache", "c", "n.yaml"])
        #expect(synced.status == 1, "\(synced)")
        #expect(synced.stderr.contains("b.bin") && synced.stderr.contains("offline") && synced.stderr.contains(scenario.url("/b.bin")), "\(synced)")
        #expect(FileManager.default.contents(atPath: scenario.directory.path("two/a.bin")) == Self.data)
        #expect(!FileManager.default.fileExists(atPath: scenario.directory.path("two/b.bin")))
        // A pinned file missing from the cache is named by its digest.
        try scenario.write(ManifestText(root: "three", entries: [
            .init(scenario.url("/b.bin"), "sha256: \(DigestHasher.hex(of: other))"),
        ]), to: "p.yaml")
        let pinned = try scenario.run(["sync", "--offline", "--cache", "c", "p.yaml"])
        #expect(pinned.status == 1 && pinned.stderr.contains(DigestHasher.hex(of: other)), "\(pinned)")
        // What the root holds verified is kept: the first root, offline, is all there.
        let kept = try scenario.run(["plan", "--offline", "--exit-code", "m.yaml"])
        #expect(kept.status == 0, "\(kept)")
        #expect(try scenario.nginxRequests().isEmpty, "no request at all offline")
    }
}
