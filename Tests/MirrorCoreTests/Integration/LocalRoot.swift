import Foundation
import Testing
@testable import MirrorCore

/// A local root and manifests over it, for sync tests against a server other than nginx
/// (see `SyncFixture` for nginx): destinations live under `root/`.
final class LocalRoot: Sendable {
    let directory: TemporaryDirectory

    init() throws {
        // libcurl reads proxy settings from the environment; loopback must stay direct.
        setenv("no_proxy", "*", 1)
        directory = try TemporaryDirectory(prefix: "mirror-root")
        try FileManager.default.createDirectory(atPath: directory.path("root"), withIntermediateDirectories: true)
    }

    var root: String { directory.path("root") }

    func local(_ dest: String) -> Data? { directory.contents(of: "root/" + dest) }

    func putLocal(_ data: Data, at dest: String) throws {
        try directory.write(data, to: "root/" + dest)
    }

    /// A manifest with one entry: `url`, `dest`, then `lines` (each indented by four spaces).
    func manifest(url: String, dest: String, lines: [String] = []) throws -> Manifest {
        var text = "version: 1\nroot: root\nfiles:\n  - url: \(url)\n    dest: \(dest)\n    retries: 1\n"
        for line in lines { text += "    \(line)\n" }
        return try ManifestLoader.parse(text: text, path: "test.yaml", baseDirectory: directory.path, environment: [:])
    }

    func sync(_ manifest: Manifest) async throws -> [EntryReport] {
        try await ManifestRunner(manifest: manifest, options: RunOptions(
            concurrency: 1, retryPolicy: RetryPolicy(base: .milliseconds(10), cap: .milliseconds(50))
        )).sync()
    }

    /// What the state store holds for `dest`.
    func record(_ dest: String) throws -> StateRecord? {
        try StateStore.open(root: root, mode: .readOnly).store?.record(for: dest)
    }

    /// Writes `record` into the state store, as an earlier run would have.
    func save(_ record: StateRecord) throws {
        let store = try #require(StateStore.open(root: root, mode: .readWrite).store)
        try store.save(record)
        store.close()
    }
}

/// What a HEAD with curl says of `url`: its ETag and Last-Modified.
func headValidators(_ url: String) throws -> (etag: String?, lastModified: String?) {
    let result = try CurlCommand.run(["-sI", url])
    var etag: String?, lastModified: String?
    for line in result.output.split(separator: "\r\n") {
        guard let colon = line.firstIndex(of: ":") else { continue }
        let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        switch line[..<colon].lowercased() {
        case "etag": etag = value
        case "last-modified": lastModified = value
        default: break
        }
    }
    return (etag, lastModified)
}
