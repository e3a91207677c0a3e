import Testing
@testable import MirrorCore

// Tables for the pieces the manifest loader is built from.

@Test(arguments: [
    ("https://u:p@h/x", "https://***@h/x"),
    ("https://user@h/x", "https://***@h/x"),
    ("https://${TOKEN}@h/x", "https://***@h/x"),
    ("https://${USER}:${PASS}@h:8443/x?a=b", "https://***@h:8443/x?a=b"),
    ("ftp://a:b@c@h/x", "ftp://***@h/x"),
    ("https://h/x?token=abc&u=a@b", "https://h/x?token=abc&u=a@b"),
    ("https://h/@scope/pkg", "https://h/@scope/pkg"),
    ("https://h#frag@x", "https://h#frag@x"),
    ("https://h/x", "https://h/x"),
    ("${URL}", "${URL}"),
    ("h/x?next=https://u:p@h", "h/x?next=https://u:p@h"),
    ("", ""),
    // Where the scheme ends, and what cannot be one.
    ("a:b://u@h/x", "a:b://***@h/x"),
    ("://u@h/x", "://u@h/x"),
    ("https:/u@h/x", "https:/u@h/x"),
    ("https:", "https:"),
    ("https:/", "https:/"),
    ("https://", "https://"),
    ("https://u@", "https://***@"),
    ("https://@h", "https://***@h"),
    ("/https://u@h/x", "/https://u@h/x"),
    ("u@h://v@k/x", "u@h://v@k/x"),
    ("a?b://u@h/x", "a?b://u@h/x"),
    ("a#b://u@h/x", "a#b://u@h/x"),
    ("https://h?x=u@h", "https://h?x=u@h"),
    ("https://u@h:1?q", "https://***@h:1?q"),
    ("https://u@h#f", "https://***@h#f"),
    // Bytes, as URL parsers read them: a delimiter followed by a combining mark is still one.
    ("https://u:p@\u{301}h/x", "https://***@\u{301}h/x"),
    ("https://u\u{301}:p@h/x", "https://***@h/x"),
    ("a://\u{301}u@h/x", "a://***@h/x"),
    ("a:\u{301}//u@h/x", "a:\u{301}//u@h/x"),
    ("https\u{600}://u@h/x", "https\u{600}://***@h/x"),
    ("\u{600}https://u@h/x", "\u{600}https://***@h/x"),
    ("é://u@h/é", "é://***@h/é"),
])
func userinfoIsRedacted(_ text: String, _ expected: String) {
    #expect(RemoteURL.redactingUserinfo(in: text) == expected)
}

/// The last column: variables set to the empty string, which a path-valued key refuses.
@Test(arguments: [
    ("plain", "plain", [], [], [], []),
    ("${A}/${B}", "1/", ["A", "B"], [], [], ["B"]),
    ("$${A}", "${A}", [], [], [], []),
    ("$$$$", "$$", [], [], [], []),
    ("$A ${ A} ${1A} ${A-B} $", "$A ${ A} ${1A} ${A-B} $", [], [], ["A"], []),
    ("$1 $$B $_x9/$A", "$1 $B $_x9/$A", [], [], ["_x9", "A"], []),
    ("${_x9}${MISSING}${MISSING}", "", ["_x9", "MISSING"], ["MISSING"], [], ["_x9"]),
    ("${B}${B}/${A}", "/1", ["B", "A"], [], [], ["B"]),
    ("${A", "${A", [], [], [], []),
    ("a${A}é${A}", "a1é1", ["A"], [], [], []),
] as [(String, String, [String], [String], [String], [String])])
func variablesExpand(_ source: String, _ text: String, _ referenced: [String], _ unset: [String], _ unbraced: [String], _ empty: [String]) {
    let expansion = VariableExpansion(expanding: source, environment: ["A": "1", "B": "", "_x9": ""])
    #expect(expansion == VariableExpansion(text: text, referenced: referenced, unset: unset, unbraced: unbraced, empty: empty))
}

@Test(arguments: [
    ("500ms", Duration.milliseconds(500)),
    ("30s", .seconds(30)),
    ("5m", .seconds(300)),
    ("1h", .seconds(3600)),
    ("1m30s", .seconds(90)),
    ("1h0m1s", .seconds(3601)),
    ("2s500ms", .milliseconds(2500)),
])
func durationsParse(_ text: String, _ expected: Duration) throws {
    #expect(try DurationSyntax.parse(text) == expected)
}

