import Foundation
import Testing
@testable import MirrorCore

/// `rewrite:` and `MIRROR_REWRITE`: which URLs a rule covers, what an entry is fetched from,
/// which headers and logins go where, and the mistakes a rule can hold.
struct RewriteRulesTests {
    /// A rule's `from`, a URL, and what follows the prefix in it (nil: not covered).
    struct Match: Sendable, CustomTestStringConvertible {
        var from: String
        var url: String
        var remainder: String?
        var testDescription: String { "\(from) ~ \(url)" }
    }

    static let matches: [Match] = [
        Match(from: "https://github.com/", url: "https://github.com/a/b", remainder: "a/b"),
        Match(from: "https://github.com", url: "https://GitHub.COM/a", remainder: "a"),
        Match(from: "https://github.com/org", url: "https://github.com/org/x", remainder: "/x"),
        Match(from: "https://github.com/org", url: "https://github.com/organisation/x", remainder: nil),
        Match(from: "https://github.com/org", url: "https://github.com/org?x=1", remainder: "?x=1"),
        Match(from: "https://github.com/org", url: "https://github.com/org", remainder: ""),
        Match(from: "https://github.com:443/", url: "https://github.com/a", remainder: "a"),
        Match(from: "https://github.com/", url: "https://github.com:443/a", remainder: "a"),
        Match(from: "http://h/", url: "http://h:80/a", remainder: "a"),
        Match(from: "ftp://h/pub/", url: "ftp://h:21/pub/a", remainder: "a"),
        Match(from: "https://h:8443/", url: "https://h/a", remainder: nil),
        Match(from: "https://github.com/", url: "http://github.com/a", remainder: nil),
        Match(from: "https://github.com/", url: "https://user:pw@github.com/a", remainder: "a"),
        Match(from: "https://github.com", url: "https://github.com.evil.example/a", remainder: nil),
        Match(from: "https://github.com/Org/", url: "https://github.com/org/a", remainder: nil),
        Match(from: "https://[::1]:8080/", url: "https://[::1]:8080/a", remainder: "a"),
        // Other spellings of one origin.
        Match(from: "https://github.com/", url: "https://github.com./a", remainder: "a"),
        Match(from: "https://github.com/", url: "https://github.com:/a", remainder: "a"),
        Match(from: "https://github.com/", url: "https://github.com:0443/a", remainder: "a"),
        Match(from: "ftps://h/", url: "ftps://h:990/a", remainder: "a"),
        Match(from: "https://[2001:db8::1]/", url: "https://[2001:DB8:0:0:0:0:0:1]/a", remainder: "a"),
        Match(from: "https://h/", url: "https://h", remainder: ""),
        Match(from: "https://h/", url: "https://h?x=1", remainder: "?x=1"),
        Match(from: "https://github.com/", url: "https://github.com:00000000000443/a", remainder: "a"),
        Match(from: "https://github.com/", url: "https://git%68ub.com/a", remainder: "a"),
        Match(from: "http://127.0.0.1/", url: "http://127.1/a", remainder: "a"),
        Match(from: "http://127.0.0.1/", url: "http://0x7f.0.0.1/a", remainder: "a"),
        Match(from: "http://127.0.0.1/", url: "http://2130706433/a", remainder: "a"),
        Match(from: "https://[fe80::1%25eth0]/", url: "https://[FE80:0::1%25eth0]/a", remainder: "a"),
        // Compared byte for byte: "é" and "e" with a combining accent are two paths.
        Match(from: "https://h/caf\u{E9}/", url: "https://h/cafe\u{301}/a", remainder: nil),
    ]

    @Test(arguments: matches)
    func aPrefixCoversURLsAtAPathBoundary(_ match: Match) throws {
        let from = try #require(URLPrefix(match.from))
        let url = try #require(URLPrefix(match.url))
        #expect(from.remainder(of: url).map(String.init) == match.remainder)
    }

    /// A site's rules file of `rules` (the text under `rewrite:`), in `directory`; its path.
    private static func siteFile(_ rules: String, in directory: TemporaryDirectory, name: String = "site.yaml") throws -> String {
        try directory.write(Data(("rewrite:\n" + rules).utf8), to: name)
    }

