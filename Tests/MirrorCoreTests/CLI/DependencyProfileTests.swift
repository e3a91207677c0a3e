import Foundation
import Testing

/// What each make target installs. `make release` and `make install` need only the libraries
/// mirror builds against, `make demo` those and nginx, and `make test` everything the tests run:
/// a release build must not stop because PyPI or a test server's package cannot be had, and a
/// user without root must be able to install into a prefix of their own.
///
/// Each case runs the real Makefile and scripts in a copy of the checkout, with `swift` standing
/// in for the build (the release binary of this run is what it "builds") and `dpkg-query`,
/// `apt-get`, `sudo` and `pip` on `PATH` replaced by scripts that log how they were called:
/// `dpkg-query` then asks the real one, the others fail, as they would without a network.
@Suite(.serialized)
struct DependencyProfileTests {
    static let buildPackages: Set = ["libcurl4-openssl-dev", "libyaml-dev", "libssl-dev", "libsqlite3-dev", "libmimalloc-dev", "pkg-config"]

    /// A checkout copy, the logging stand-ins and a log folder, all readable by any user.
    struct Rig {
        let directory: TemporaryDirectory
        var checkout: String { directory.path("checkout") }
        var bin: String { directory.path("bin") }
        var log: String { directory.path("log") }

        init() throws {
            directory = try TemporaryDirectory(prefix: "mirror-deps")
            let root = InstallTests.packageRoot
            let release = try InstallTests.releaseBinary()
            try FileManager.default.createDirectory(atPath: directory.path("checkout/.build/release"), withIntermediateDirectories: true)
            for item in ["Makefile", "scripts", "man"] {
                try FileManager.default.copyItem(atPath: "\(root)/\(item)", toPath: "\(checkout)/\(item)")
            }
            try FileManager.default.copyItem(atPath: release, toPath: "\(checkout)/.build/release/mirror")
            try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: log, withIntermediateDirectories: true)
            let dpkgQuery = try ExternalCommand.executable("dpkg-query", package: "dpkg")
            let stand_ins = [
                // The package asked about is the last argument.
                "dpkg-query": "for last; do :; done; echo \"$last\" >> \(log)/dpkg-query\nexec \(dpkgQuery) \"$@\"",
                "apt-get": "echo \"apt-get $*\" >> \(log)/installers; exit 1",
                "sudo": "echo \"sudo $*\" >> \(log)/installers; exit 1",
                "pip": "echo \"pip $*\" >> \(log)/installers; exit 1",
                "pip3": "echo \"pip3 $*\" >> \(log)/installers; exit 1",
                "swift": "case \"$*\" in *--show-bin-path*) echo \(checkout)/.build/release ;; esac; exit 0",
            ]
            for (name, body) in stand_ins {
                let path = "\(bin)/\(name)"
                try Data("#!/bin/sh\n\(body)\n".utf8).write(to: URL(fileURLWithPath: path))
                chmod(path, 0o755)
            }
            chmod(directory.path, 0o755)
            chmod(log, 0o777)
        }

        /// `make target` in the copy, as root or as `nobody` (uid and gid 65534).
        func make(_ arguments: [String], asNobody: Bool = false) throws -> ExternalCommand.Result {
            let make = try ExternalCommand.executable("make", package: "make")
            let environment = ["PATH": "\(bin):/usr/bin:/bin:/usr/sbin:/sbin", "SWIFT": "\(bin)/swift"]
            if asNobody {
                let setpriv = try ExternalCommand.executable("setpriv", package: "util-linux")
                return try ExternalCommand.run(setpriv, ["--reuid=65534", "--regid=65534", "--clear-groups", make,
                                                         "--no-print-directory"] + arguments,
                                               in: checkout, environment: environment)
            }
            return try ExternalCommand.run(make, ["--no-print-directory"] + arguments, in: checkout, environment: environment)
        }

        func lines(of name: String) -> [String] {
            let text = (try? String(contentsOfFile: "\(log)/\(name)", encoding: .utf8)) ?? ""
            return text.split(separator: "\n").map(String.init)
        }
    }

    @Test func makeReleaseAsksOnlyForTheBuildLibrariesAndInstallsNothing() throws {
        let rig = try Rig()
        let result = try rig.make(["release"])
        #expect(result.status == 0, "\(result)")
        #expect(Set(rig.lines(of: "dpkg-query")) == Self.buildPackages)
        #expect(rig.lines(of: "installers") == [], "make release tried to install something")
    }

    @Test func makeDemoAddsNginxAndNothingFromTheTestRig() throws {
        let rig = try Rig()
        // Only the dependency step: the demo itself starts nginx and downloads.
        let result = try rig.make(["deps-demo"])
        #expect(result.status == 0, "\(result)")
        #expect(Set(rig.lines(of: "dpkg-query")) == Self.buildPackages.union(["nginx-light"]))
        #expect(rig.lines(of: "installers") == [])
    }

    @Test func makeInstallAsAUserWithoutRootIntoAPrefixTheyOwnInstallsNothingElse() throws {
        let rig = try Rig()
        let prefix = rig.directory.path("prefix")
        try FileManager.default.createDirectory(atPath: prefix, withIntermediateDirectories: true)
        #expect(chown(prefix, 65534, 65534) == 0)
        let result = try rig.make(["install", "PREFIX=\(prefix)"], asNobody: true)
        #expect(result.status == 0, "\(result)")
        for file in InstallTests.installedFiles {
            var status = stat()
            #expect(stat("\(prefix)/\(file.path)", &status) == 0, "\(file.path) not installed")
            #expect(status.st_uid == 65534, "\(file.path) is not owned by the installing user")
        }
        #expect(Set(rig.lines(of: "dpkg-query")) == Self.buildPackages)
        #expect(rig.lines(of: "installers") == [])
    }
}
