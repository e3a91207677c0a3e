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
        let result = try pinned(text, ["a.bin": .init(digest: Self.a, size: 10), "b.bin": .init(digest: Self.b, size: 20)])
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
        let result = try pinned(text, ["a.bin": .init(digest: Self.a, size: 10)])
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
        let result = try pinned(text, ["a.bin": .init(digest: Self.a, size: 1), "b.bin": .init(digest: Self.b, size: 2)])
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
        #expect(reloaded.entries.map(\.digest) == [Self.a, Self.b])
        #expect(reloaded.entries[0].settings.headers.count == 1)
    }

    @Test func repeatedEntriesArePinnedAlike() throws {
        let text = "version: 1\nfiles:\n  - url: http://h/a.bin\n  - url: http://h/a.bin\n"
        let result = try pinned(text, ["a.bin": .init(digest: Self.a, size: 3)])
        #expect(result.components(separatedBy: "sha256: \(Self.a)").count == 3)
        #expect(try ManifestLoader.parse(text: result, path: "m.yaml", baseDirectory: "/", environment: [:]).entries.count == 1)
    }

    @Test func flowStyleEntriesAreRefusedWithAReason() throws {
        let text = "version: 1\nfiles:\n  - {url: \"http://h/a.bin\"}\n"
        #expect {
            _ = try pinned(text, ["a.bin": .init(digest: Self.a, size: 3)])
        } throws: { error in
            "\(error)".contains("m.yaml:3:5: files[0]: written in flow style")
        }
    }

    func load(_ text: String) throws -> Manifest {
        try ManifestLoader.parse(text: text, path: "m.yaml", baseDirectory: "/srv", environment: [:])
    }

    /// The pinned text as `mirror lock` would write it: edited, loaded again and compared.
    func checkedPinned(_ text: String, _ pins: [String: ManifestPinWriter.Pin]) throws -> String {
        let bytes = try ManifestPinWriter.checkedPinnedText(Array(text.utf8), manifest: try load(text), pins: pins, environment: [:])
        return String(decoding: bytes, as: UTF8.self)
    }

    /// libyaml ends a line at NEL, LS, PS and a lone CR as well as at LF. A comment holding one
    /// moved every later edit a line down: lock wrote a sha256 into an entry's url.
    @Test(arguments: ["\u{2028}", "\u{2029}", "\u{85}", "\r"])
    func aLineBreakInsideACommentMovesNoPin(_ lineBreak: String) throws {
        let text = """
            version: 1
            files:
              # first\(lineBreak)# second
              - url: http://h/a.bin  # note\(lineBreak) # more
                dest: a.bin  # end\(lineBreak) # of a.bin
              - url: http://h/b.bin
                size: 1

            """
        let result = try checkedPinned(text, ["a.bin": .init(digest: Self.a, size: 10), "b.bin": .init(digest: Self.b, size: 20)])
        // New lines go after the break every editor sees; a lone CR is one, so they end in CR.
        let aPins = lineBreak == "\r"
            ? "    dest: a.bin  # end\r    sha256: \(Self.a)\r    size: 10\r # of a.bin\n"
            : "    dest: a.bin  # end\(lineBreak) # of a.bin\n    sha256: \(Self.a)\n    size: 10\n"
        #expect(result == """
            version: 1
            files:
              # first\(lineBreak)# second
              - url: http://h/a.bin  # note\(lineBreak) # more

            """ + aPins + """
              - url: http://h/b.bin
                size: 20
                sha256: \(Self.b)

            """)
        let reloaded = try load(result)
        #expect(reloaded.entries.map(\.url.string) == ["http://h/a.bin", "http://h/b.bin"])
        #expect(reloaded.entries.map(\.digest) == [Self.a, Self.b])
    }

    /// CRLF manifests were refused after everything was downloaded; the new lines now take the
    /// file's own line ending, also in a file whose last line has none.
    @Test func aCRLFManifestKeepsItsLineEndings() throws {
        let text = "# assets\r\nversion: 1\r\nfiles:\r\n  - url: http://h/a.bin\r\n    sha256: \"\(Self.b)\"\r\n"
            + "  - url: http://h/b.bin   # last\r\n\r\n  - url: http://h/c.bin"
        let result = try checkedPinned(text, [
            "a.bin": .init(digest: Self.a, size: 1), "b.bin": .init(digest: Self.b, size: 2), "c.bin": .init(digest: Self.a, size: 3),
        ])
        let expected = "# assets\r\nversion: 1\r\nfiles:\r\n  - url: http://h/a.bin\r\n    sha256: \(Self.a)\r\n    size: 1\r\n"
            + "  - url: http://h/b.bin   # last\r\n    sha256: \(Self.b)\r\n    size: 2\r\n\r\n"
            + "  - url: http://h/c.bin\r\n    sha256: \(Self.a)\r\n    size: 3\r\n"
        #expect(result == expected)
        // libyaml counts from after a byte order mark; the edits land in the same places.
        let withMark = try checkedPinned("\u{FEFF}" + text, [
            "a.bin": .init(digest: Self.a, size: 1), "b.bin": .init(digest: Self.b, size: 2), "c.bin": .init(digest: Self.a, size: 3),
        ])
        #expect(withMark == "\u{FEFF}" + expected)
    }

    /// An aliased entry was refused only after every download, at a line of the edited text.
    @Test func anAliasedEntryIsRefusedAtTheAlias() throws {
        let text = "version: 1\nfiles:\n  - &a\n    url: http://h/a.bin\n  - url: http://h/b.bin\n  - *a\n"
        #expect {
            _ = try checkedPinned(text, ["a.bin": .init(digest: Self.a, size: 1), "b.bin": .init(digest: Self.b, size: 2)])
        } throws: { error in
            "\(error)" == "m.yaml:6:5: files[2]: this entry is the alias `*a` of the entry at line 3; mirror lock can only "
                + "pin entries written out in full: write it out, or remove it if it only repeats that entry"
        }
    }

    @Test func anAliasedValueIsReplacedAndAnAnchoredOneRefused() throws {
        let text = "version: 1\nfiles:\n  - url: http://h/a.bin\n    retries: &n 5\n    size: *n\n"
        #expect(try checkedPinned(text, ["a.bin": .init(digest: Self.a, size: 9)])
            == "version: 1\nfiles:\n  - url: http://h/a.bin\n    retries: &n 5\n    size: 9\n    sha256: \(Self.a)\n")
        let anchored = "version: 1\nfiles:\n  - url: http://h/a.bin\n    size: &n 5\n    retries: *n\n"
        #expect {
            _ = try checkedPinned(anchored, ["a.bin": .init(digest: Self.a, size: 9)])
        } throws: { error in
            "\(error)".hasPrefix("m.yaml:4:11: files[0].size: the value carries an anchor")
        }
    }

    /// The last guard before writing: the pinned text must load as the old manifest plus the
    /// pins, entry by entry and in every setting, or nothing is written.
    @Test func aPinnedTextThatWouldReadDifferentlyIsRefused() throws {
        let text = "version: 1\nfiles:\n  - url: http://h/a.bin\n  - url: http://h/b.bin\n    retries: 2\n"
        let pins: [String: ManifestPinWriter.Pin] = ["a.bin": .init(digest: Self.a, size: 1), "b.bin": .init(digest: Self.b, size: 2)]
        let manifest = try load(text)
        let pinnedManifest = try load(try pinned(text, pins))
        try PinnedManifestCheck.check(pinnedManifest, against: manifest, pins: pins)

        let changes = [
            (text.replacing("retries: 2", with: "retries: 3"), "m.yaml:4:5: mirror lock cannot pin this manifest safely: with the pins written, the entry for `b.bin` (its settings) would read differently"),
            (text.replacing("http://h/a.bin", with: "http://h/c.bin"), "m.yaml:3:5: mirror lock cannot pin this manifest safely: with the pins written, the entry for `a.bin` (its url, dest, sha256, size) would read differently"),
            (text.replacing("version: 1\n", with: "version: 1\nconcurrency: 2\n"), "mirror lock cannot pin this manifest safely: with the pins written, m.yaml's top-level settings would read differently"),
            ("version: 1\nfiles:\n  - url: http://h/a.bin\n", "m.yaml's list of entries (2 before, 1 after)"),
        ]
        for (changedText, message) in changes {
            let changed = try load(try pinned(changedText, pins))
            #expect {
                try PinnedManifestCheck.check(changed, against: manifest, pins: pins)
            } throws: { error in
                "\(error)".contains(message)
            }
        }
        #expect {
            try PinnedManifestCheck.check(pinnedManifest, against: manifest, pins: ["a.bin": pins["a.bin"]!, "b.bin": .init(digest: Self.a, size: 2)])
        } throws: { error in
            "\(error)".contains("the entry for `b.bin` (its sha256)")
        }
    }

    /// Many generated manifests (comments holding NEL, LS, PS and lone CRs; CR LF, LF, CR and
    /// mixed line endings; block, flow and aliased entries; pins already there): lock's text
    /// either loads as the old manifest plus the pins and differs from the old text only in
    /// `sha256:`/`size:` lines, with line endings kept, or lock refuses, and only an entry it
    /// cannot edit makes it refuse.
    @Test func pinnedTextsReloadAsTheOldManifestPlusThePinsOrAreRefused() throws {
        var generator = SeededGenerator(seed: 0x10C4)
        var loaded = 0
        var pinnedCount = 0
        for _ in 0..<1_500 {
            let sample = GeneratedManifest(using: &generator)
            // Only repeats that pin something else fail to load.
            guard let manifest = try? load(sample.text) else { continue }
            loaded += 1
            var pins: [String: ManifestPinWriter.Pin] = [:]
            for entry in manifest.entries {
                pins[entry.dest] = .init(digest: sample.hex(&generator), size: Int64.random(in: 0...1 << 40, using: &generator))
            }
            let result: String
            do {
                result = try checkedPinned(sample.text, pins)
            } catch {
                #expect(sample.hasUneditableEntry, "refused: \(error)\n\(sample.text.debugDescription)")
                continue
            }
            pinnedCount += 1
            #expect(!sample.hasUneditableEntry, "pinned an entry it cannot edit:\n\(sample.text.debugDescription)")
            let reloaded = try load(result)
            #expect(reloaded.entries.count == manifest.entries.count)
            for (before, after) in zip(manifest.entries, reloaded.entries) {
                #expect(before.url == after.url && before.mirrors == after.mirrors && before.dest == after.dest)
                #expect(before.settings == after.settings)
                #expect(after.digest == pins[before.dest]?.digest && after.size == pins[before.dest]?.size)
            }
            #expect(Self.withoutPinLines(result) == Self.withoutPinLines(sample.text)
                    || Self.withoutPinLines(result) == Self.withoutPinLines(sample.text) + Self.lastLineBreak(in: result),
                    "\(sample.text.debugDescription)\n->\n\(result.debugDescription)")
            switch sample.lineEndings {
            case .lf: #expect(!result.unicodeScalars.contains("\r"))
            case .cr: #expect(!result.unicodeScalars.contains("\n"))
            case .crlf:
                let bytes = Array(result.utf8)
                #expect(bytes.indices.allSatisfy { index in
                    bytes[index] == UInt8(ascii: "\r") ? index + 1 < bytes.count && bytes[index + 1] == UInt8(ascii: "\n")
                        : bytes[index] != UInt8(ascii: "\n") || (index > 0 && bytes[index - 1] == UInt8(ascii: "\r"))
                }, "\(result.debugDescription)")
            case .mixed: break
            }
        }
        #expect(loaded > 1_350 && pinnedCount > 1_100, "\(loaded) samples loaded, \(pinnedCount) pinned")
    }

    /// The text's lines, as libyaml breaks them, without those that hold only a `sha256:` or
    /// `size:` key and its value (after `- ` for an entry's first key); each line keeps its own
    /// line break.
    static func withoutPinLines(_ text: String) -> String {
        var kept = String.UnicodeScalarView()
        var line = String.UnicodeScalarView()
        var scalars = text.unicodeScalars[...]
        while let scalar = scalars.popFirst() {
            line.append(scalar)
            let isBreak = ["\n", "\u{85}", "\u{2028}", "\u{2029}"].contains(scalar)
                || (scalar == "\r" && scalars.first != "\n")
            guard isBreak || scalars.isEmpty else { continue }
            var content = String(line).trimmingPrefix(while: { $0 == " " })
            if content.hasPrefix("- ") { content = content.dropFirst(2) }
            if !(content.hasPrefix("sha256: ") || content.hasPrefix("size: ")) { kept.append(contentsOf: line) }
            line = String.UnicodeScalarView()
        }
        return String(kept)
    }

    static func lastLineBreak(in text: String) -> String {
        text.hasSuffix("\r\n") ? "\r\n" : String(text.unicodeScalars.last.map(Character.init) ?? "\n")
    }
}
