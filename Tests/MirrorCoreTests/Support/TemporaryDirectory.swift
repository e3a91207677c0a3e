import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A fresh, private (mode 0700) directory under /tmp made by `mkdtemp`. It and everything in it
/// are removed by `remove()` or, at the latest, when the value is released.
final class TemporaryDirectory: Sendable {
    /// Absolute path of the directory, without a trailing slash.
    let path: String
    private let removed = Mutex(false)

    init(prefix: String = "mirror-test") throws {
        var template = Array("/tmp/\(prefix).XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw SystemCallError("mkdtemp under /tmp")
        }
        path = String(cString: made)
    }

    deinit { remove() }

    var url: URL { URL(fileURLWithPath: path, isDirectory: true) }

    /// The absolute path of `relativePath` inside this directory.
    func path(_ relativePath: String) -> String {
        relativePath.isEmpty ? path : path + "/" + relativePath
    }

    /// Writes `data` at `relativePath`, creating intermediate directories; returns the absolute path.
    @discardableResult
    func write(_ data: Data, to relativePath: String) throws -> String {
        let target = URL(fileURLWithPath: path(relativePath))
        try FileManager.default.createDirectory(at: target.deletingLastPathComponent(),
                                                withIntermediateDirectories: true)
        try data.write(to: target)
        return target.path
    }

    /// The contents of `relativePath`, or nil when there is no such file.
    func contents(of relativePath: String) -> Data? {
        FileManager.default.contents(atPath: path(relativePath))
    }

    /// Names of the entries at `relativePath` (this directory by default), sorted, recursively,
    /// as paths relative to that directory: what a test compares against to prove "no extra files".
    func listing(_ relativePath: String = "") -> [String] {
        let base = path(relativePath)
        guard let enumerator = FileManager.default.enumerator(atPath: base) else { return [] }
        return enumerator.compactMap { $0 as? String }.sorted()
    }

    /// What `listing` shows, less mirror's own `.mirror/` folder: the files a user sees.
    func files(_ relativePath: String) -> [String] {
        listing(relativePath).filter { $0 != ".mirror" && !$0.hasPrefix(".mirror/") }
    }

    /// Deletes the directory tree now; later calls do nothing.
    func remove() {
        let alreadyRemoved = removed.withLock { removed in
            defer { removed = true }
            return removed
        }
        guard !alreadyRemoved else { return }
        try? FileManager.default.removeItem(atPath: path)
    }
}
