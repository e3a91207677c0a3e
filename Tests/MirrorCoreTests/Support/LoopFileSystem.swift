import Foundation
import Glibc

/// A file system of a test's own: an image file made with `mkfs`, loop-mounted (as root, like
/// the FTP and Slurm tests), unmounted at the end of the value, then removed with its directory.
final class LoopFileSystem {
    struct Unavailable: Error, CustomStringConvertible {
        let description: String
    }

    let directory: TemporaryDirectory
    /// Where the file system is mounted.
    let mountPoint: String

    /// An XFS file system with reflinks (`mkfs.xfs -m reflink=1`) of `megabytes`.
    init(xfsOf megabytes: Int = 320) throws {
        guard geteuid() == 0 else {
            throw Unavailable(description: "mounting a test file system needs root; run the tests as root (as make test in CI does)")
        }
        let mkfs = try Self.tool("mkfs.xfs", package: "xfsprogs")
        let mount = try Self.tool("mount", package: "mount")
        directory = try TemporaryDirectory(prefix: "mirror-xfs")
        let image = directory.path("image")
        guard FileManager.default.createFile(atPath: image, contents: nil), truncate(image, off_t(megabytes) << 20) == 0 else {
            throw Unavailable(description: "cannot make the image \(image): errno \(errno)")
        }
        let made = try ExternalCommand.run(mkfs, ["-q", "-m", "reflink=1", image], in: directory.path)
        guard made.status == 0 else { throw Unavailable(description: "\(made)") }
        mountPoint = directory.path("mnt")
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: false)
        let mounted = try ExternalCommand.run(mount, ["-o", "loop", image, mountPoint], in: directory.path)
        guard mounted.status == 0 else {
            throw Unavailable(description: "cannot loop-mount an image (a container without loop devices?): \(mounted)")
        }
    }

    deinit {
        // Lazily, so that a file a failed test left open does not keep the image mounted.
        if let umount = try? Self.tool("umount", package: "mount") {
            _ = try? ExternalCommand.run(umount, ["--lazy", mountPoint], in: directory.path)
        }
    }

    /// The absolute path of `relativePath` on the file system.
    func path(_ relativePath: String) -> String {
        mountPoint + "/" + relativePath
    }

    /// A tool that may live in an `sbin`.
    static func tool(_ name: String, package: String) throws -> String {
        guard let found = ["/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"].map({ $0 + name })
            .first(where: { FileManager.default.isExecutableFile(atPath: $0) })
        else { throw Unavailable(description: "\(name) is not installed; apt-get install -y \(package)") }
        return found
    }

    /// Whether `path`'s extents are shared with another file, as `filefrag -v` (FIEMAP) shows
    /// them: a reflink's are.
    static func sharesExtents(_ path: String) throws -> Bool {
        let filefrag = try tool("filefrag", package: "e2fsprogs")
        // Flushed first: delayed allocation has no extents to show yet.
        let fd = open(path, O_RDONLY)
        if fd >= 0 {
            _ = fsync(fd)
            close(fd)
        }
        let result = try ExternalCommand.run(filefrag, ["-v", path], in: "/")
        guard result.status == 0 else { throw Unavailable(description: "\(result)") }
        return result.stdout.contains("shared")
    }
}
