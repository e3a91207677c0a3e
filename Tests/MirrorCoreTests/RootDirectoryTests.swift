import Foundation
import Testing
@testable import MirrorCore

/// Both ways of reaching a directory under the root, openat2 and the walk one component at a
/// time that older kernels get, give the same answers.
struct RootDirectoryTests {
    @Test(arguments: [true, false])
    func bothResolutionsRefuseLinksAndMakeWhatIsMissing(kernelResolution: Bool) throws {
        let directory = try TemporaryDirectory(prefix: "mirror-rootdir")
        let root = RootDirectory(path: directory.path("root"), kernelResolution: kernelResolution)
        #expect(try root.withDirectory("a/b") { _ in true } == nil, "a root that does not exist yet is not created by a look")
        #expect(!FileManager.default.fileExists(atPath: directory.path("root")))

        #expect(try root.withDirectory("a/b", create: true, durable: true) { _ in true } == true)
        #expect(FileManager.default.fileExists(atPath: directory.path("root/a/b")))
        #expect(try root.withDirectory("a/b") { _ in true } == true)
        #expect(try root.withDirectory("") { _ in true } == true)

        try FileManager.default.createSymbolicLink(atPath: directory.path("root/a/link"), withDestinationPath: "b")
        for path in ["a/link", "a/link/c"] {
            #expect(throws: RootDirectory.refusal(directory.path("root/a/link"))) {
                try root.withDirectory(path, create: true) { _ in }
            }
        }
        #expect(!FileManager.default.fileExists(atPath: directory.path("root/a/b/c")))

        try Data("x".utf8).write(to: URL(fileURLWithPath: directory.path("root/file")))
        #expect(try root.withDirectory("file/d") { _ in true } == nil, "a file on the way: nothing there")
        #expect(throws: TransferFailure.localIO(path: directory.path("root/file"), operation: "create directory", errno: ENOTDIR)) {
            try root.withDirectory("file/d", create: true) { _ in }
        }
    }

    @Test func inspectionSeesALinkAtTheFileAndRefusesOneOnTheWay() throws {
        let directory = try TemporaryDirectory(prefix: "mirror-rootdir")
        try directory.write(Data("abc".utf8), to: "root/d/a.bin")
        try FileManager.default.createSymbolicLink(atPath: directory.path("root/d/a.bin.part"), withDestinationPath: "/etc/hostname")
        try FileManager.default.createSymbolicLink(atPath: directory.path("root/up"), withDestinationPath: "d")
        let root = RootDirectory(path: directory.path("root"))

        let facts = try root.inspect(DestinationPaths(root: root.path, dest: "d/a.bin"))
        #expect(facts.destination == .file(size: 3))
        #expect(facts.partial == .other(kind: "a symbolic link"))
        #expect(throws: RootDirectory.refusal(directory.path("root/up"))) {
            try root.inspect(DestinationPaths(root: root.path, dest: "up/a.bin"))
        }
        #expect(try root.inspect(DestinationPaths(root: root.path, dest: "none/a.bin")).isEmpty)
    }

    /// An empty partial file goes by its name; one with bytes, a symbolic link at its name
    /// (empty or not, and what it points at) and a directory on the way that does not exist
    /// are left as they are.
    @Test func anEmptyPartialFileIsRemovedByNameAndNothingElse() throws {
        let directory = try TemporaryDirectory(prefix: "mirror-rootdir")
        try directory.write(Data(), to: "root/d/empty.bin.part")
        try directory.write(Data("abc".utf8), to: "root/d/full.bin.part")
        try directory.write(Data(), to: "target")
        try FileManager.default.createSymbolicLink(atPath: directory.path("root/d/link.bin.part"), withDestinationPath: directory.path("target"))
        let root = RootDirectory(path: directory.path("root"))
        for dest in ["d/empty.bin", "d/full.bin", "d/link.bin", "none/a.bin"] {
            root.removePartialIfEmpty(DestinationPaths(root: root.path, dest: dest))
        }
        #expect(directory.files("root") == ["d", "d/full.bin.part", "d/link.bin.part"])
        #expect(FileManager.default.fileExists(atPath: directory.path("target")))
    }
}
