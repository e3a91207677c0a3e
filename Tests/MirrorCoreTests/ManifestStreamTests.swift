import Foundation
import Testing
@testable import MirrorCore

/// The manifest is decoded as libyaml reads it, entry by entry, never as a tree of the whole
/// document; what it reports, and where, is what decoding the tree reported.
struct ManifestStreamTests {
    private static let environment = ["HOST": "example.org"]

    private static func decoder() -> ManifestDecoder {
        ManifestDecoder(
            file: "m.yaml", environment: environment,
            rootResolution: .init(manifestDirectory: "/srv", override: nil, currentDirectory: "/"))
    }

    private static func loaded(_ text: String) -> Result<Manifest, ManifestError> {
        Result { () throws(ManifestError) in
            try ManifestLoader.parse(text: text, path: "m.yaml", baseDirectory: "/srv", environment: environment, currentDirectory: "/")
        }
    }

    /// The manifest the text's whole `YAMLNode` tree decodes to, as every manifest was loaded
    /// before it was streamed.
    private static func decodedFromTheTree(_ text: String) -> Result<Manifest, ManifestError> {
        Result { () throws(ManifestError) in
            guard let root = try YAMLDocumentParser.parse(Array(text.utf8), file: "m.yaml") else {
                throw ManifestError(ManifestDiagnostic(location: SourceLocation(file: "m.yaml", line: 1, column: 1), key: nil, message: "the manifest is empty"))
            }
            var decoder = decoder()
            let manifest = decoder.decodeManifest(root)
            guard let manifest, decoder.diagnostics.isEmpty else {
                throw ManifestError(diagnostics: decoder.diagnostics.inFileOrder())
            }
            return manifest
        }
    }

    /// `version: 1`, `files:`, then `count` entries of two lines each: entry `i` is
    /// `- url: http://h/fi.bin` on line 3 + 2i and `dest: d/fi.bin` below it, unless `lines`
    /// replaces one of those two lines (key `[i, 0]` or `[i, 1]`).
    private static func longManifest(_ count: Int, replacing lines: [[Int]: String] = [:]) -> String {
        var text = "version: 1\nfiles:\n"
        for index in 0..<count {
            text += (lines[[index, 0]] ?? "  - url: http://h/f\(index).bin") + "\n"
            text += (lines[[index, 1]] ?? "    dest: d/f\(index).bin") + "\n"
        }
        return text
    }

    /// A manifest of many entries was built as one tree of YAML nodes (137–141 MiB for 100,000
    /// entries) before any entry was decoded. Now no node larger than one entry is built.
    @Test func aLongListIsDecodedEntryByEntryWithoutTheDocumentTree() throws {
        let text = Self.longManifest(10_000)
        let document = try #require(try ManifestStream.read(.bytes(Array(text.utf8)), decoder: Self.decoder(), context: nil))
        // An entry: its mapping, two keys, two values.
        #expect(document.largestNodeBuilt == 5)
        #expect(document.files?.count == 10_000)
        guard case .mapping(let pairs) = document.root.content, let files = pairs.last?.value,
              case .sequence(let items) = files.content
        else {
            Issue.record("no files sequence in \(document.root.summary)")
            return
        }
        #expect(items.isEmpty, "the top level kept the entries")
        #expect(files.line == 3 && files.column == 3)

        let manifest = try Self.loaded(text).get()
        #expect(manifest.entries.count == 10_000)
        #expect(manifest.entries.last?.location == SourceLocation(file: "m.yaml", line: 3 + 2 * 9_999, column: 5))
        #expect(manifest.entries.last?.dest == "d/f9999.bin")
    }