@Test(arguments: [
    ("", "found an empty value"),
    ("30", "`30` has no unit"),
    ("0s", "greater than zero"),
    ("0h0m", "greater than zero"),
    ("-5s", "found `-5s`"),
    ("1.5s", "found `1.5s`"),
    ("5 s", "found `5 s`"),
    ("5d", "unknown unit `d`"),
    ("30s1m", "from largest to smallest"),
    ("1s1s", "from largest to smallest"),
    ("1m30", "found `1m30`"),
    ("99999999999999999999h", "too long"),
    ("9999999999999999h", "too long"),
])
func badDurationsAreExplained(_ text: String, _ phrase: String) {
    #expect {
        _ = try DurationSyntax.parse(text)
    } throws: { error in
        (error as! ValueProblem).message.contains(phrase)
    }
}

@Test(arguments: [
    ("0", Int64(0)),
    ("1048576", 1_048_576),
    ("10KiB", 10_240),
    ("5MiB", 5 << 20),
    ("2GiB", 2 << 30),
    ("1TiB", 1 << 40),
    ("1KB", 1_000),
    ("3MB", 3_000_000),
    ("1GB", 1_000_000_000),
    ("7 mib", 7 << 20),
    ("12B", 12),
])
func byteCountsParse(_ text: String, _ expected: Int64) throws {
    #expect(try ByteCountSyntax.parse(text) == expected)
}

@Test(arguments: [
    ("", "found ``"),
    ("-1", "a negative number"),
    ("1.5MiB", "found `1.5MiB`"),
    ("MiB", "found `MiB`"),
    ("5k", "ambiguous"),
    ("10 furlongs", "found `10 furlongs`"),
    ("9999999TiB", "too large"),
    ("99999999999999999999", "too large"),
])
func badByteCountsAreExplained(_ text: String, _ phrase: String) {
    #expect {
        _ = try ByteCountSyntax.parse(text)
    } throws: { error in
        (error as! ValueProblem).message.contains(phrase)
    }
}

@Test func sha256IsLowercasedAndChecked() throws {
    let upper = String(repeating: "AB", count: 32)
    #expect(try DigestSyntax.parse(upper, .sha256) == String(repeating: "ab", count: 32))
    #expect(throws: ValueProblem("expected 64 hexadecimal digits, found 65 characters")) {
        try DigestSyntax.parse(upper + "a", .sha256)
    }
    #expect(throws: ValueProblem("expected 64 hexadecimal digits, found `é` at position 64, which is not a hexadecimal digit")) {
        try DigestSyntax.parse(String(repeating: "a", count: 63) + "é", .sha256)
    }
}

@Test(arguments: [
    // 64 bytes, but fewer characters: counted as characters, as the message says.
    (String(repeating: "a", count: 62) + "é", "found 63 characters"),
    (String(repeating: "a", count: 62) + "\r\n", "found 63 characters"),
    // 64 characters, but not all ASCII hexadecimal digits.
    (String(repeating: "ａ", count: 64), "found `ａ` at position 1"),
    (String(repeating: "a", count: 63) + "g", "found `g` at position 64"),
    (String(repeating: "0", count: 32) + " " + String(repeating: "0", count: 31), "found ` ` at position 33"),
    ("", "found 0 characters"),
])
func badSHA256PinsAreExplained(_ text: String, _ phrase: String) {
    #expect {
        _ = try DigestSyntax.parse(text, .sha256)
    } throws: { error in
        (error as! ValueProblem).message.contains(phrase)
    }
}

@Test func sha256AcceptsEveryHexDigitInEitherCase() throws {
    let digits = "0123456789abcdefABCDEF"
    let pin = String(repeating: digits, count: 3).prefix(64)
    #expect(try DigestSyntax.parse(String(pin), .sha256) == pin.lowercased())
}

@Test(arguments: [
    ("sah256", "sha256"),
    ("concurency", "concurrency"),
    ("URL", "url"),
    ("dst", "dest"),
    ("mirror", "mirrors"),
    ("maxsize", "max_size"),
    ("allowfile", "allow_file"),
    ("colour", nil),
    ("x", nil),
] as [(String, String?)])
func keySuggestions(_ typed: String, _ expected: String?) {
    let keys = ManifestSection.entry.allowedKeys + ManifestSection.topLevel.allowedKeys
    #expect(KeySuggestion.closest(to: typed, among: keys) == expected)
}

