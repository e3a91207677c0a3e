import Foundation
import Testing
@testable import MirrorCore

private let environment = [
    "ASSET_TOKEN": "s3cret-token",
    "MIRROR_HOST": "mirror.example.net",
    "EMPTY": "",
]

private func parse(
    _ text: String, baseDirectory: String = "/srv/manifests", rootOverride: String? = nil,
    environment: [String: String] = environment
) throws(ManifestError) -> Manifest {
    try ManifestLoader.parse(
        text: text, path: "assets.yaml", baseDirectory: baseDirectory, rootOverride: rootOverride,
        environment: environment, currentDirectory: "/home/user/work")
}

@Test func fullManifestSetsEveryKey() throws {
    let manifest = try parse("""
        version: 1
        root: ./assets/../assets//data
        concurrency: 8
        allow_file: true
        defaults:
          retries: 3
          timeout: 1m30s
          headers:
            Authorization: "Bearer ${ASSET_TOKEN}"
            X-Client: mirror
          insecure: false
          ftp_tls: try
          max_size: 5MiB
        connectivity:
          probe: https://${MIRROR_HOST}/ping
          wait: 2m
        rate_limit: "08:00,1MiB 18:00,off"
        hosts:
          example.org:
            concurrency: 2
            rate_limit: 512KiB
            headers:
              X-Client: mirror-for-example
          "[::1]:8443":
            concurrency: 1
        files:
          - url: https://example.org/data/a%20b.tar.gz
            sha256: 9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08
            size: 1048576
            mirrors: ["https://${MIRROR_HOST}/a.tar.gz", "ftp://user:pw@ftp.example.org/a.tar.gz"]
          - url: https://u:${ASSET_TOKEN}@example.org/b?x=$$1&y=${EMPTY}
            dest: ./sub//b.bin
            retries: 0
            timeout: 500ms
            headers:
              authorization: Token ${ASSET_TOKEN}
              X-Extra: "${EMPTY}"
            insecure: true
            ftp_tls: required
            max_size: 1GB
            rate_limit: 2MiB/s
          - url: file:///srv/c.txt
        """)

    #expect(manifest.path == "assets.yaml")
    #expect(manifest.version == 1)
    #expect(manifest.root == "/srv/manifests/assets/data")
    #expect(manifest.concurrency == 8)
    #expect(manifest.allowFile)
    #expect(manifest.connectivity == ConnectivitySettings(
        probe: RemoteURL(string: "https://mirror.example.net/ping", written: "https://${MIRROR_HOST}/ping"),
        wait: .seconds(120)))
    try #require(manifest.entries.count == 3)

    let first = manifest.entries[0]
    #expect(first.url == RemoteURL(string: "https://example.org/data/a%20b.tar.gz", written: "https://example.org/data/a%20b.tar.gz"))
    #expect(first.dest == "a b.tar.gz")
    #expect(first.digest == "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08")
    #expect(first.size == 1_048_576)
    #expect(first.mirrors == [
        RemoteURL(string: "https://mirror.example.net/a.tar.gz", written: "https://${MIRROR_HOST}/a.tar.gz"),
        RemoteURL(string: "ftp://user:pw@ftp.example.org/a.tar.gz", written: "ftp://user:pw@ftp.example.org/a.tar.gz"),
    ])
    #expect(first.settings == TransferSettings(
        retries: 3, timeout: .seconds(90),
        headers: [
            HTTPHeader(name: "Authorization", value: "Bearer s3cret-token", written: "Bearer ${ASSET_TOKEN}"),
            HTTPHeader(name: "X-Client", value: "mirror"),
        ],
        insecure: false, maxSize: 5 << 20, ftpTLS: .try))
    #expect(first.location == SourceLocation(file: "assets.yaml", line: 27, column: 5))

    let second = manifest.entries[1]
    #expect(second.url.string == "https://u:s3cret-token@example.org/b?x=$1&y=")
    #expect(second.url.display == "https://***@example.org/b?x=$$1&y=${EMPTY}")
    #expect(second.url.written == "https://u:${ASSET_TOKEN}@example.org/b?x=$$1&y=${EMPTY}")
    #expect(second.dest == "sub/b.bin")
    #expect(second.digest == nil)
    #expect(second.size == nil)
    #expect(second.mirrors.isEmpty)
    #expect(second.settings == TransferSettings(
        retries: 0, timeout: .milliseconds(500),
        headers: [
            HTTPHeader(name: "authorization", value: "Token s3cret-token", written: "Token ${ASSET_TOKEN}"),
            HTTPHeader(name: "X-Client", value: "mirror"),
            HTTPHeader(name: "X-Extra", value: "", written: "${EMPTY}"),
        ],
        insecure: true, maxSize: 1_000_000_000, ftpTLS: .required).with {
            $0.rateLimit = RateLimit(bytesPerSecond: 2 << 20, description: "2MiB/s")
            $0.ownHeaderNames = ["authorization", "x-extra"]
        })
    #expect(second.settings.headers(toHostWith: [HTTPHeader(name: "X-Client", value: "mirror-for-example"), HTTPHeader(name: "Authorization", value: "host")])
        .map(\.value) == ["Token s3cret-token", "mirror-for-example", ""], "defaults, then the host's, then the entry's own")
    #expect(manifest.rateLimit?.changes == [
        RateLimit.Change(minuteOfDay: 480, bytesPerSecond: 1 << 20), RateLimit.Change(minuteOfDay: 1080, bytesPerSecond: nil),
    ])
    #expect(manifest.hosts.rules.map(\.key) == ["example.org", "[::1]:8443"])
    #expect(manifest.hosts.rules.map(\.concurrency) == [2, 1])
    #expect(manifest.hosts.rules[0].rateLimit?.changes == [RateLimit.Change(minuteOfDay: 0, bytesPerSecond: 512 << 10)])
    #expect(manifest.hosts.rules[0].headers == [HTTPHeader(name: "X-Client", value: "mirror-for-example")])
    #expect(manifest.hosts.rule(for: HostKey(host: "EXAMPLE.org", port: 443))?.key == "example.org", "any port, any case")
    #expect(manifest.hosts.rule(for: HostKey(host: "::1", port: 8443))?.key == "[::1]:8443")
    #expect(manifest.hosts.rule(for: HostKey(host: "::1", port: 443)) == nil, "a rule with a port is for that port only")

    let third = manifest.entries[2]
    #expect(third.url.string == "file:///srv/c.txt")
    #expect(third.dest == "c.txt")
    #expect(third.settings.retries == 3)
    #expect(third.settings.rateLimit == nil)
}

