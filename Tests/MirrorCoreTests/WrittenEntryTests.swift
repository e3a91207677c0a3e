import Foundation
import Testing
@testable import MirrorCore

/// An entry as its manifest wrote it (`ManifestWriter.WrittenEntry`): what a report keeps of a
/// failed entry, and what `report --failed-manifest` writes back.
struct WrittenEntryTests {
    /// A password given by `${VAR}` stays as written; one written literally is left out (a
    /// report holds no secret), and said to be; so is a literal user name without a password,
    /// which may be a token itself.
    @Test(arguments: [
        ("https://h/a", "https://h/a", false),
        ("https://${CREDENTIALS}@h/a", "https://${CREDENTIALS}@h/a", false),
        ("https://deploy:${TOKEN}@h/a", "https://deploy:${TOKEN}@h/a", false),
        ("https://${USER}:${A}${B}@h/a", "https://${USER}:${A}${B}@h/a", false),
        ("https://user@h/a", "https://h/a", true),
        ("https://ghp_0123456789abcdef@h/a", "https://h/a", true),
        ("https://user:@h/a", "https://h/a", true),
        ("https://${USER}@h/a", "https://${USER}@h/a", false),
        ("https://user:hunter2@h/a", "https://user@h/a", true),
        ("https://user:pre${TOKEN}@h/a", "https://user@h/a", true),
        ("https://user:$${TOKEN}@h/a", "https://user@h/a", true),
        ("https://h/a?user:pw@x", "https://h/a?user:pw@x", false),
    ])
    func aLiteralPasswordIsLeftOut(_ written: String, _ kept: String, _ withheld: Bool) {
        #expect(RemoteURL.withholdingLiteralPassword(in: written) == (kept, withheld))
    }

    /// A credential header's value is kept as written only when it names a variable (the
    /// secret is then in the environment); written literally it is a token, and is left out.
    /// Other headers (`Accept`) are kept as written: without them a retry could be answered
    /// with another representation, and succeed with the wrong file.
    @Test(arguments: [
        ("Authorization", "Bearer ${TOKEN}", true), ("PRIVATE-TOKEN", "${TOKEN}", true), ("X-Api-Key", "a ${X} b", true),
        ("Authorization", "Bearer abc123", false), ("Proxy-Authorization", "Basic eA==", false), ("Cookie", "s=1", false),
        ("X-Api-Key", "$${TOKEN}", false), ("X-Session-Id", "abc", false), ("x-amz-signature", "abc", false),
        ("Accept", "application/octet-stream", true), ("X-Price", "$$5", true), ("User-Agent", "curl/8", true),
    ])
    func aCredentialHeaderIsKeptOnlyWhenItNamesAVariable(_ name: String, _ value: String, _ kept: Bool) {
        let entry = ManifestWriter.WrittenEntry(
            try! ManifestLoader.parse(text: """
                version: 1
                files:
                  - url: "https://h/a"
                    headers:
                      "\(name)": "\(value)"
                """, path: "/tmp/m.yaml", baseDirectory: "/tmp", environment: ["TOKEN": "t", "X": "x"]).entries[0])
        #expect(entry.headers.map(\.name) == (kept ? [name] : []))
        #expect(entry.withheldHeaders == (kept ? [] : [name]))
    }

