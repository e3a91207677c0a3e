import Foundation
@testable import MirrorCore

/// A served folder, a local root and a manifest over them: the common setup of the
/// integration tests. nginx serves `site/`; destinations live under `root/`.
final class SyncFixture: Sendable {
    let directory: TemporaryDirectory
    let nginx: NginxServer

    init(files: [String: Data], nginx options: NginxOptions = .init()) throws {
        // libcurl reads proxy settings from the environment; loopback must stay direct.
        setenv("no_proxy", "*", 1)
        directory = try TemporaryDirectory(prefix: "mirror-sync")
        for (path, data) in files {
            try directory.write(data, to: "site/" + path)
        }
        try FileManager.default.createDirectory(atPath: directory.path("root"), withIntermediateDirectories: true)
        nginx = try NginxServer.start(serving: directory.path("site"), options: options)
    }

    var root: String { directory.path("root") }

    func rootPath(_ relative: String) -> String { directory.path("root/" + relative) }

    func served(_ path: String) -> Data { directory.contents(of: "site/" + path)! }

    func local(_ dest: String) -> Data? { directory.contents(of: "root/" + dest) }

    func putLocal(_ data: Data, at dest: String) throws {
        try directory.write(data, to: "root/" + dest)
    }

    /// Puts a copy of the served file `path` at `dest`, dated as the server dates it (as mirror,
    /// `wget -N` or `curl -R` leave a download): with no record, that date is what makes it a
    /// known version.
    func putLocalCopy(of path: String, at dest: String) throws {
        try putLocal(served(path), at: dest)
        let date = try FileManager.default.attributesOfItem(atPath: directory.path("site/" + path))[.modificationDate]
        try FileManager.default.setAttributes([.modificationDate: date as Any], ofItemAtPath: rootPath(dest))
    }

    /// A manifest text with one entry per (url path, dest, extra lines).
    func manifest(_ entries: [(path: String, dest: String)], extra: String = "") -> String {
        var text = "version: 1\nroot: root\n\(extra)files:\n"
        for entry in entries {
            text += "  - url: \(nginx.url(entry.path))\n    dest: \(entry.dest)\n"
        }
        return text
    }

    func load(_ text: String) throws -> Manifest {
        try ManifestLoader.parse(text: text, path: "test.yaml", baseDirectory: directory.path, environment: [:])
    }

    func runner(_ manifest: Manifest, concurrency: Int? = nil, progress: SyncProgress? = nil) -> ManifestRunner {
        ManifestRunner(manifest: manifest, options: RunOptions(
            concurrency: concurrency ?? manifest.concurrency,
            retryPolicy: RetryPolicy(base: .milliseconds(10), cap: .milliseconds(50)),
            progress: progress
        ))
    }

    /// nginx's log once it has stopped growing: it writes a line just after each response, so
    /// the last line can trail the client's return by a moment.
    func settledRequests() throws -> [LoggedRequest] {
        var last = try nginx.requests()
        let deadline = ContinuousClock.now + .seconds(2)
        while ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.05)
            let now = try nginx.requests()
            if now.count == last.count { return now }
            last = now
        }
        return last
    }

    /// Every file and directory under root, with sizes, to prove that nothing changed.
    func rootSnapshot() -> [String] {
        directory.files("root").map { relative in
            let path = rootPath(relative)
            let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? -1
            return "\(relative) \(size)"
        }
    }
}
