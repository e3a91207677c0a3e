import Foundation
import Testing

/// libcurl and libcrypto are loaded when a command first needs them, not when mirror starts.
/// Where one cannot be loaded (removed, or not a library), a command that needs it says so,
/// names the package, and exits 2 before writing anything; one that needs neither still works.
/// The library is hidden in a mount namespace of the test's own: /dev/null is bound over it.
struct WithoutLibraryTests {
    struct Missing: CustomTestStringConvertible, Sendable {
        /// The library's file name, under /lib or /usr/lib.
        var file: String
        /// Its Debian package.
        var package: String
        /// What mirror calls it when it cannot be loaded.
        var name: String
        /// The commands that stop without it: those that make requests need libcurl, those that
        /// read a manifest (and may hash) libcrypto.
        var commands: [String]
        var testDescription: String { file }
    }

    @Test(arguments: [
        Missing(file: "libcurl.so.4", package: "libcurl4", name: "libcurl", commands: ["sync", "plan", "lock"]),
        Missing(file: "libcrypto.so.3", package: "libssl3", name: "libcrypto", commands: ["sync", "plan", "lock", "verify"]),
    ])
    func aCommandThatNeedsAMissingLibrarySaysSoAndStops(_ missing: Missing) throws {
        let unshare = try ExternalCommand.executable("unshare", package: "util-linux")
        let library = try #require(["/lib/x86_64-linux-gnu/\(missing.file)", "/usr/lib/x86_64-linux-gnu/\(missing.file)"]
            .first { FileManager.default.fileExists(atPath: $0) }, "\(missing.file) is installed (apt-get install -y \(missing.package))")
        let directory = try TemporaryDirectory(prefix: "mirror-no-library")
        let manifest = directory.path("m.yaml")
        try "version: 1\nroot: \(directory.path("root"))\nfiles:\n  - url: http://127.0.0.1:9/a.bin\n".write(toFile: manifest, atomically: true, encoding: .utf8)
        let mirror = try MirrorBinary.path()
        func run(_ arguments: String) throws -> ExternalCommand.Result {
            try ExternalCommand.run(unshare, ["-m", "--propagation", "private", "/bin/sh", "-c",
                                              "mount --bind /dev/null '\(library)' && exec '\(mirror)' \(arguments)"], in: "/")
        }
        for command in missing.commands {
            let result = try run("\(command) '\(manifest)'")
            #expect(result.status == 2, "\(command): \(result)")
            #expect(result.stderr.contains("cannot load \(missing.name)"), "\(command): \(result)")
            #expect(result.stderr.contains("apt-get install \(missing.package)"), "\(command): \(result)")
            #expect(!FileManager.default.fileExists(atPath: directory.path("root")), "\(command) wrote nothing: \(result)")
        }
        // In a root a run made before, sync takes its lock and store while the library loads;
        // the run still stops there, and the root's files are as they were.
        let made = directory.path("made")
        try FileManager.default.createDirectory(atPath: made + "/.mirror", withIntermediateDirectories: true)
        try Data("kept".utf8).write(to: URL(fileURLWithPath: made + "/keep.bin"))
        let again = directory.path("again.yaml")
        try "version: 1\nroot: \(made)\nfiles:\n  - url: http://127.0.0.1:9/a.bin\n".write(toFile: again, atomically: true, encoding: .utf8)
        let existing = try run("sync '\(again)'")
        #expect(existing.status == 2 && existing.stderr.contains("cannot load \(missing.name)"), "\(existing)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: made).sorted() == [".mirror", "keep.bin"], "\(existing)")
        #expect(FileManager.default.contents(atPath: made + "/keep.bin") == Data("kept".utf8))
        let json = try run("sync --json '\(manifest)'")
        #expect(json.status == 2 && json.stdout.contains(#""kind":"usage""#) && json.stdout.contains(missing.name), "\(json)")
        let version = try run("--version")
        #expect(version.status == 0, "a command that needs no library works without it: \(version)")
    }
}
