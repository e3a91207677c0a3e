import Foundation
import Testing

/// `make install`, `make uninstall` and the examples/systemd units, checked with the tools that
/// will read what they install: man, bash, zsh, fish and systemd-analyze.
///
/// The tests install the release build that `make test` makes before running them (`make
/// install MIRROR_BINARY=…`), as building it from inside a test run would wait on the lock of
/// the run's own `.build`.
@Suite(.serialized)
struct InstallTests {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().path

    /// Every file `make install` puts under PREFIX, and its mode.
    static let installedFiles: [(path: String, mode: mode_t)] = [
        ("bin/mirror", 0o755),
        ("share/man/man1/mirror.1", 0o644),
        ("share/man/man5/mirror-manifest.5", 0o644),
        ("share/bash-completion/completions/mirror", 0o644),
        ("share/zsh/site-functions/_mirror", 0o644),
        ("share/fish/vendor_completions.d/mirror.fish", 0o644),
    ]

    struct ReleaseNotBuilt: Error, CustomStringConvertible {
        var path: String
        var description: String { "no release build at \(path): run `make release` (make test builds it before the tests)" }
    }

    /// The binary `make release` builds, statically linked with the Swift runtime.
    static func releaseBinary() throws -> String {
        let path = packageRoot + "/.build/release/mirror"
        guard FileManager.default.isExecutableFile(atPath: path) else { throw ReleaseNotBuilt(path: path) }
        return path
    }

    /// Runs `make target variables` in the package root.
    static func make(_ target: String, _ variables: [String]) throws -> ExternalCommand.Result {
        try ExternalCommand.run(try ExternalCommand.executable("make", package: "make"),
                                ["--no-print-directory", target] + variables, in: packageRoot)
    }

    /// A fresh prefix with `make install PREFIX=…` done in it.
    static func installed() throws -> TemporaryDirectory {
        let prefix = try TemporaryDirectory(prefix: "mirror-install")
        let result = try make("install", ["PREFIX=\(prefix.path)", "MIRROR_BINARY=\(try releaseBinary())"])
        try #require(result.status == 0, "\(result)")
        return prefix
    }

