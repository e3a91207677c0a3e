import Foundation
import Testing

/// libcrypto is loaded when a command first needs it, not when mirror starts. Where it cannot be
/// loaded, a command that reads a manifest (and may hash) says so, names the package, and exits
/// 2 before writing anything; one that reads none still works. The library is hidden in a
/// mount namespace of the test's own: /dev/null is bound over libcrypto.so.3.
struct WithoutLibcryptoTests {
    @Test func aCommandThatMayHashSaysLibcryptoIsMissingAndStops() throws {
        let unshare = try ExternalCommand.executable("unshare", package: "util-linux")
        let library = try #require(["/lib/x86_64-linux-gnu/libcrypto.so.3", "/usr/lib/x86_64-linux-gnu/libcrypto.so.3"]
            .first { FileManager.default.fileExists(atPath: $0) }, "libcrypto.so.3 is installed (apt-get install -y libssl3)")
        let directory = try TemporaryDirectory(prefix: "mirror-no-libcrypto")
        let manifest = directory.path("m.yaml")
        try "version: 1\nroot: \(directory.path("root"))\nfiles:\n  - url: http://127.0.0.1:9/a.bin\n".write(toFile: manifest, atomically: true, encoding: .utf8)
        let mirror = try MirrorBinary.path()
        func run(_ arguments: String) throws -> ExternalCommand.Result {
            try ExternalCommand.run(unshare, ["-m", "--propagation", "private", "/bin/sh", "-c",
                                              "mount --bind /dev/null '\(library)' && exec '\(mirror)' \(arguments)"], in: "/")
        }
        for command in ["sync", "plan", "lock", "verify"] {
            let result = try run("\(command) '\(manifest)'")
            #expect(result.status == 2, "\(command): \(result)")
            #expect(result.stderr.contains("cannot load libcrypto"), "\(command): \(result)")
            #expect(result.stderr.contains("apt-get install libssl3"), "\(command): \(result)")
            #expect(!FileManager.default.fileExists(atPath: directory.path("root")), "\(command) wrote nothing: \(result)")
        }
        let json = try run("sync --json '\(manifest)'")
        #expect(json.status == 2 && json.stdout.contains(#""kind":"usage""#) && json.stdout.contains("libcrypto"), "\(json)")
        let version = try run("--version")
        #expect(version.status == 0, "a command that reads no manifest needs no libcrypto: \(version)")
    }
}