extension TransferSettings {
    /// A copy changed by `change`, for settings the initialiser does not take.
    func with(_ change: (inout TransferSettings) -> Void) -> TransferSettings {
        var copy = self
        change(&copy)
        return copy
    }
}

@Test func minimalManifestTakesTheDefaults() throws {
    let manifest = try parse("""
        version: 1
        files:
          - url: https://example.org/dir/file.iso
        """)
    #expect(manifest.root == "/srv/manifests")
    #expect(manifest.concurrency == 4)
    #expect(manifest.allowFile == false)
    #expect(manifest.connectivity == ConnectivitySettings(probe: nil, wait: .seconds(300)))
    #expect(manifest.entries.map(\.dest) == ["file.iso"])
    #expect(manifest.entries[0].settings == TransferSettings())
}

@Test(arguments: [
    ("https://example.org/dir/file.iso", "file.iso"),
    ("https://example.org/file.iso?name=other.iso", "file.iso"),
    ("https://example.org/file.iso?next=/a/b.iso", "file.iso"),
    ("https://example.org/file.iso#part/2", "file.iso"),
    ("https://example.org/a%2Fb/c%20d", "c d"),
    ("https://${MIRROR_HOST}/pub/x.tar", "x.tar"),
    ("https://example.org/${MIRROR_HOST}/x.tar", "x.tar"),
    ("https://example.org/x.tar?mirror=${MIRROR_HOST}", "x.tar"),
    ("https://example.org/x.tar?name=${MIRROR_HOST}/y", "x.tar"),
    ("https://u:p@example.org/x.tar", "x.tar"),
    ("https://example.org/$$x.tar", "$x.tar"),
    ("https://example.org/x%7B$%7D", "x{$}"),
])
func destDefaultsToTheURLsFileName(_ url: String, _ dest: String) throws {
    let manifest = try parse("version: 1\nfiles:\n  - url: \(url)\n")
    #expect(manifest.entries.map(\.dest) == [dest])
}

private let minimalFiles = """
    version: 1
    root: data
    files:
      - url: https://example.org/a
    """

@Test(arguments: [
    // (baseDirectory, rootOverride, expected root); the current directory is /home/user/work.
    ("/srv/manifests", nil, "/srv/manifests/data"),
    ("conf", nil, "/home/user/work/conf/data"),
    ("/srv/manifests", "/mnt/out/", "/mnt/out"),
    ("/srv/manifests", "out/../elsewhere", "/home/user/work/elsewhere"),
    ("/srv/manifests", ".", "/home/user/work"),
] as [(String, String?, String)])
func rootIsResolved(baseDirectory: String, rootOverride: String?, expected: String) throws {
    let manifest = try parse(minimalFiles, baseDirectory: baseDirectory, rootOverride: rootOverride)
    #expect(manifest.root == expected)
}