    static func mode(of path: String) -> mode_t? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return status.st_mode & 0o7777
    }

    @Test func makeInstallPutsEveryFileInPlaceUnderDestdirAndPrefixAndUninstallRemovesThem() throws {
        let destdir = try TemporaryDirectory(prefix: "mirror-destdir")
        let variables = ["DESTDIR=\(destdir.path)", "PREFIX=/opt/mirror", "MIRROR_BINARY=\(try Self.releaseBinary())"]
        let install = try Self.make("install", variables)
        try #require(install.status == 0, "\(install)")
        let prefix = destdir.path + "/opt/mirror"
        for file in Self.installedFiles {
            #expect(Self.mode(of: prefix + "/" + file.path) == file.mode, "\(file.path) missing or with the wrong mode")
        }

        let binary = prefix + "/bin/mirror"
        let version = try ExternalCommand.run(binary, ["--version"], in: destdir.path)
        #expect(version.status == 0 && !version.stdout.isEmpty, "\(version)")
        // The release build: the Swift runtime linked in, no libswift*.so to install beside it.
        let libraries = try ExternalCommand.run(try ExternalCommand.executable("ldd", package: "libc-bin"), [binary], in: destdir.path)
        #expect(libraries.status == 0, "\(libraries)")
        #expect(!libraries.stdout.contains("libswift") && !libraries.stdout.contains("libFoundation"), "\(libraries)")
        for shell in ["bash", "zsh", "fish"] {
            let generated = try ExternalCommand.run(binary, ["--generate-completion-script", shell], in: destdir.path)
            let path = Self.installedFiles.first { $0.path.contains(shell == "bash" ? "bash-completion" : shell) }!.path
            #expect(FileManager.default.contents(atPath: prefix + "/" + path) == Data(generated.stdout.utf8),
                    "\(path) is not what the installed binary generates for \(shell)")
        }

        let uninstall = try Self.make("uninstall", variables)
        try #require(uninstall.status == 0, "\(uninstall)")
        let left = FileManager.default.enumerator(atPath: destdir.path)?.compactMap { $0 as? String }.filter {
            var isDirectory: ObjCBool = false
            return !FileManager.default.fileExists(atPath: destdir.path + "/" + $0, isDirectory: &isDirectory) || !isDirectory.boolValue
        }
        #expect(left == [], "make uninstall left files behind")
    }

    /// mimalloc serves every allocation of the process only while the dynamic loader meets it
    /// before libc: the binary's NEEDED list is the order symbols are looked up in.
    @Test func theReleaseBinaryAllocatesWithMimallocAheadOfLibc() throws {
        let binary = try Self.releaseBinary()
        let readelf = try ExternalCommand.executable("readelf", package: "binutils")
        let dynamic = try ExternalCommand.run(readelf, ["--dynamic", binary], in: "/")
        try #require(dynamic.status == 0, "\(dynamic)")
        let needed = dynamic.stdout.split(separator: "\n").filter { $0.contains("(NEEDED)") }
        let mimalloc = try #require(needed.firstIndex { $0.contains("[libmimalloc.so") }, "no libmimalloc in \(needed)")
        let libc = try #require(needed.firstIndex { $0.contains("[libc.so") }, "no libc in \(needed)")
        #expect(mimalloc < libc, "libmimalloc comes after libc: glibc's malloc would serve the process\n\(needed.joined(separator: "\n"))")
        // And it is the allocator set up in the running process.
        let run = try ExternalCommand.run(binary, ["--version"], in: "/", environment: ["MIMALLOC_VERBOSE": "1"])
        #expect(run.status == 0 && run.stderr.contains("mimalloc: process init"), "\(run)")
    }

    @Test func installedManPagesRenderWithManFromThePrefix() throws {
        let prefix = try Self.installed()
        let man = try ExternalCommand.executable("man", package: "man-db")
        for (section, page, heading) in [("1", "mirror", "EXIT STATUS"), ("5", "mirror-manifest", "VARIABLES")] {
            // -M: found by name under PREFIX/share/man, as `man mirror` would find it there.
            let rendered = try ExternalCommand.run(man, ["--warnings", "-M", prefix.path + "/share/man", section, page],
                                                   in: prefix.path, environment: ["MANWIDTH": "80", "MANPAGER": "cat", "PAGER": "cat"])
            #expect(rendered.status == 0, "\(rendered)")
            #expect(rendered.stderr.isEmpty, "man \(section) \(page) warned:\n\(rendered.stderr)")
            #expect(rendered.stdout.contains(heading), "man \(section) \(page) lacks \(heading):\n\(rendered.stdout.prefix(2000))")
        }
    }

    /// The words the installed bash completion offers for `words` (the last one being typed).
    static func bashCompletions(_ words: [String], prefix: TemporaryDirectory) throws -> [String] {
        let (offered, registered) = try CompletionTests.bashCompletions(
            words, script: prefix.path + "/share/bash-completion/completions/mirror", in: prefix.path,
            environment: ["PATH": prefix.path + "/bin:/usr/bin:/bin"])
        #expect(registered == "complete -o filenames -F _mirror mirror\n")
        return offered
    }

    @Test func installedBashCompletionCompletesSubcommandsAndOptions() throws {
        let prefix = try Self.installed()
        #expect(try Self.bashCompletions(["mirror", "s"], prefix: prefix) == ["sync"])
        #expect(Set(try Self.bashCompletions(["mirror", ""], prefix: prefix)).isSuperset(of: ["plan", "sync", "verify", "lock"]))
        #expect(try Self.bashCompletions(["mirror", "sync", "--wait-l"], prefix: prefix) == ["--wait-lock"])
    }

    @Test func installedZshAndFishCompletionsParse() throws {
        let prefix = try Self.installed()
        let zsh = try ExternalCommand.run(try ExternalCommand.executable("zsh", package: "zsh"),
                                          ["-n", prefix.path + "/share/zsh/site-functions/_mirror"], in: prefix.path)
        #expect(zsh.status == 0 && zsh.stderr.isEmpty, "\(zsh)")
        let fish = try ExternalCommand.executable("fish", package: "fish")
        let file = prefix.path + "/share/fish/vendor_completions.d/mirror.fish"
        let parse = try ExternalCommand.run(fish, ["--no-execute", file], in: prefix.path)
        #expect(parse.status == 0 && parse.stderr.isEmpty, "\(parse)")
        // Loaded, it offers the subcommands.
        let complete = try ExternalCommand.run(fish, ["--no-config", "-c", "source \(file); complete -C 'mirror s'"],
                                               in: prefix.path, environment: ["PATH": prefix.path + "/bin:/usr/bin:/bin"])
        #expect(complete.status == 0, "\(complete)")
        #expect(complete.stdout.split(separator: "\n").contains { $0.hasPrefix("sync") }, "\(complete)")
    }
}
