import Foundation
import Testing

/// examples/systemd: the `mirror-sync@.service` and `.timer` pair, as systemd would read them.
@Suite(.serialized)
struct SystemdUnitTests {
    static let examples = InstallTests.packageRoot + "/examples/systemd"
    static let installedPath = "/usr/local/bin/mirror"

    /// The units for instance `name`, written into `directory` with `ExecStart`'s binary replaced
    /// by `binary` (systemd-analyze checks that it exists and is executable).
    static func instantiate(_ name: String, binary: String, in directory: TemporaryDirectory) throws -> [String] {
        try ["service", "timer"].map { kind in
            let text = try String(contentsOfFile: "\(examples)/mirror-sync@.\(kind)", encoding: .utf8)
            return try directory.write(Data(text.replacingOccurrences(of: installedPath, with: binary).utf8),
                                       to: "mirror-sync@\(name).\(kind)")
        }
    }

    /// The command line of `ExecStart=` in the service template.
    static func execStart() throws -> [String] {
        let text = try String(contentsOfFile: examples + "/mirror-sync@.service", encoding: .utf8)
        let lines = text.split(separator: "\n").filter { $0.hasPrefix("ExecStart=") }
        try #require(lines.count == 1, "one ExecStart= line expected")
        return lines[0].dropFirst("ExecStart=".count).split(separator: " ").map(String.init)
    }

    @Test func theServiceAndTimerPassSystemdAnalyzeVerify() throws {
        let prefix = try InstallTests.installed()
        let units = try TemporaryDirectory(prefix: "mirror-units")
        let files = try Self.instantiate("assets", binary: prefix.path + "/bin/mirror", in: units)
        #expect(try Self.execStart().first == Self.installedPath, "ExecStart runs the binary make install puts in /usr/local")
        let analyze = try ExternalCommand.executable("systemd-analyze", package: "systemd")
        // MANPATH: verify also checks each Documentation=man: page with man(1).
        let verify = try ExternalCommand.run(analyze, ["verify"] + files, in: units.path,
                                             environment: ["MANPATH": prefix.path + "/share/man"])
        #expect(verify.status == 0, "\(verify)")
        // Unknown keys and bad values are only warnings to verify; the units must have none.
        #expect(verify.stdout.isEmpty && verify.stderr.isEmpty, "\(verify)")
    }

    /// The `ExecStart=` line itself, its `%i` filled in and its paths moved into a temporary
    /// directory, syncs a manifest: every option it passes is one `mirror sync` accepts.
    @Test func theServiceCommandLineSyncsTheInstancesManifestIntoItsRoot() throws {
        let prefix = try InstallTests.installed()
        let system = try TemporaryDirectory(prefix: "mirror-system")
        let source = try system.write(Data("payload\n".utf8), to: "source/data.txt")
        try system.write(Data("version: 1\nallow_file: true\nfiles:\n  - url: file://\(source)\n    dest: data.txt\n".utf8),
                         to: "etc/mirror/assets.yaml")
        try FileManager.default.createDirectory(atPath: system.path("srv/mirror/assets"), withIntermediateDirectories: true)
        let command = try Self.execStart().map {
            $0.replacingOccurrences(of: Self.installedPath, with: prefix.path + "/bin/mirror")
                .replacingOccurrences(of: "%i", with: "assets")
                .replacingOccurrences(of: "/etc/mirror/", with: system.path("etc/mirror/"))
                .replacingOccurrences(of: "/srv/mirror/", with: system.path("srv/mirror/"))
        }
        let run = try ExternalCommand.run(command[0], Array(command.dropFirst()), in: "/")
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.isEmpty && run.stderr.isEmpty, "--quiet: nothing printed on success\n\(run)")
        #expect(FileManager.default.contents(atPath: system.path("srv/mirror/assets/data.txt")) == Data("payload\n".utf8))
    }
}
