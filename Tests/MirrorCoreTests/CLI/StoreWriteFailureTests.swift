import Foundation
import Testing

/// A state store that opens but cannot be written (read-only to the user who runs mirror) loses
/// every record of the run, so the next run fetches or hashes again what this one did: the
/// first failed write is said at the default verbosity, not only with -v.
struct StoreWriteFailureTests {
    @Test func aStoreThatCannotBeWrittenIsSaidWithoutVerbose() throws {
        let scenario = try SyncScenario(.nginx(site: ["a.bin": Data("hello".utf8), "b.bin": Data("world".utf8)]))
        try scenario.write(.files(.url(scenario.url("/a.bin"))))
        #expect(try scenario.run(["sync", "--quiet", "m.yaml"]).status == 0)
        try scenario.write(.files(.url(scenario.url("/a.bin")), .url(scenario.url("/b.bin"))))
        // Everything is nobody's but the store, which stays root's and read-only to others.
        chmod(scenario.directory.path, 0o755)
        let chown = try ExternalCommand.executable("chown", package: "coreutils")
        _ = try ExternalCommand.run(chown, ["-R", "65534:65534", scenario.directory.path("root")], in: "/")
        #expect(Glibc.chown(scenario.rootPath(".mirror/state.sqlite"), 0, 0) == 0)
        chmod(scenario.rootPath(".mirror/state.sqlite"), 0o644)
        // A copy of the binary that nobody may run, wherever the checkout is.
        let binary = scenario.directory.path("mirror")
        try FileManager.default.copyItem(atPath: try MirrorBinary.path(), toPath: binary)
        let setpriv = try ExternalCommand.executable("setpriv", package: "util-linux")
        let result = try scenario.run(["sync", "m.yaml"], environment: ["HOME": "/tmp"],
                                      launcher: [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
                                                 "/bin/sh", "-c", "shift; exec '\(binary)' \"$@\"", "sh"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.contains("mirror: warning: writing \(scenario.rootPath(".mirror/state.sqlite"))"), "\(result)")
        #expect(result.stderr.components(separatedBy: "mirror: warning:").count == 2, "said once: \(result)")
    }
}