@Test(arguments: [
    ("a", "a"),
    ("./a//b/./c", "a/b/c"),
    ("dir/.mirror", "dir/.mirror"),
    (".mirrors/x", ".mirrors/x"),
    ("a..b/..c", "a..b/..c"),
    ("a/b/c.bin", "a/b/c.bin"),
    ("a/./b", "a/b"),
    ("a//b", "a/b"),
    ("./a", "a"),
    ("x/.mirror-trashy/y", "x/.mirror-trashy/y"),
    ("é/\u{301}x", "é/\u{301}x"),
    (String(repeating: "n", count: 255), String(repeating: "n", count: 255)),
])
func destinationsNormalise(_ text: String, _ expected: String) throws {
    #expect(try DestinationPath.normalised(text) == expected)
}

@Test(arguments: [
    ("", "found an empty value"),
    ("/a", "absolute path"),
    ("//a", "absolute path"),
    ("a/", "names a directory"),
    ("..", "`..` component"),
    ("a/./../b", "`..` component"),
    // A combining mark after "/" makes one Character of the two, but the kernel still reads
    // "/" and "..": these must not pass as one harmless name.
    ("../\u{301}x", "`..` component"),
    ("a/../../\u{301}x", "`..` component"),
    ("/\u{301}x", "absolute path"),
    ("a/\u{301}/", "names a directory"),
    (".", "does not name a file"),
    (".mirror", "reserved for mirror's own state"),
    (".mirror/x", "reserved for mirror's own state"),
    ("x/.mirror-trash/y", "reserved for the files `--prune` is deleting"),
    (".mirror-trash", "reserved for the files `--prune` is deleting"),
    ("a/..", "`..` component"),
    ("a/b/" + String(repeating: "n", count: 256), "limited to 255 bytes"),
    ("./.mirror/state.sqlite", "reserved for mirror's own state"),
    ("a\0b", "NUL"),
    (String(repeating: "n", count: 256), "limited to 255 bytes"),
])
func badDestinationsAreExplained(_ text: String, _ phrase: String) {
    #expect {
        _ = try DestinationPath.normalised(text)
    } throws: { error in
        (error as! ValueProblem).message.contains(phrase)
    }
}

@Test(arguments: [
    ("/a/b/../c/./d/", "/x", "/a/c/d"),
    ("rel/../../up", "/x/y", "/x/up"),
    ("..", "/", "/"),
    (".", "/base", "/base"),
    ("a//b", "/base/", "/base/a/b"),
])
func pathsAreNormalisedLexically(_ path: String, _ base: String, _ expected: String) {
    #expect(LexicalPath.absolute(path, relativeTo: base) == expected)
}

@Test func directoryOfAPath() {
    #expect(LexicalPath.directory(of: "/a/b/m.yaml") == "/a/b")
    #expect(LexicalPath.directory(of: "/m.yaml") == "/")
}

@Test(arguments: [
    ("https://example.org/a/b.tar.gz", "b.tar.gz"),
    ("https://example.org/a%20b", "a b"),
    ("ftp://example.org/pub/x.iso;type=i", "x.iso;type=i"),
    ("https://example.org/dl?file=x.zip", "dl"),
])
func defaultFileNameIsTheLastPathSegment(_ url: String, _ expected: String) throws {
    let components = try URLRules.check(url, display: url, variables: [], role: .download(allowFile: false))
    #expect(try URLRules.fileName(fromPercentEncodedPath: components.percentEncodedPath) == expected)
}

@Test(arguments: [
    ("https://example.org/x", URLRules.Role.download(allowFile: false)),
    ("HTTP://Example.org/x", .download(allowFile: false)),
    ("ftps://example.org/x", .download(allowFile: false)),
    ("file:///x", .download(allowFile: true)),
    ("file://localhost/x", .download(allowFile: true)),
    ("https://[::1]:8443/x", .probe),
])
func acceptedURLs(_ url: String, _ role: URLRules.Role) throws {
    _ = try URLRules.check(url, display: url, variables: [], role: role)
}

@Test func fileURLsMustBeLocal() {
    #expect(throws: ValueProblem("file URL names the host `server`; only local files (file:///path) can be read")) {
        try URLRules.check("file://server/x", display: "file://server/x", variables: [], role: .download(allowFile: true))
    }
}