    /// Written back and loaded again, an entry is the entry it was: the same URLs, mirrors,
    /// pins, checksum file and headers, as written and as expanded.
    @Test func anEntryWrittenBackLoadsAsItself() throws {
        let directory = try TemporaryDirectory(prefix: "mirror-written")
        let environment = ["CREDENTIALS": "user:pass%20word", "TOKEN": "t0k3n", "HOST": "127.0.0.1:9"]
        let original = try ManifestLoader.parse(text: """
            version: 1
            root: ./root
            defaults:
              headers:
                Authorization: "Bearer ${TOKEN}"
                X-Price: "$$5"
                X-Api-Key: "k3y-in-the-file"
              checksums: "http://${HOST}/SHA256SUMS"
            files:
              - url: "http://${CREDENTIALS}@${HOST}/data/a.bin"
                mirrors: ["http://${HOST}/mirror/a-copy.bin", "http://m:literal@${HOST}/b.bin"]
                size: 12
                checksum_name: "a.bin"
                ftp_tls: required
                headers:
                  X-Client: "mirror ${TOKEN}"
              - url: "http://${HOST}/c.bin"
                sha512: \(String(repeating: "cd", count: 64))
                dest: "d/c.bin"
                checksums: "http://${HOST}/SHA512SUMS"
            """, path: directory.path("m.yaml"), baseDirectory: directory.path, environment: environment)
        let written = original.entries.map(ManifestWriter.WrittenEntry.init)
        #expect(written[0] == ManifestWriter.WrittenEntry(
            url: "http://${CREDENTIALS}@${HOST}/data/a.bin", mirrors: ["http://${HOST}/mirror/a-copy.bin", "http://m@${HOST}/b.bin"],
            dest: "a.bin", size: 12, checksums: "http://${HOST}/SHA256SUMS", checksumName: "a.bin",
            headers: [.init(name: "Authorization", value: "Bearer ${TOKEN}"), .init(name: "X-Price", value: "$$5"),
                      .init(name: "X-Client", value: "mirror ${TOKEN}")],
            withheldPassword: true, withheldHeaders: ["X-Api-Key"], ftpTLS: "required"))
        let text = ManifestWriter.text(root: original.root, allowFile: false, entries: written)
        #expect(!text.contains("pass%20word") && !text.contains("t0k3n") && !text.contains("literal") && !text.contains("***"), "\(text)")
        #expect(!text.contains("k3y-in-the-file"), "a credential header's literal value is left out: \(text)")
        #expect(text.contains("# The manifest wrote the value of \"X-Api-Key\" in the file"), "\(text)")

        let reloaded = try ManifestLoader.parse(text: text, path: directory.path("f.yaml"), baseDirectory: "/", environment: environment)
        #expect(reloaded.root == original.root)
        for (before, after) in zip(original.entries, reloaded.entries) {
            #expect(after.url == before.url)
            #expect(after.dest == before.dest && after.digest == before.digest && after.size == before.size)
            #expect(after.checksumName == before.checksumName)
            #expect(after.settings.checksums == before.settings.checksums)
            #expect(after.settings.headers == before.settings.headers.filter { $0.name != "X-Api-Key" })
            #expect(after.settings.ftpTLS == before.settings.ftpTLS, "ftp_tls is kept: a retry without it logs in in the clear")
        }
        #expect(reloaded.entries[0].mirrors[0] == original.entries[0].mirrors[0])
        #expect(reloaded.entries[0].mirrors[1].written == "http://m@${HOST}/b.bin", "the literal password is not written")
        #expect(reloaded.entries[1].mirrors.isEmpty)
        #expect(text.contains("# The manifest gave a URL of this entry a password"), "\(text)")
    }

    /// The failed manifest's root and state directory are the runs' own, absolute and already
    /// expanded: written so that they load as those very paths, a `$` in them included.
    @Test(arguments: ["/srv/assets", "/srv/$x/assets", "/srv/${HOME}/a$$b", "/srv/a\"b\\c"])
    func theRootAndStateDirectoryLoadAsTheRunsOwn(_ path: String) throws {
        let directory = try TemporaryDirectory(prefix: "mirror-written")
        let text = ManifestWriter.text(root: path, stateDirectory: path + "-state", allowFile: false,
                                       entries: [ManifestWriter.WrittenEntry(url: "https://h/a", dest: "a")])
        let reloaded = try ManifestLoader.parse(text: text, path: directory.path("f.yaml"), baseDirectory: "/",
                                                environment: ["HOME": "/home/elsewhere"])
        #expect(reloaded.root == path, "\(text)")
        #expect(reloaded.stateDirectory == path + "-state", "\(text)")
    }
}