@Test func sameURLAndDestTwiceIsKeptOnce() throws {
    let manifest = try parse("""
        version: 1
        files:
          - url: https://example.org/a.bin
          - url: https://example.org/b.bin
          - url: https://example.org/a.bin
            dest: ./a.bin
        """)
    #expect(manifest.entries.map(\.dest) == ["a.bin", "b.bin"])
    #expect(manifest.entries[0].location.line == 3)
}

@Test func dollarSignsThatAreNotReferencesStayLiteral() throws {
    let manifest = try parse("""
        version: 1
        defaults:
          headers:
            X-Price: "$5 ${not-a-name} $$HOME ${ASSET_TOKEN}"
        files:
          - url: https://example.org/a
        """)
    #expect(manifest.entries[0].settings.headers == [HTTPHeader(name: "X-Price", value: "$5 ${not-a-name} $HOME s3cret-token", written: "$5 ${not-a-name} $$HOME ${ASSET_TOKEN}")])
}

@Test func secretsNeverReachDescriptions() throws {
    let manifest = try parse("""
        version: 1
        defaults:
          headers:
            Authorization: "Bearer ${ASSET_TOKEN}"
        files:
          - url: https://user:${ASSET_TOKEN}@example.org/a
            mirrors: ["https://user:literal-password@example.net/a"]
        """)
    let entry = manifest.entries[0]
    let printed = "\(entry.url) \(entry.mirrors) \(entry.settings.headers)"
    #expect(!printed.contains("s3cret"))
    #expect(!printed.contains("literal-password"))
}

@Test func loadReadsAFileAndResolvesRootBesideIt() throws {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("mirror-manifest-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let file = directory.appendingPathComponent("assets.yaml")
    try Data(minimalFiles.utf8).write(to: file)

    let manifest = try ManifestLoader.load(path: file.path, environment: [:])
    #expect(manifest.path == file.path)
    #expect(manifest.root == LexicalPath.normalised(directory.path + "/data"))
    #expect(manifest.entries.map(\.url.string) == ["https://example.org/a"])
}

@Test func loadOfAMissingFileNamesThePath() {
    let path = "/nonexistent-\(UUID().uuidString)/assets.yaml"
    #expect {
        _ = try ManifestLoader.load(path: path, environment: [:])
    } throws: { error in
        guard let error = error as? ManifestError, error.diagnostics.count == 1 else { return false }
        let diagnostic = error.diagnostics[0]
        return diagnostic.location == nil
            && diagnostic.description == "cannot read manifest `\(path)`: No such file or directory"
    }
}

@Test func loadOfADirectoryGivesTheSystemsReason() {
    #expect {
        _ = try ManifestLoader.load(path: "/", environment: [:])
    } throws: { error in
        (error as? ManifestError)?.description == "cannot read manifest `/`: Is a directory"
    }
}

@Test func emptyRootOverrideIsRefused() {
    #expect {
        _ = try parse(minimalFiles, rootOverride: "")
    } throws: { error in
        (error as? ManifestError)?.description == "--root: the root given on the command line is empty; give a directory"
    }
}

/// `checksums: none` takes away the checksum file of `defaults`; the checksum file mirrored as
/// an entry of its own has none either (it does not list itself).
@Test func checksumsNoneAndTheChecksumFileItselfHaveNoChecksumFile() throws {
    let manifest = try parse("""
        version: 1
        defaults:
          checksums: https://example.org/SHA256SUMS
        files:
          - url: https://example.org/a.iso
          - url: https://example.org/SHA256SUMS
          - url: https://example.org/SHA256SUMS.gpg
            checksums: none
          - url: https://example.org/b.iso
            checksums: "none"
          - url: https://example.org/c.iso
            checksums: https://example.org/other/SHA256SUMS
        """)
    #expect(manifest.entries.map { $0.settings.checksums?.string } == [
        "https://example.org/SHA256SUMS", nil, nil, nil, "https://example.org/other/SHA256SUMS",
    ])

    #expect {
        _ = try parse("""
            version: 1
            defaults:
              checksums: https://example.org/SHA256SUMS
            files:
              - url: https://example.org/SHA256SUMS
                checksum_name: SUMS
            """)
    } throws: { error in
        (error as? ManifestError)?.description.contains(
            "assets.yaml:6:20: files[0].checksum_name: `checksum_name` names the entry in its checksum file, but the entry is that checksum file itself") == true
    }
}

