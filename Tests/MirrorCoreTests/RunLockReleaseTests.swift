import Foundation
import Glibc
import Testing
@testable import MirrorCore

/// The run lock is free once its holder is gone, even while another descriptor of the same open
/// file description lives on, as it does in a child forked (and not yet exec'd) while a run held
/// the lock: a second run of the same process must not find its own lock held.
struct RunLockReleaseTests {
    @Test func theLockIsFreeOnceReleasedThoughADescriptorOfItLivesOn() async throws {
        let directory = try TemporaryDirectory(prefix: "mirror-runlock")
        var lock: RunLock? = try await RunLock.acquire(root: directory.path)
        let path = try #require(lock?.path)
        let shared = try #require(Self.duplicateDescriptor(of: path))
        defer { close(shared) }
        lock = nil

        let again = try await RunLock.acquire(root: directory.path)
        #expect(again.path == path)
    }

    /// A `dup` of this process's descriptor for `path`: the same open file description.
    private static func duplicateDescriptor(of path: String) -> Int32? {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        for entry in entries {
            guard let fd = Int32(entry),
                  let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(entry)"),
                  target == path
            else { continue }
            return dup(fd)
        }
        return nil
    }
}
