import Foundation
import Testing
@testable import MirrorCore

struct FileSystemTests {
    private func isDirectory(_ path: String) -> Bool {
        var directory: ObjCBool = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &directory) && directory.boolValue
    }

    @Test func makesEveryMissingParent() throws {
        let temporary = try TemporaryDirectory()
        try FileSystem.makeDirectories(temporary.path("a/b/c"))
        #expect(isDirectory(temporary.path("a/b/c")))
        // Again, and with a trailing slash: nothing to do, no error.
        try FileSystem.makeDirectories(temporary.path("a/b/c"))
        try FileSystem.makeDirectories(temporary.path("a/b/d/"))
        #expect(isDirectory(temporary.path("a/b/d")))
    }

    @Test func durableCreationMakesTheSameTree() throws {
        let temporary = try TemporaryDirectory()
        try FileSystem.makeDirectories(temporary.path("x/y/z"), durable: true)
        #expect(isDirectory(temporary.path("x/y/z")))
        try FileSystem.makeDirectories(temporary.path("x/y/z"), durable: true)
    }

    @Test func aFileInTheWayIsAnErrorNamingThePath() throws {
        let temporary = try TemporaryDirectory()
        try temporary.write(Data("x".utf8), to: "a")
        #expect {
            try FileSystem.makeDirectories(temporary.path("a/b/c"))
        } throws: { error in
            guard case TransferFailure.localIO(let path, "create directory", ENOTDIR) = error else { return false }
            return path.hasPrefix(temporary.path("a/b"))
        }
    }
}
