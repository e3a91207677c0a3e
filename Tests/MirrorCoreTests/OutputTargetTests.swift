import Foundation
import Glibc
import Testing
@testable import MirrorCore

/// How an output (`--report`, `--metrics-file`, `--failed-manifest`, the manifest `lock`
/// pins) is written, decided from what is at its path: the table of `OutputTarget`.
struct OutputTargetTests {
    typealias Facts = OutputTarget.Facts
    static let existing = OutputTarget.Existing(mode: 0o640, owner: 7, group: 8)
    static let foreignLink = "is a symbolic link owned by uid 65534, not by the user running mirror (uid 0) or root; "
        + "it is not followed: remove it, or give another path"

    @Test(arguments: [
        // (facts, for any output, for the manifest)
        (Facts(kind: .missing), OutputTarget.replace("out", existing: nil), OutputTarget.replace("out", existing: nil)),
        (Facts(kind: .regular, existing: existing), .replace("out", existing: existing), .replace("out", existing: existing)),
        // A link to a file: the file it names is replaced, the link kept.
        (Facts(isLink: true, kind: .regular, resolved: "/data/out", existing: existing),
         .replace("/data/out", existing: existing), .replace("/data/out", existing: existing)),
        (Facts(isLink: true, kind: .missing), .refused("is a symbolic link to nothing; create the file it names, or give that name"),
         .refused("is a symbolic link to nothing; create the file it names, or give that name")),
        (Facts(isDash: true, kind: .missing), .standardStream(1), .refused("is standard output, not a file")),
        // /dev/stdout, /proc/self/fd/2, or the file stdout was redirected to.
        (Facts(isLink: true, kind: .fifo, resolved: "/proc/1/fd/pipe:[9]", standardStream: 1), .standardStream(1),
         .refused("is a FIFO, not a regular file")),
        (Facts(isLink: true, kind: .characterDevice, standardStream: 2), .standardStream(2),
         .refused("is a character device, not a regular file")),
        (Facts(kind: .regular, standardStream: 1, existing: existing), .standardStream(1), .replace("out", existing: existing)),
        (Facts(kind: .characterDevice), .stream("out"), .refused("is a character device, not a regular file")),
        (Facts(kind: .fifo), .stream("out"), .refused("is a FIFO, not a regular file")),
        (Facts(isLink: true, kind: .fifo, resolved: "/run/f"), .stream("out"), .refused("is a FIFO, not a regular file")),
        (Facts(kind: .directory), .refused("is a directory"), .refused("is a directory")),
        // A link is followed only when it is the running user's or root's: another user's link
        // is refused whatever it leads to, a standard stream included.
        (Facts(isLink: true, linkOwner: 65534, user: 0, kind: .regular, resolved: "/etc/passwd", existing: existing),
         .refused(foreignLink), .refused(foreignLink)),
        (Facts(isLink: true, linkOwner: 65534, user: 0, kind: .characterDevice, standardStream: 1),
         .refused(foreignLink), .refused(foreignLink)),
        (Facts(isLink: true, linkOwner: 65534, user: 0, kind: .missing), .refused(foreignLink), .refused(foreignLink)),
        (Facts(isLink: true, linkOwner: 0, user: 1000, kind: .characterDevice, standardStream: 1), .standardStream(1),
         .refused("is a character device, not a regular file")),
        (Facts(isLink: true, linkOwner: 1000, user: 1000, kind: .regular, resolved: "/data/out", existing: existing),
         .replace("/data/out", existing: existing), .replace("/data/out", existing: existing)),
        (Facts(kind: .blockDevice),
         .refused("is a block device; an output is written only to a regular file, a character device or a FIFO"),
         .refused("is a block device; an output is written only to a regular file, a character device or a FIFO")),
        (Facts(kind: .socket),
         .refused("is a socket; an output is written only to a regular file, a character device or a FIFO"),
         .refused("is a socket; an output is written only to a regular file, a character device or a FIFO")),
    ] as [(Facts, OutputTarget, OutputTarget)])
    func eachKindOfPathIsWrittenOneWay(facts: Facts, any: OutputTarget, regularFile: OutputTarget) {
        #expect(OutputTarget(path: "out", facts, accepts: .any) == any)
        #expect(OutputTarget(path: "out", facts, accepts: .regularFile) == regularFile)
    }