    @Test func errorsDeepInALongListKeepTheirPlaceKeyAndSuggestion() {
        let text = Self.longManifest(3_000, replacing: [
            [1, 1]: "    sah256: abc",
            [1_500, 0]: "  - url: gopher://h/f1500.bin",
            [2_000, 1]: "    dest: d/f7.bin",
            [2_500, 1]: "    timeout: 5 minutes",
            [2_600, 1]: "    ftp_tls: requried",
            [2_999, 1]: "    retries: -1",
        ])
        #expect {
            _ = try Self.loaded(text).get()
        } throws: { error in
            let lines = "\(error)".split(separator: "\n")
            let expected = [
                "m.yaml:6:5: files[1].sah256: unknown key `sah256`; did you mean `sha256`?",
                "m.yaml:3003:10: files[1500].url: unsupported scheme `gopher`; mirror downloads http, https, ftp and ftps URLs",
                "m.yaml:4004:11: files[2000].dest: `d/f7.bin` is already the dest of the entry at line 17, which has a different url; give one of them another dest",
                "m.yaml:5004:14: files[2500].timeout: expected a duration like 500ms, 30s, 5m, 1h or 1m30s, found `5 minutes`",
                "m.yaml:5204:14: files[2600].ftp_tls: expected one of `no`, `try`, `required`, found `requried`; did you mean `required`?",
                "m.yaml:6002:14: files[2999].retries: expected an integer from 0 to 100, found -1",
            ]
            #expect(lines.count == expected.count, "\(error)")
            for (line, wanted) in zip(lines, expected) {
                #expect(line.hasPrefix(wanted), "expected \(wanted), got \(line)")
            }
            return lines.count == expected.count && zip(lines, expected).allSatisfy { $0.hasPrefix($1) }
        }
    }

    @Test func yamlProblemsDeepInALongListAreReportedWhereTheyAre() {
        let tagged = Self.longManifest(3_000, replacing: [[2_700, 0]: "  - url: !env URL"])
        #expect(Self.failure(tagged) == "m.yaml:5403:10: YAML tag `!env` is not supported in a manifest; remove it")

        // libyaml takes `dest` on the next line as a second item of the flow sequence.
        let unclosed = Self.longManifest(3_000, replacing: [[2_222, 0]: "  - url: [http://h/x"])
        #expect(Self.failure(unclosed) == """
            m.yaml:4448:9: invalid YAML: did not find expected ',' or ']' (while parsing a flow sequence at line 4447, column 10)
            """)

        let aliased = Self.longManifest(3_000, replacing: [[1_234, 1]: "    dest: *nowhere"])
        #expect(Self.failure(aliased) == "m.yaml:2472:11: invalid YAML: found undefined alias")

        for text in [tagged, unclosed, aliased] {
            guard case .failure(let expected) = Self.decodedFromTheTree(text) else {
                Issue.record("the tree decoded without an error")
                continue
            }
            #expect(Self.failure(text) == expected.description)
        }
    }

    private static func failure(_ text: String) -> String {
        switch loaded(text) {
        case .failure(let error): "\(error)"
        case .success: "loaded without an error"
        }
    }

    /// Manifests whose top-level keys come in every order around `files`, with anchors, aliases
    /// and mistakes: loading them entry by entry gives what decoding their tree gave, manifest or
    /// diagnostics, to the last position and message.
    @Test(arguments: [
        // Keys after files that change what the entries mean: the text is read a second time.
        "version: 1\nfiles:\n  - url: http://h/a\n  - url: http://h/b\n    retries: 2\ndefaults:\n  retries: 1\n  timeout: 1s\n",
        "version: 1\nfiles:\n  - url: http://h/a\n    size: 2048\n  - url: http://h/b\n    timeout: soon\ndefaults:\n  max_size: 1KiB\n",
        "files:\n  - url: file:///srv/a\nallow_file: true\nversion: 1\n",
        "files:\n  - url: file:///srv/a\n  - url: gopher://h/b\nversion: 2\n",
        "version: 1\nfiles:\n  - url: http://h/a\n    max_size: 1KiB\n    size: 2048\ndefaults:\n  max_size: 5MiB\n  timeout: soon\n",
        "version: 1\nfiles:\n  - url: http://h/a\ndefaults: {}\n",
        // Keys before files.
        "version: 1\nallow_file: true\ndefaults:\n  headers: &h {X-A: \"1\"}\nfiles:\n  - url: file:///srv/a\n    headers: *h\n",
        "version: 1\nroot: out\nconcurrency: 65\nfiles:\n  - url: http://h/a\n  - url: http://h/a\n    dest: ./a\n  - url: http://h/b\n    dest: a\n",
        // files itself an alias, anchored, repeated, empty or not a list.
        "version: 1\nlist: &list [{url: http://h/a}]\nfiles: *list\n",
        "version: 1\nfiles: &all\n  - url: http://h/a\ndefaults: *all\nconnectivity:\n  probe: *all\n",
        "version: 1\nfiles:\n  - url: http://h/a\nfiles:\n  - url: http://h/b\n",
        "version: 1\nfiles: []\n",
        "version: 1\nfiles:\n",
        "version: 1\nfiles: http://h/a\n",
        "version: 1\nfiles:\n  url: http://h/a\n",
        // Entries that are aliases, flow mappings, not mappings; a flow top level.
        "version: 1\nfiles:\n  - &e\n    url: http://h/a\n  - *e\n  - {url: http://h/b, sha256: abc}\n  - http://h/c\n  -\n",
        "{version: 1, files: [{url: 'http://${HOST}/a', dest: a}, {url: http://h/b, dest: a/b}]}",
        "version: 1\n? [files]\n: x\nfiles:\n  - url: http://h/a\n",
        "&top\nversion: 1\nfiles:\n  - *top\n",
        // Entries read as plain mappings until an anchor, alias, tag or collection turns up.
        "version: 1\nfiles:\n  - url: http://h/a\n    dest: &d a\n  - url: http://h/b\n    dest: *d\n",
        "version: 1\nfiles:\n  - url: http://h/a\n    size: !!int 5\n  - url: http://h/b\n    size: !custom 5\n",
        "version: 1\nfiles:\n  - url: http://h/a\n    dest: a\n    mirrors: [http://m/a]\n    dest: b\n  - {}\n  - {url: http://h/c, [k]: v}\n  - url: http://h/d\n    url: http://h/e\n",
        "- url: http://h/a\n",
    ])
    func streamingDecodesWhatTheTreeDecoded(_ text: String) {
        let streamed = Self.loaded(text)
        let fromTree = Self.decodedFromTheTree(text)
        switch (streamed, fromTree) {
        case (.success(let manifest), .success(let expected)):
            #expect(manifest == expected)
        case (.failure(let error), .failure(let expected)):
            #expect(error.diagnostics == expected.diagnostics)
        default:
            Issue.record("streamed: \(streamed)\nfrom the tree: \(fromTree)")
        }
    }

    /// A manifest file is read as libyaml needs the text, never held whole; a key after `files`
    /// that changes the entries makes it read the file a second time.
    @Test func aFileIsReadAgainWhenAKeyAfterFilesChangesTheEntries() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("m.yaml")
        try Self.write("version: 1\nfiles:\n  - url: http://h/a\ndefaults:\n  retries: 1\n", to: path)
        let manifest = try ManifestLoader.load(path: path, environment: [:], hashingContent: true)
        #expect(manifest.entries.map(\.settings.retries) == [1])
        #expect(manifest.contentSHA256 == DigestHasher.hex(of: Array("version: 1\nfiles:\n  - url: http://h/a\ndefaults:\n  retries: 1\n".utf8)))
        // Unasked, nothing is hashed (a report is the only reader of the hash).
        #expect(try ManifestLoader.load(path: path, environment: [:]).contentSHA256 == nil)
    }

    /// A pipe cannot be read twice: it is read whole first, as before.
    @Test func aManifestFromAPipeIsReadWhole() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("m.fifo")
        try #require(mkfifo(path, 0o600) == 0, "mkfifo: \(String(cString: strerror(errno)))")
        let text = "version: 1\nfiles:\n  - url: http://h/a\ndefaults:\n  retries: 1\n"
        let writer = Thread {
            // Opening a FIFO waits for the reader; the load below is that reader.
            try? Self.write(text, to: path)
        }
        writer.start()
        let manifest = try ManifestLoader.load(path: path, environment: [:], hashingContent: true)
        #expect(manifest.entries.map(\.settings.retries) == [1])
        #expect(manifest.contentSHA256 == DigestHasher.hex(of: Array("version: 1\nfiles:\n  - url: http://h/a\ndefaults:\n  retries: 1\n".utf8)))
    }

    @Test func aManifestFileOverTheLimitIsRefusedBeforeItIsRead() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("m.yaml")
        try Self.write("version: 1\n", to: path)
        // Sparse: the size is what counts, not the blocks.
        try #require(truncate(path, off_t(ManifestLoader.maximumFileSize + 1)) == 0)
        #expect {
            _ = try ManifestLoader.load(path: path, environment: [:])
        } throws: { error in
            "\(error)" == "cannot read manifest `\(path)`: it is larger than 64 GiB, far more than any list of files needs"
        }
    }

    /// A regular file larger than a manifest held in memory may be is read as a stream; a
    /// shard keeps its own entries of it.
    @Test func aRegularFileLargerThanTheHeldLimitIsStreamed() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("m.yaml")
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        try #require(descriptor >= 0)
        func write(_ text: String) {
            let bytes = Array(text.utf8)
            _ = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
        }
        write("version: 1\nfiles:\n")
        let comments = String(repeating: "  # a comment line that pads the manifest past the limit ......\n", count: 16_384)
        for index in 0..<8 {
            write("  - url: http://h/f\(index)\n    dest: d/f\(index)\n")
            for _ in 0..<(ManifestLoader.maximumHeldSize / comments.utf8.count / 8 + 1) { write(comments) }
        }
        close(descriptor)
        var info = stat()
        try #require(stat(path, &info) == 0 && Int(info.st_size) > ManifestLoader.maximumHeldSize)
        let manifest = try ManifestLoader.load(path: path, environment: [:])
        #expect(manifest.entries.map(\.dest) == (0..<8).map { "d/f\($0)" })
        let selection = try #require(ShardSelection(index: 1, count: 3))
        let shard = try ManifestLoader.load(path: path, environment: [:], shard: selection)
        #expect(shard.entries == manifest.selecting(selection, by: .hash).manifest.entries)
        #expect(shard.shardTotals.map(\.entries).reduce(0, +) == 8)
    }

    /// A regular file is streamed, whatever its size below `maximumFileSize`; a manifest read
    /// from a pipe is held in memory (it may need a second reading), and may hold 64 MiB.
    @Test func aManifestFromAPipeOverTheHeldLimitIsRefusedAndSaysWhy() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("m.fifo")
        try #require(mkfifo(path, 0o600) == 0)
        let writer = Thread {
            // The reader closes the pipe once past the limit: the last write fails with EPIPE,
            // and the signal that comes with it, held back on this thread, goes with the thread.
            var pipeSignal = sigset_t()
            sigemptyset(&pipeSignal)
            sigaddset(&pipeSignal, SIGPIPE)
            pthread_sigmask(SIG_BLOCK, &pipeSignal, nil)
            let descriptor = open(path, O_WRONLY | O_CLOEXEC)
            guard descriptor >= 0 else { return }
            defer { close(descriptor) }
            var chunk = Array("# a comment line that only fills the pipe up to past the limit\n".utf8)
            chunk = Array(repeating: chunk, count: 1024).flatMap { $0 }
            var written = 0
            while written <= ManifestLoader.maximumHeldSize {
                let count = chunk.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
                guard count > 0 else { return }
                written += count
            }
        }
        writer.start()
        #expect {
            _ = try ManifestLoader.load(path: path, environment: [:])
        } throws: { error in
            "\(error)" == "cannot read manifest `\(path)`: it is larger than 64 MiB, the most a manifest read from a pipe may hold (a pipe cannot be read twice, so it is held in memory); give it as a regular file"
        }
    }

    private static func write(_ text: String, to path: String) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(descriptor) }
        let bytes = Array(text.utf8)
        let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
        guard written == bytes.count else { throw POSIXError(.EIO) }
    }

    /// A manifest of a million entries is well within the 64 MiB file limit, but its nodes were
    /// counted towards the alias limit of 1,000,000 and it was refused as an alias bomb. Only the
    /// nodes aliases add count now.
    @Test func nodesWrittenOutDoNotCountTowardsTheAliasLimit() throws {
        var builder = YAMLTreeBuilder(file: "m.yaml")
        let mark = YAMLMark(line: 1, column: 1, characterOffset: 0)
        let start = YAMLEvent.NodeStart(anchor: nil, tag: nil, start: mark)
        try builder.openStreamed(start, isSequence: true, isFlow: true)
        for _ in 0...YAMLDocumentParser.maximumNodeCount {
            _ = try builder.add(.scalar(start, text: "x", isPlain: true, end: mark))
        }
        _ = try builder.closeStreamed(end: mark)
    }

    /// A regular file is read up to 64 GiB: positions past 32 bits (a node beyond 2 GiB of text)
    /// are clamped, not a trap that ends the process.
    @Test func positionsPastThirtyTwoBitsAreClampedNotATrap() {
        var node = YAMLNode(.scalar("x", isPlain: true), line: 3_000_000_000, column: 5_000_000_000)
        node.characterRange = 2_200_000_000..<5_000_000_000
        node.endLine = Int(UInt32.max) + 2
        #expect(node.line == Int(Int32.max) && node.column == Int(Int32.max) && node.endLine == Int(Int32.max))
        #expect(node.characterRange == Int(Int32.max)..<Int(Int32.max))
    }
}
