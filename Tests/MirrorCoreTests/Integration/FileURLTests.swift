import Foundation
import Testing
@testable import MirrorCore

/// `file://` sources (with `allow_file: true`) go through the same planning and transfer rules.
struct FileURLTests {
    @Test func aFileSourceDownloadsSkipsAndResumes() async throws {
        let directory = try TemporaryDirectory(prefix: "mirror-file")
        let data = randomData(count: 300_000, seed: 95)
        let source = try directory.write(data, to: "src/a.bin")
        let text = "version: 1\nallow_file: true\nroot: out\nfiles:\n  - url: file://\(source)\n"
        let manifest = try ManifestLoader.parse(text: text, path: "f.yaml", baseDirectory: directory.path, environment: [:])
        let runner = { ManifestRunner(manifest: manifest, options: RunOptions(concurrency: 1)) }

        #expect(try await runner().sync().map(\.outcome) == [.transferred])
        #expect(try await runner().sync().map(\.outcome) == [.skipped])
        try data.prefix(100_000).write(to: URL(fileURLWithPath: directory.path("out/a.bin")))
        let plan = await runner().plan()
        #expect(plan[0].action == .resume(from: 100_000, source: .destination))
        let resumed = try await runner().sync()
        #expect(resumed[0].outcome == .transferred && resumed[0].bytesTransferred == 200_000)
        #expect(directory.contents(of: "out/a.bin")?.fingerprint == data.fingerprint)
    }

    @Test func aFileSourceIsRefusedWithoutAllowFile() {
        #expect(throws: ManifestError.self) {
            _ = try ManifestLoader.parse(text: "version: 1\nfiles:\n  - url: file:///etc/hostname\n", path: "f.yaml",
                                         baseDirectory: "/", environment: [:])
        }
    }
}