/// `state_dir` is read as `root` is: relative to the manifest's directory, `--state-dir` to the
/// current directory (/home/user/work here), `${VAR}` and `~` expanded.
@Test(arguments: [
    // (state_dir line, --state-dir, expected state directory)
    (nil, nil, nil),
    ("state_dir: ../state", nil, "/srv/state"),
    ("state_dir: /var/lib/mirror/assets/", nil, "/var/lib/mirror/assets"),
    ("state_dir: ~/state", nil, "/home/user/state"),
    ("state_dir: ${STATE}/s", nil, "/var/lib/m/s"),
    ("state_dir: ../state", "here", "/home/user/work/here"),
    (nil, "/mnt/state", "/mnt/state"),
] as [(String?, String?, String?)])
func stateDirectoryIsResolvedLikeRoot(line: String?, override: String?, expected: String?) throws {
    let text = "version: 1\nroot: data\n" + (line.map { $0 + "\n" } ?? "") + "files:\n  - url: https://example.org/a\n"
    let manifest = try ManifestLoader.parse(
        text: text, path: "assets.yaml", baseDirectory: "/srv/manifests", stateDirectoryOverride: override,
        environment: ["STATE": "/var/lib/m", "HOME": "/home/user", "EMPTY": ""], currentDirectory: "/home/user/work")
    #expect(manifest.stateDirectory == expected)
    #expect(manifest.root == "/srv/manifests/data")
}

/// What `state_dir` may not be, each reported where it is written (or naming the flag).
@Test(arguments: [
    ("state_dir: ${EMPTY}", nil, "m.yaml:3:12: state_dir: environment variable `EMPTY` is set but empty"),
    ("state_dir: ${EMPTY}/s", nil, "m.yaml:3:12: state_dir: environment variable `EMPTY` is set but empty"),
    ("state_dir: ${UNSET}/s", nil, "m.yaml:3:12: state_dir: environment variable `UNSET` is not set"),
    ("state_dir: data/.state", nil, "m.yaml:3:12: state_dir: state_dir /srv/manifests/data/.state is the root /srv/manifests/data or inside it"),
    ("state_dir: ./data", nil, "m.yaml:3:12: state_dir: state_dir /srv/manifests/data is the root /srv/manifests/data or inside it"),
    (nil, "/srv/manifests/data/x", "--state-dir: state_dir /srv/manifests/data/x is the root /srv/manifests/data or inside it"),
    (nil, "", "--state-dir: the state directory given on the command line is empty; give a directory"),
    ("state_dir: [a]", nil, "m.yaml:3:12: state_dir: expected a directory path"),
] as [(String?, String?, String)])
func aStateDirectoryThatCannotBeIsAnError(line: String?, override: String?, expected: String) throws {
    let text = "version: 1\nroot: data\n" + (line.map { $0 + "\n" } ?? "") + "files:\n  - url: https://example.org/a\n"
    let error = try #require(throws: ManifestError.self) {
        try ManifestLoader.parse(
            text: text, path: "m.yaml", baseDirectory: "/srv/manifests", stateDirectoryOverride: override,
            environment: ["EMPTY": ""], currentDirectory: "/home/user/work")
    }
    #expect(error.diagnostics.count == 1)
    #expect(error.diagnostics.first?.description.hasPrefix(expected) == true, "\(error.diagnostics)")
}

/// `segment_min`: the top level's applies under `defaults`', an entry's over both; `off` is
/// `Int64.max`; the default is 64 MiB.
@Test func segmentMinLayersTopLevelDefaultsAndEntry() throws {
    let manifest = try parse("""
        version: 1
        segment_min: 16MiB
        defaults:
          retries: 1
        files:
          - url: https://example.org/a
          - url: https://example.org/b
            segment_min: off
          - url: https://example.org/c
            segment_min: 2GiB
        """)
    #expect(manifest.entries.map(\.settings.segmentMin) == [16 << 20, .max, 2 << 30])
    let overridden = try parse("""
        version: 1
        segment_min: 16MiB
        defaults:
          segment_min: 8MiB
        files:
          - url: https://example.org/a
        """)
    #expect(overridden.entries[0].settings.segmentMin == 8 << 20)
    let plain = try parse("version: 1\nfiles:\n  - url: https://example.org/a\n")
    #expect(plain.entries[0].settings.segmentMin == 64 << 20)
    #expect(throws: (any Error).self) { try parse("version: 1\nsegment_min: 100KiB\nfiles:\n  - url: https://example.org/a\n") }
    #expect(try SegmentMinimum.parse("off") == .max)
    #expect(try SegmentMinimum.parse("32MiB") == 32 << 20)
    #expect(throws: SegmentMinimum.Problem.self) { try SegmentMinimum.parse("512KiB") }
}