    @Test(arguments: ["https://m.internal/p/", "https://m.internal/p", "https://M.internal:443", "https://[::1]/x/"])
    func aRewrittenURLIsSplitAsItsTargetAndRemainderSay(_ target: String) throws {
        let split = try #require(URLPrefix(target))
        for remainder in ["a/b", "/a?x=1", "", "?q", "/%41"] {
            let parsed = URLPrefix(target + remainder)
            if split.pathWasEmpty { continue }
            #expect(parsed == URLPrefix(origin: split.origin, rest: Substring(String(split.rest) + remainder)), "\(target) + \(remainder)")
        }
    }

    private static func parse(_ text: String, environment: [String: String] = [:]) throws(ManifestError) -> Manifest {
        try ManifestLoader.parse(text: text, path: "m.yaml", baseDirectory: "/srv", environment: environment, currentDirectory: "/")
    }

    @Test func anEntryIsFetchedFromItsRewritesFirstThenFromItself() throws {
        let manifest = try Self.parse("""
            version: 1
            rewrite:
              - from: https://github.com/
                to: [https://mirror-a.internal/gh/, https://mirror-b.internal/gh/]
              - from: https://cdn.example/
                to: https://mirror-a.internal/cdn/
                only: true
            files:
              - url: https://github.com/o/r/releases/download/v1/a.tgz
                mirrors: [https://cdn.example/a.tgz, https://elsewhere.example/a.tgz]
              - url: https://untouched.example/b.tgz
            """)
        let entry = manifest.entries[0]
        #expect(([entry.url] + entry.mirrors).map(\.string) == [
            "https://mirror-a.internal/gh/o/r/releases/download/v1/a.tgz",
            "https://mirror-b.internal/gh/o/r/releases/download/v1/a.tgz",
            "https://mirror-a.internal/cdn/a.tgz",
            "https://github.com/o/r/releases/download/v1/a.tgz",
            "https://elsewhere.example/a.tgz",
        ], "rewrites first, in order; the `only` rule's source gone")
        #expect(entry.isRewritten && entry.manifestURL.string == "https://github.com/o/r/releases/download/v1/a.tgz")
        #expect(entry.manifestMirrors.map(\.string) == ["https://cdn.example/a.tgz", "https://elsewhere.example/a.tgz"])
        #expect(entry.dest == "a.tgz")
        let untouched = manifest.entries[1]
        #expect(!untouched.isRewritten && untouched.url.string == "https://untouched.example/b.tgz" && untouched.mirrors.isEmpty)
    }

    @Test func anOnlyRuleIsAFilterNoOtherRuleCanOpen() throws {
        let directory = try TemporaryDirectory()
        let site = try Self.siteFile("""
              - from: https://pypi.org/
                to: https://pypi.internal/
                only: true
            """, in: directory)
        let manifest = try Self.parse("""
            version: 1
            rewrite:
              - from: https://pypi.org/simple/
                to: [https://other.internal/simple/, https://pypi.org/elsewhere/]
            files:
              - url: https://pypi.org/simple/a.whl
              - url: https://example.org/b.whl
                mirrors: [https://pypi.org/b.whl]
            """, environment: ["MIRROR_REWRITE": site])
        #expect(([manifest.entries[0].url] + manifest.entries[0].mirrors).map(\.string) == ["https://other.internal/simple/a.whl"],
                "neither the original nor a replacement on the forbidden host")
        #expect(([manifest.entries[1].url] + manifest.entries[1].mirrors).map(\.string) == ["https://pypi.internal/b.whl", "https://example.org/b.whl"])
        #expect(manifest.rewrites.forbids("https://PyPI.org:443/x") && !manifest.rewrites.forbids("https://pypi.internal/x"))
        #expect(manifest.rewrites.forbids("https://pypi.org:99999/x"), "a URL the rules cannot read is kept away from too")
        #expect(manifest.rewrites.candidates(for: [RemoteURL(string: "https://pypi.org:99999/x")]) == [])
        // A rule that leads a host into a path of its own: that path is allowed, the rest not.
        let own = try Self.parse("""
            version: 1
            rewrite:
              - from: https://h.example/
                to: https://h.example/mirror/
                only: true
            connectivity:
              probe: https://h.example/ping
            files:
              - url: https://h.example/a
            """)
        #expect(own.entries[0].url.string == "https://h.example/mirror/a" && own.entries[0].mirrors.isEmpty)
        #expect(own.rewrites.forbids("https://h.example/b") && !own.rewrites.forbids("https://h.example/mirror/b"))
        #expect(own.connectivity.probe?.string == "https://h.example/mirror/ping", "a forbidden probe goes to the replacement")
    }

    @Test func aFromWithNoPathCoversTheHostAndItsReplacementsAreReadWithASlash() throws {
        let manifest = try Self.parse("""
            version: 1
            rewrite:
              - from: https://github.com
                to: https://m.internal/gh
            files:
              - url: https://github.com/o/a.bin
            """)
        #expect(manifest.entries[0].url.string == "https://m.internal/gh/o/a.bin")
    }

    @Test func theLongestPrefixWinsAndTheSitesRuleWinsATie() throws {
        let directory = try TemporaryDirectory()
        let site = try Self.siteFile("""
              - from: https://example.org/
                to: https://site.internal/
                only: true
            """, in: directory)
        let manifest = try Self.parse("""
            version: 1
            rewrite:
              - from: https://example.org/
                to: https://manifest.internal/
              - from: https://example.org/deep/
                to: https://deep.internal/
                only: true
            files:
              - url: https://example.org/a
              - url: https://example.org/deep/b
            """, environment: ["MIRROR_REWRITE": site])
        #expect(([manifest.entries[0].url] + manifest.entries[0].mirrors).map(\.string) == ["https://site.internal/a"])
        #expect(([manifest.entries[1].url] + manifest.entries[1].mirrors).map(\.string) == ["https://deep.internal/b"])
    }

    @Test func theEntrysHeadersGoOnlyToItsOwnHostAndARulesOnlyToItsReplacements() throws {
        let manifest = try Self.parse("""
            version: 1
            defaults:
              headers:
                Authorization: "token ${GITHUB_TOKEN}"
            rewrite:
              - from: https://github.com/
                to: [https://mirror.internal/gh/, https://github.com/mirror/]
                headers:
                  X-Mirror-Key: "${MIRROR_KEY}"
            hosts:
              mirror.internal:
                headers:
                  X-Site: lab
            files:
              - url: https://github.com/a
            """, environment: ["GITHUB_TOKEN": "ghp_secret", "MIRROR_KEY": "k1"])
        let entry = manifest.entries[0]
        let sources = [entry.url] + entry.mirrors
        #expect(sources.map(\.string) == ["https://mirror.internal/gh/a", "https://github.com/mirror/a", "https://github.com/a"])
        func names(_ index: Int) -> [String] {
            let rule = HostKey(sources[index]).flatMap(manifest.hosts.rule(for:))
            return EntryDriver.Source.headers(of: entry, source: index, hostRule: rule).map { "\($0.name): \($0.value)" }
        }
        #expect(names(0) == ["X-Site: lab", "X-Mirror-Key: k1"], "another host: neither the token nor the login of github.com")
        #expect(names(1) == ["Authorization: token ghp_secret", "X-Mirror-Key: k1"], "the same origin keeps the entry's headers")
        #expect(names(2) == ["Authorization: token ghp_secret"], "the original source is as it was")
    }

    @Test func aSameOriginRewriteKeepsTheUsualOrderOfHeaders() throws {
        let manifest = try Self.parse("""
            version: 1
            defaults:
              headers:
                X-A: defaults
                X-B: defaults
            hosts:
              h.example:
                headers:
                  X-A: host
                  X-C: host
            rewrite:
              - from: https://h.example/a/
                to: https://h.example/b/
                headers:
                  X-C: rule
            files:
              - url: https://h.example/a/f
                headers:
                  X-B: entry
            """)
        let entry = manifest.entries[0]
        let rule = HostKey(entry.url).flatMap(manifest.hosts.rule(for:))
        let sent = EntryDriver.Source.headers(of: entry, source: 0, hostRule: rule).map { "\($0.name): \($0.value)" }
        #expect(sent == ["X-A: host", "X-B: entry", "X-C: rule"], "defaults, then the host's, then the entry's, then the rule's: \(sent)")
    }

    @Test func aReplacementCarriesItsOwnHostsNetrcLoginAndNeverTheOriginalsUserinfo() throws {
        let directory = try TemporaryDirectory()
        let netrc = try directory.write(Data("machine mirror.internal login robot password m1rr0r\nmachine github.com login me password p\n".utf8), to: "netrc")
        let manifest = try Self.parse("""
            version: 1
            rewrite:
              - from: https://github.com/
                to: https://mirror.internal/gh/
            files:
              - url: https://someone:${PASSWORD}@github.com/x/${FILE}
                dest: x.bin
            """, environment: ["NETRC": netrc, "PASSWORD": "hunter2", "FILE": "x.bin"])
        let entry = manifest.entries[0]
        #expect(entry.url.string == "https://mirror.internal/gh/x/x.bin")
        #expect(entry.url.login == NetrcLogin(user: "robot", password: "m1rr0r"))
        #expect(entry.url.display == "https://mirror.internal/gh/x/${FILE}", "a variable's value is printed nowhere: \(entry.url.display)")
        #expect(entry.manifestURL.string.contains("hunter2"), "the manifest's own URL is kept for its host")
    }

    @Test func aChecksumFileIsTriedAtItsRewriteWhileTheFilesNameComesFromTheManifestsURL() throws {
        let manifest = try Self.parse("""
            version: 1
            defaults:
              checksums: https://example.org/SHA256SUMS
            rewrite:
              - from: https://example.org/
                to: https://mirror.internal/
                only: true
            files:
              - url: https://example.org/dir/a.bin
            """)
        let candidates = manifest.rewrites.candidates(for: [manifest.entries[0].settings.checksums!])
        #expect(candidates?.map(\.url.string) == ["https://mirror.internal/SHA256SUMS"])
        #expect(ChecksumPins.lookupName(of: manifest.entries[0]) == "a.bin")
    }

    @Test func aLockFileWritesTheManifestsURLsBack() throws {
        let manifest = try Self.parse("""
            version: 1
            rewrite:
              - from: https://example.org/
                to: https://mirror.internal/
                only: true
            files:
              - url: https://example.org/a.bin
                mirrors: [https://example.org/b/a.bin]
            """)
        let written = ManifestWriter.WrittenEntry(manifest.entries[0])
        #expect(written.url == "https://example.org/a.bin" && written.mirrors == ["https://example.org/b/a.bin"])
    }

    @Test func aManifestWrittenBackKeepsItsOwnRulesAndNoLiteralSecret() throws {
        let directory = try TemporaryDirectory()
        let site = try Self.siteFile("  - from: https://site.example/\n    to: https://site.internal/\n", in: directory)
        let manifest = try Self.parse("""
            version: 1
            rewrite:
              - from: https://example.org/
                to: [https://robot:literal@m.internal/a/, "https://m2.internal/${PART}/"]
                only: true
                headers:
                  Authorization: Bearer written-here
                  X-Key: "${KEY}"
                  Accept: application/octet-stream
            files:
              - url: https://example.org/f
            """, environment: ["MIRROR_REWRITE": site, "PART": "p", "KEY": "k"])
        let rules = ManifestWriter.WrittenRule.own(of: manifest)
        #expect(rules.count == 1, "the site's rule is the environment's, not the manifest's")
        let rule = try #require(rules.first)
        #expect(rule.from == "https://example.org/" && rule.only && rule.to == ["https://robot@m.internal/a/", "https://m2.internal/${PART}/"])
        #expect(rule.withheldPassword && rule.withheldHeaders == ["Authorization"])
        #expect(rule.headers.map(\.name) == ["X-Key", "Accept"] && rule.headers[0].value == "${KEY}")
        let text = ManifestWriter.text(root: "/srv/root", allowFile: false, rewrites: rules, entries: [ManifestWriter.WrittenEntry(manifest.entries[0])])
        #expect(!text.contains("literal") && !text.contains("written-here"), "\(text)")
        let again = try Self.parse(text, environment: ["PART": "p", "KEY": "k"])
        #expect(again.rewrites.rules.count == 1 && again.rewrites.rules[0].only)
        #expect(([again.entries[0].url] + again.entries[0].mirrors).map(\.string) == ["https://robot@m.internal/a/f", "https://m2.internal/p/f"])
    }

    /// A manifest (or site file) with a mistake in its rules, and what the message must say.
    struct BadRule: Sendable, CustomTestStringConvertible {
        var name: String
        var rules: String
        var location: String
        var key: String
        var phrase: String
        var testDescription: String { name }
    }

    static let badRules: [BadRule] = [
        BadRule(name: "not a list", rules: "rewrite: https://a/", location: "m.yaml:2:10", key: "rewrite", phrase: "expected a sequence of rules"),
        BadRule(name: "no from", rules: "rewrite:\n  - to: https://b/", location: "m.yaml:3:5", key: "rewrite[0]", phrase: "missing required key `from`"),
        BadRule(name: "no to", rules: "rewrite:\n  - from: https://a/", location: "m.yaml:3:5", key: "rewrite[0]", phrase: "missing required key `to`"),
        BadRule(name: "empty to", rules: "rewrite:\n  - from: https://a/\n    to: []", location: "m.yaml:4:9", key: "rewrite[0].to", phrase: "at least one replacement"),
        BadRule(name: "slash on one side", rules: "rewrite:\n  - from: https://a/x/\n    to: https://b/y", location: "m.yaml:4:9", key: "rewrite[0].to",
                phrase: "`from` ends with `/` and `to` does not"),
        BadRule(name: "slash on the other side", rules: "rewrite:\n  - from: https://a/x\n    to: [https://b/y/]", location: "m.yaml:4:10", key: "rewrite[0].to[0]",
                phrase: "`to` ends with `/` and `from` does not"),
        BadRule(name: "from with a query", rules: "rewrite:\n  - from: https://a/?x=1\n    to: https://b/", location: "m.yaml:3:11", key: "rewrite[0].from",
                phrase: "cannot hold a query"),
        BadRule(name: "from with a user", rules: "rewrite:\n  - from: https://u@a/\n    to: https://b/", location: "m.yaml:3:11", key: "rewrite[0].from",
                phrase: "`from` names a user"),
        BadRule(name: "typo", rules: "rewrite:\n  - from: https://a/\n    to: https://b/\n    olny: true", location: "m.yaml:5:5", key: "rewrite[0].olny",
                phrase: "did you mean `only`?"),
        BadRule(name: "only not a boolean", rules: "rewrite:\n  - from: https://a/\n    to: https://b/\n    only: yes", location: "m.yaml:5:11", key: "rewrite[0].only",
                phrase: "write `true`"),
        BadRule(name: "a scheme mirror cannot fetch", rules: "rewrite:\n  - from: https://a/\n    to: gopher://b/", location: "m.yaml:4:9", key: "rewrite[0].to",
                phrase: "unsupported scheme `gopher`"),
        BadRule(name: "a file URL without allow_file", rules: "rewrite:\n  - from: https://a/\n    to: file:///srv/mirror/", location: "m.yaml:4:9", key: "rewrite[0].to",
                phrase: "allow_file"),
        BadRule(name: "the same prefix twice", rules: "rewrite:\n  - from: https://a/\n    to: https://b/\n  - from: https://A:443/\n    to: https://c/",
                location: "m.yaml:5:11", key: "rewrite[1].from", phrase: "already set at line 3"),
        BadRule(name: "to with a query", rules: "rewrite:\n  - from: https://a/\n    to: https://b/?x=", location: "m.yaml:4:9", key: "rewrite[0].to",
                phrase: "cannot hold a query"),
        BadRule(name: "the same prefix with and without its slash", rules: "rewrite:\n  - from: https://a\n    to: https://b/\n  - from: https://a/\n    to: https://c/",
                location: "m.yaml:5:11", key: "rewrite[1].from", phrase: "already set at line 3"),
        BadRule(name: "a forbidden header", rules: "rewrite:\n  - from: https://a/\n    to: https://b/\n    headers:\n      Range: bytes=0-",
                location: "m.yaml:6:7", key: "rewrite[0].headers.Range", phrase: "cannot be set in a manifest"),
    ]

    @Test(arguments: badRules)
    func aBadRuleIsReportedWhereItIs(_ bad: BadRule) {
        do {
            _ = try Self.parse("version: 1\n\(bad.rules)\nfiles:\n  - url: https://a/f\n")
            Issue.record("parsed without error")
        } catch {
            let match = error.diagnostics.first { $0.location?.description == bad.location && $0.key == bad.key && $0.message.contains(bad.phrase) }
            #expect(match != nil, "expected \(bad.location): \(bad.key): …\(bad.phrase)…; got:\n\(error)")
        }
    }

    @Test func whatARewriteCannotFetchIsRefusedWhereTheEntryIs() throws {
        func problems(_ text: String, _ environment: [String: String] = [:]) -> [String] {
            do {
                _ = try Self.parse(text, environment: environment)
                return []
            } catch {
                return error.diagnostics.map(\.description)
            }
        }
        let nowhere = problems("""
            version: 1
            rewrite:
              - from: https://a.example/
                to: https://b.example/
                only: true
              - from: https://b.example/
                to: https://a.example/
                only: true
            files:
              - url: https://a.example/f
            """)
        #expect(nowhere.contains { $0.hasPrefix("m.yaml:10:10: files[0].url:") && $0.contains("nowhere to fetch it from") }, "\(nowhere)")
        let token = problems("""
            version: 1
            rewrite:
              - from: https://a.example/
                to: https://m.internal/a/
            files:
              - url: https://a.example/f?token=${TOKEN}
                dest: f
              - url: https://a.example/${VERSION}/g
            """, ["TOKEN": "s3cret", "VERSION": "1.2"])
        #expect(token.count == 1 && token[0].hasPrefix("m.yaml:6:10: files[0].url:") && token[0].contains("query"), "\(token)")
        #expect(!token.joined().contains("s3cret"))
        // A variable that brings the `?` itself, and a checksum file's query, count too; a
        // literal `$$` is no variable.
        let hidden = problems("""
            version: 1
            defaults:
              checksums: "https://a.example/SUMS?sig=${SIG}"
            rewrite:
              - from: https://a.example/
                to: https://m.internal/a/
            files:
              - url: https://a.example/f${QUERY}
                dest: f
              - url: https://a.example/g?x=$$1
                checksums: none
            """, ["QUERY": "?token=s3cret", "SIG": "abc"])
        #expect(hidden.filter { $0.hasPrefix("m.yaml:8:10:") }.count == 2, "the url's and its checksum file's: \(hidden)")
        #expect(!hidden.contains { $0.hasPrefix("m.yaml:10:10:") }, "\(hidden)")
        let checksums = problems("""
            version: 1
            defaults:
              checksums: https://a.example/SUMS
            rewrite:
              - from: https://a.example/
                to: https://b.example/
                only: true
              - from: https://b.example/
                to: https://a.example/
                only: true
            files:
              - url: https://b.example/f
              - url: https://b.example/g
              - url: https://b.example/h
            """)
        #expect(checksums.filter { $0.contains("its checksum file") }.count == 1, "said once, at the first entry that names it: \(checksums)")
    }

    @Test func theSitesFileIsNamedInItsProblems() throws {
        let directory = try TemporaryDirectory()
        let site = try directory.write(Data("rewrite:\n  - from: https://a/\n    to: https://b\n".utf8), to: "site.yaml")
        let manifest = "version: 1\nfiles:\n  - url: https://a/f\n"
        do {
            _ = try Self.parse(manifest, environment: ["MIRROR_REWRITE": site])
            Issue.record("parsed without error")
        } catch {
            #expect(error.diagnostics.contains { $0.location?.description == "\(site):3:9" && $0.key == "rewrite[0].to" }, "\(error)")
        }
        let missing = directory.path("nowhere.yaml")
        do {
            _ = try Self.parse(manifest, environment: ["MIRROR_REWRITE": missing])
            Issue.record("parsed without error")
        } catch {
            #expect(error.diagnostics.contains { $0.key == "MIRROR_REWRITE" && $0.message.contains(missing) && $0.message.contains("No such file") }, "\(error)")
        }
        let wrongKey = try directory.write(Data("rewrites: []\n".utf8), to: "wrong.yaml")
        do {
            _ = try Self.parse(manifest, environment: ["MIRROR_REWRITE": wrongKey])
            Issue.record("parsed without error")
        } catch {
            #expect(error.diagnostics.contains { $0.location?.description == "\(wrongKey):1:1" && $0.message.contains("did you mean `rewrite`?") }, "\(error)")
        }
        // A site's rule may lead to a file URL only for a manifest that allows them.
        let local = try directory.write(Data("rewrite:\n  - from: https://a/\n    to: file:///srv/mirror/\n    only: true\n".utf8), to: "local.yaml")
        do {
            _ = try Self.parse(manifest, environment: ["MIRROR_REWRITE": local])
            Issue.record("parsed without error")
        } catch {
            #expect(error.diagnostics.contains { $0.location?.description == "m.yaml:3:10" && $0.message.contains("allow_file") }, "\(error)")
        }
        let allowed = try Self.parse("version: 1\nallow_file: true\nfiles:\n  - url: https://a/f\n", environment: ["MIRROR_REWRITE": local])
        #expect(allowed.entries[0].url.string == "file:///srv/mirror/f")
    }
}