@Test func headerNames() throws {
    try HeaderRules.checkName("X-Api-Key")
    try HeaderRules.checkName("Authorization")
    try HeaderRules.checkName("x!#$%&'*+-.^_`|~1")
    for reserved in ["Range", "if-range", "If-None-Match", "IF-MODIFIED-SINCE", "ACCEPT-ENCODING", "Host", "Content-Length"] {
        #expect(throws: ValueProblem.self) { try HeaderRules.checkName(reserved) }
    }
    #expect(throws: ValueProblem("header name `X:Y` is not a valid HTTP token: `:` at position 2 is not allowed")) {
        try HeaderRules.checkName("X:Y")
    }
}

@Test func overridesMergeHeadersByNameAndReplaceTheRest() {
    let base = TransferSettings(
        retries: 5, timeout: .seconds(30),
        headers: [HTTPHeader(name: "Authorization", value: "a"), HTTPHeader(name: "X-One", value: "1")],
        insecure: false, maxSize: 100)
    let overrides = TransferOverrides(
        retries: 0, timeout: nil,
        headers: [HTTPHeader(name: "x-one", value: "one"), HTTPHeader(name: "X-Two", value: "2")],
        insecure: true, maxSize: nil)
    #expect(overrides.applied(to: base) == TransferSettings(
        retries: 0, timeout: .seconds(30),
        headers: [
            HTTPHeader(name: "Authorization", value: "a"),
            HTTPHeader(name: "x-one", value: "one"),
            HTTPHeader(name: "X-Two", value: "2"),
        ],
        insecure: true, maxSize: 100))
    #expect(TransferOverrides().applied(to: base) == base)
}

@Test func destinationConflicts() {
    func claim(_ dest: String, _ url: String, line: Int, sha256: String? = nil) -> DestinationClaim {
        DestinationClaim(dest: dest, url: url, digest: sha256, size: nil, line: line)
    }
    let outcome = DestinationConflicts.check([
        claim("a", "u1", line: 1),
        claim("b/c", "u2", line: 2),
        claim("a", "u1", line: 3),          // same download again: dropped
        claim("a", "u9", line: 4),          // same dest, other url
        claim("a/x", "u3", line: 5),        // a is a file
        claim("b", "u4", line: 6),          // b is a directory
        claim("a.part", "u5", line: 7),     // a's partial file
        claim("b/c.part/d", "u6", line: 8), // b/c's partial file as a directory
        claim("b/d", "u7", line: 9),
        claim("a", "u1", line: 10, sha256: "ff"),
    ])
    #expect(outcome.kept == [0, 1, 8])
    #expect(outcome.problems.map(\.index) == [3, 4, 5, 6, 7, 9])
    #expect(outcome.problems.allSatisfy { $0.message.contains("line 1") || $0.message.contains("line 2") })
}

/// Flow nesting past the depth limit is refused while libyaml parses, not after: 100k nested
/// `[` (200 KB) took 41 s and 200k unclosed ones 208 s, ending in a syntax error, because
/// libyaml's scanner costs time in proportion to the open levels for every token. The parser now
/// stops a bounded stretch of text past the limit, however long the rest is.
@Test func deepFlowNestingIsRefusedAsItIsRead() throws {
    let unclosed = "version: 1\nx: " + String(repeating: "[", count: 20_000) + "\n"
    #expect {
        _ = try ManifestLoader.parse(text: unclosed, path: "m.yaml", baseDirectory: "/", environment: [:])
    } throws: { error in
        "\(error)" == "m.yaml:2:68: YAML nested more than 64 levels deep; a manifest needs only a few"
    }

    let bytes = Array(("version: 1\nx: " + String(repeating: "[", count: 4_000_000)).utf8)
    let (message, taken) = bytes.withUnsafeBufferPointer { buffer -> (String, Int) in
        do {
            var reader = try YAMLEventReader(input: buffer, file: "m.yaml")
            do {
                _ = try YAMLDocumentParser.parse(&reader, file: "m.yaml")
                return ("parsed", reader.bytesTaken)
            } catch {
                return ("\(error)", reader.bytesTaken)
            }
        } catch {
            return ("\(error)", 0)
        }
    }
    #expect(message.contains("m.yaml:2:68: YAML nested more than 64 levels deep"))
    #expect(taken > 0 && taken <= 64 << 10, "libyaml took \(taken) of \(bytes.count) bytes before the refusal")
}
