import Foundation
import Testing
@testable import MirrorCore

/// examples/manifest.yaml documents every key; it must stay a valid manifest.
struct ExampleManifestTests {
    @Test func theExampleManifestLoads() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("examples/manifest.yaml").path
        let manifest = try ManifestLoader.load(
            path: path, environment: ["ASSET_TOKEN": "example-token", "MIRROR_HOST": "mirror.example.net"])
        #expect(!manifest.entries.isEmpty)
        #expect(manifest.entries.contains { !$0.mirrors.isEmpty })
        #expect(!manifest.rewrites.isEmpty && manifest.entries.contains { $0.isRewritten })
        #expect(manifest.entries.contains { $0.digest != nil })
        #expect(manifest.entries.contains { $0.digestAlgorithm == .sha512 })
        #expect(manifest.entries.contains { $0.settings.checksums != nil && $0.checksumName != nil })
        #expect(manifest.entries.allSatisfy { !$0.url.display.contains("example-token") })
    }
}