    /// The facts are read from the path as it is: a FIFO is seen as one without being opened,
    /// and a link to standard output as that stream.
    @Test func factsAreReadWithoutOpeningThePath() throws {
        let directory = try TemporaryDirectory(prefix: "mirror-output")
        #expect(mkfifo(directory.path("fifo"), 0o600) == 0)
        try directory.write(Data("x".utf8), to: "file")
        #expect(symlink(directory.path("file"), directory.path("link")) == 0)
        #expect(symlink(directory.path("absent"), directory.path("dangling")) == 0)
        #expect(symlink("/proc/self/fd/1", directory.path("stdout")) == 0)

        #expect(OutputFile(path: directory.path("fifo")).target == .stream(directory.path("fifo")))
        #expect(OutputFile(path: directory.path("fifo")).currentContents(limit: 100) == nil, "a FIFO is never read")
        guard case .replace(directory.path("file"), let existing?) = OutputFile(path: directory.path("link")).target else {
            Issue.record("a link to a file replaces the file: \(OutputFile(path: directory.path("link")).target)")
            return
        }
        #expect(existing.owner == geteuid())
        #expect(OutputFile(path: directory.path("link")).currentContents(limit: 100) == Array("x".utf8))
        #expect(OutputFile(path: directory.path("dangling")).target == .refused("is a symbolic link to nothing; create the file it names, or give that name"))
        #expect(OutputFile(path: directory.path("new")).target == .replace(directory.path("new"), existing: nil))
        #expect(OutputFile(path: directory.path("new")).currentContents(limit: 100) == nil)
        #expect(OutputFile(path: directory.path("stdout")).target == .standardStream(1))
        #expect(OutputFile(path: directory.path("")).target == .refused("is a directory"))
    }

    /// A replaced file keeps its permissions, and no temporary file is left beside it.
    @Test func aReplacedFileKeepsItsModeAndLeavesNoTemporaryFile() throws {
        let directory = try TemporaryDirectory(prefix: "mirror-output")
        let path = try directory.write(Data("old".utf8), to: "out")
        #expect(chmod(path, 0o604) == 0)
        try OutputFile(path: path).write("new")
        #expect(directory.contents(of: "out") == Data("new".utf8))
        var info = stat()
        #expect(stat(path, &info) == 0 && info.st_mode & 0o7777 == 0o604)
        #expect(directory.listing() == ["out"])
    }

    /// In a shared directory another user may plant `report.json -> /etc/passwd`: the link is
    /// refused and its target left alone; the same link made by the running user is followed.
    @Test func anotherUsersLinkAtAnOutputIsNotFollowed() throws {
        guard geteuid() == 0 else { return }
        let directory = try TemporaryDirectory(prefix: "mirror-output")
        #expect(chmod(directory.path(""), 0o1777) == 0)
        let victim = try directory.write(Data("secret".utf8), to: "victim")
        #expect(symlink(victim, directory.path("report.json")) == 0)
        #expect(lchown(directory.path("report.json"), 65534, 65534) == 0)
        #expect(throws: OutputFileError.self) { try OutputFile(path: directory.path("report.json")).write("{}") }
        #expect(OutputFile(path: directory.path("report.json")).target
            == .refused("is a symbolic link owned by uid 65534, not by the user running mirror (uid 0) or root; it is not followed: remove it, or give another path"))
        #expect(directory.contents(of: "victim") == Data("secret".utf8))
        #expect(symlink(victim, directory.path("own.json")) == 0)
        try OutputFile(path: directory.path("own.json")).write("{}")
        #expect(directory.contents(of: "victim") == Data("{}".utf8))
    }

    /// A file another user made at an output's name is replaced by one the running user owns,
    /// with the old permissions; the manifest `lock` rewrites keeps its owner and group.
    @Test func aReplacedOutputIsOwnedByTheRunningUser() throws {
        guard geteuid() == 0 else { return }
        let directory = try TemporaryDirectory(prefix: "mirror-output")
        for name in ["report.json", "manifest.yaml"] {
            let path = try directory.write(Data("old".utf8), to: name)
            #expect(chown(path, 65534, 65534) == 0)
            #expect(chmod(path, 0o640) == 0)
        }
        try OutputFile(path: directory.path("report.json")).write("new")
        try OutputFile(path: directory.path("manifest.yaml"), accepts: .regularFile).write("new")
        var info = stat()
        #expect(stat(directory.path("report.json"), &info) == 0)
        #expect(info.st_uid == 0 && info.st_gid == getegid() && info.st_mode & 0o7777 == 0o640)
        #expect(stat(directory.path("manifest.yaml"), &info) == 0)
        #expect(info.st_uid == 65534 && info.st_gid == 65534 && info.st_mode & 0o7777 == 0o640)
    }
}
