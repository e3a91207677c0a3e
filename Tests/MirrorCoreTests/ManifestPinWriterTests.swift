import Testing
@testable import MirrorCore

/// `mirror lock`'s edit of the manifest text: pins in, everything else byte for byte.
struct ManifestPinWriterTests {
    static let a = String(repeating: "a", count: 64)
    static let b = String(repeating: "b", count: 64)

    func pinned(_ text: String, _ pins: [String: ManifestPinWriter.Pin]) throws -> String {
        let manifest = try ManifestLoader.parse(text: text, path: "m.yaml", baseDirectory: "/srv", environment: ["T": "x"])
        return try ManifestPinWriter.pin(text: text, manifest: manifest, pins: pins)
    }

    @Test func addsMissingKeysAtTheEndOfEachEntryKeepingComments() throws {
        let text = """
            # assets for the build
            version: 1
            files:
              - url: http://h/a.bin   # the big one
                dest: a.bin
              # the small one
              - url: http://h/b.bin

            """
        let result = try pinned(text, ["a.bin": .init(sha256: Self.a, size: 10), "b.bin": .init(sha256: Self.b, size: 20)])
        #expect(result == """
            # assets for the build
            version: 1
            files:
              - url: http://h/a.bin   # the big one
                dest: a.bin
                sha256: \(Self.a)
                size: 10
              # the small one
              - url: http://h/b.bin
                sha256: \(Self.b)
                size: 20

            """)
    }

    @Test func replacesExistingValuesWhereTheyStand() throws {
        let text = """
            version: 1
            files:
              - size: 5        # old
                url: http://h/a.bin
                sha256: "\(Self.b)"
                retries: 2
            """
        let result = try pinned(text, ["a.bin": .init(sha256: Self.a, size: 10)])
        #expect(result == """
            version: 1
            files:
              - size: 10        # old
                url: http://h/a.bin
                sha256: \(Self.a)
                retries: 2
            """)
    }

    @Test func aNestedMappingAtTheEndOfAnEntryStaysItsOwn() throws {
        let text = """
            version: 1
            files:
              - url: http://h/a.bin
                headers:
                  X-Token: "${T}"
              - url: http://h/b.bin
            """
        let result = try pinned(text, ["a.bin": .init(sha256: Self.a, size: 1), "b.bin": .init(sha256: Self.b, size: 2)])
        #expect(result == """
            version: 1
            files:
              - url: http://h/a.bin
                headers:
                  X-Token: "${T}"
                sha256: \(Self.a)
                size: 1
              - url: http://h/b.bin
                sha256: \(Self.b)
                size: 2

            """)
        let reloaded = try ManifestLoader.parse(text: result, path: "m.yaml", baseDirectory: "/srv", environment: ["T": "x"])
        #expect(reloaded.entries.map(\.sha256) == [Self.a, Self.b])
        #expect(reloaded.entries[0].settings.headers.count == 1)
    }

    @Test func repeatedEntriesArePinnedAlike() throws {
        let text = "version: 1\nfiles:\n  - url: http://h/a.bin\n  - url: http://h/a.bin\n"
        let result = try pinned(text, ["a.bin": .init(sha256: Self.a, size: 3)])
        #expect(result.components(separatedBy: "sha256: \(Self.a)").count == 3)
        #expect(try ManifestLoader.parse(text: result, path: "m.yaml", baseDirectory: "/", environment: [:]).entries.count == 1)
    }

    @Test func flowStyleEntriesAreRefusedWithAReason() throws {
        let text = "version: 1\nfiles:\n  - {url: \"http://h/a.bin\"}\n"
        #expect {
            _ = try pinned(text, ["a.bin": .init(sha256: Self.a, size: 3)])
        } throws: { error in
            "\(error)".contains("m.yaml:3:5: files[0]: written in flow style")
        }
    }
}
