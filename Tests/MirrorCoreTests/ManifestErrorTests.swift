import Foundation
import Testing
@testable import MirrorCore

/// A manifest with one mistake, and the diagnostic it must produce.
struct BadManifest: Sendable, CustomTestStringConvertible {
    var name: String
    var text: String
    /// `file:line:column` of the diagnostic.
    var location: String
    var key: String?
    /// Part of the message the user needs to see.
    var phrase: String
    /// How many diagnostics the manifest produces in all.
    var count = 1

    var testDescription: String { name }
}

private let environment = ["HOST": "example.org", "MULTILINE": "a\r\nX-Injected: 1"]

private let validEntry = """
    version: 1
    files:
      - url: https://example.org/a
    """

let badManifests: [BadManifest] = [
    // Structure
    BadManifest(name: "empty file", text: "", location: "m.yaml:1:1", key: nil, phrase: "the manifest is empty"),
    BadManifest(name: "only comments", text: "# nothing\n\n", location: "m.yaml:1:1", key: nil, phrase: "the manifest is empty"),
    BadManifest(name: "top level is a sequence", text: "- url: https://example.org/a\n", location: "m.yaml:1:1", key: nil,
                phrase: "expected a mapping at the top level, starting with `version: 1`; found a sequence"),
    BadManifest(name: "top level is a scalar", text: "hello\n", location: "m.yaml:1:1", key: nil,
                phrase: "expected a mapping at the top level, starting with `version: 1`; found `hello`"),
    BadManifest(name: "YAML syntax error", text: "version: 1\nfiles:\n  - url: [https://example.org/a\n", location: "m.yaml:4:1", key: nil,
                phrase: "invalid YAML: did not find expected ',' or ']' (while parsing a flow sequence at line 3, column 10)"),
    BadManifest(name: "bad indentation", text: "version: 1\n files:\n", location: "m.yaml:2:7", key: nil,
                phrase: "invalid YAML: mapping values are not allowed in this context"),
    BadManifest(name: "tab character", text: "version: 1\nfiles:\n\t- url: x\n", location: "m.yaml:3:1", key: nil,
                phrase: "invalid YAML: found character that cannot start any token"),
    BadManifest(name: "second document", text: validEntry + "\n---\nversion: 1\n", location: "m.yaml:5:1", key: nil,
                phrase: "a second YAML document starts here"),
    BadManifest(name: "duplicate key", text: "version: 1\nversion: 1\nfiles:\n  - url: https://example.org/a\n", location: "m.yaml:2:1",
                key: "version", phrase: "duplicate key `version`; it is already set at line 1"),
    BadManifest(name: "duplicate key in an entry", text: validEntry + "\n    url: https://example.org/b\n", location: "m.yaml:4:5",
                key: "files[0].url", phrase: "duplicate key `url`; it is already set at line 3"),
    // A repeated key is named as a repeat of the first, whether the first was kept or refused,
    // in a small mapping (searched) and a large one (a dictionary).
    BadManifest(name: "unknown key repeated in an entry", text: validEntry + "\n    colour: red\n    colour: blue\n",
                location: "m.yaml:5:5", key: "files[0].colour", phrase: "duplicate key `colour`; it is already set at line 4", count: 2),
    BadManifest(name: "duplicate key in a large mapping",
                text: "version: 1\nhosts:\n  example.org:\n    headers:\n"
                    + (1...20).map { "      X-H\($0): v\n" }.joined() + "      X-H3: w\n"
                    + "files:\n  - url: https://example.org/a\n",
                location: "m.yaml:25:7", key: "hosts.example.org.headers.X-H3", phrase: "duplicate key `X-H3`; it is already set at line 7"),
    BadManifest(name: "non-scalar key", text: "version: 1\n? [a, b]\n: c\nfiles:\n  - url: https://example.org/a\n", location: "m.yaml:2:3",
                key: nil, phrase: "a mapping key must be a plain name, found a sequence"),
    BadManifest(name: "unsupported tag", text: "version: 1\nfiles:\n  - url: !env URL\n", location: "m.yaml:3:10", key: nil,
                phrase: "YAML tag `!env` is not supported"),
    BadManifest(name: "alias that contains itself", text: "version: 1\nfiles: &loop\n  - *loop\n", location: "m.yaml:2:8", key: nil,
                phrase: "this node contains an alias to itself"),

    // Keys
    BadManifest(name: "typo in entry key", text: validEntry + "\n    sah256: abc\n", location: "m.yaml:4:5",
                key: "files[0].sah256", phrase: "unknown key `sah256`; did you mean `sha256`?"),
    BadManifest(name: "typo in top-level key", text: "version: 1\nconcurency: 4\nfiles:\n  - url: https://example.org/a\n",
                location: "m.yaml:2:1", key: "concurency", phrase: "unknown key `concurency`; did you mean `concurrency`?"),
    BadManifest(name: "typo in defaults key", text: "version: 1\ndefaults:\n  timeuot: 5s\nfiles:\n  - url: https://example.org/a\n",
                location: "m.yaml:3:3", key: "defaults.timeuot", phrase: "did you mean `timeout`?"),
    BadManifest(name: "unknown key far from any", text: "version: 1\ncolour: red\nfiles:\n  - url: https://example.org/a\n",
                location: "m.yaml:2:1", key: "colour",
                phrase: "unknown key `colour` in the top level; allowed keys are `version`, `root`, `state_dir`, `cache`, `cache_place`, `cache_max_size`, `cache_max_age`, `concurrency`, `defaults`, `connectivity`, `allow_file`, `prune`, `rate_limit`, `segment_min`, `hosts`, `rewrite`, `files`"),
    BadManifest(name: "cache_place of another kind", text: "version: 1\ncache_place: symlink\nfiles:\n  - url: https://example.org/a\n",
                location: "m.yaml:2:14", key: "cache_place", phrase: "expected `copy` or `hardlink`; found"),
    BadManifest(name: "transfer key at the top level", text: "version: 1\ntimeout: 30s\nfiles:\n  - url: https://example.org/a\n",
                location: "m.yaml:2:1", key: "timeout", phrase: "`timeout` is not allowed in the top level; it belongs in `defaults` (or in an entry)"),
    BadManifest(name: "entry key at the top level", text: "version: 1\nsha256: abc\nfiles:\n  - url: https://example.org/a\n",
                location: "m.yaml:2:1", key: "sha256", phrase: "it belongs in an entry of `files`"),
    BadManifest(name: "missing version", text: "files:\n  - url: https://example.org/a\n", location: "m.yaml:1:1", key: nil,
                phrase: "missing required key `version`; add `version: 1`"),
    BadManifest(name: "version 2", text: "version: 2\nfiles: whatever\nnew_key: 1\n", location: "m.yaml:1:10", key: "version",
                phrase: "unsupported manifest version 2; this mirror reads version 1"),
    BadManifest(name: "version quoted", text: "version: \"1\"\nfiles:\n  - url: https://example.org/a\n", location: "m.yaml:1:10", key: "version",
                phrase: "expected the integer 1, found the quoted string \"1\"; write the number without quotes"),
    BadManifest(name: "missing files", text: "version: 1\n", location: "m.yaml:1:1", key: nil, phrase: "missing required key `files`"),
    BadManifest(name: "empty files", text: "version: 1\nfiles: []\n", location: "m.yaml:2:8", key: "files",
                phrase: "`files` is empty; list at least one entry"),
    BadManifest(name: "files is a mapping", text: "version: 1\nfiles:\n  url: https://example.org/a\n", location: "m.yaml:3:3", key: "files",
                phrase: "expected a sequence of entries (each `- url: …`), found a mapping"),
    BadManifest(name: "entry is a bare URL", text: "version: 1\nfiles:\n  - https://example.org/a\n", location: "m.yaml:3:5", key: "files[0]",
                phrase: "write each entry as `- url: …`"),
    BadManifest(name: "entry without url", text: "version: 1\nfiles:\n  - dest: a\n", location: "m.yaml:3:5", key: "files[0]",
                phrase: "missing required key `url`"),

    // Types
    BadManifest(name: "concurrency zero", text: "version: 1\nconcurrency: 0\nfiles:\n  - url: https://example.org/a\n", location: "m.yaml:2:14",
                key: "concurrency", phrase: "expected an integer from 1 to 64, found 0"),
    BadManifest(name: "concurrency fraction", text: "version: 1\nconcurrency: 1.5\nfiles:\n  - url: https://example.org/a\n", location: "m.yaml:2:14",
                key: "concurrency", phrase: "expected an integer from 1 to 64, found `1.5`"),
    BadManifest(name: "concurrency in fullwidth digits", text: "version: 1\nconcurrency: ４\nfiles:\n  - url: https://example.org/a\n", location: "m.yaml:2:14",
                key: "concurrency", phrase: "expected an integer from 1 to 64, found `４`"),
    BadManifest(name: "concurrency of signs", text: "version: 1\nconcurrency: +-\nfiles:\n  - url: https://example.org/a\n", location: "m.yaml:2:14",
                key: "concurrency", phrase: "expected an integer from 1 to 64, found `+-`"),
    BadManifest(name: "size with a combining mark", text: validEntry + "\n    size: 5\u{301}\n", location: "m.yaml:4:11",
                key: "files[0].size", phrase: "expected a size in bytes (an integer of 0 or more), found `5\u{301}`"),
    BadManifest(name: "retries not a number", text: "version: 1\ndefaults:\n  retries: \"abc\"\nfiles:\n  - url: https://example.org/a\n",
                location: "m.yaml:3:12", key: "defaults.retries", phrase: "expected an integer from 0 to 100, found the quoted string \"abc\""),
    BadManifest(name: "retries negative", text: validEntry + "\n    retries: -1\n", location: "m.yaml:4:14",
                key: "files[0].retries", phrase: "expected an integer from 0 to 100, found -1"),
    BadManifest(name: "size negative", text: validEntry + "\n    size: -5\n", location: "m.yaml:4:11",
                key: "files[0].size", phrase: "expected a size in bytes (an integer of 0 or more), found -5"),
    BadManifest(name: "size with a unit", text: validEntry + "\n    size: 5MiB\n", location: "m.yaml:4:11",
                key: "files[0].size", phrase: "expected a size in bytes (an integer of 0 or more), found `5MiB`"),
    BadManifest(name: "max_size unknown unit", text: validEntry + "\n    max_size: 5 parsecs\n", location: "m.yaml:4:15",
                key: "files[0].max_size", phrase: "expected a size like 1048576, 10KiB, 5MiB, 2GiB or 1GB, found `5 parsecs`"),
    BadManifest(name: "max_size ambiguous unit", text: validEntry + "\n    max_size: 5M\n", location: "m.yaml:4:15",
                key: "files[0].max_size", phrase: "unit `M` in `5M` is ambiguous; write MiB (powers of 1024) or MB (powers of 1000)"),
    BadManifest(name: "size over max_size", text: validEntry + "\n    size: 2048\n    max_size: 1KiB\n", location: "m.yaml:4:11",
                key: "files[0].size", phrase: "size 2048 is larger than max_size 1024"),
    BadManifest(name: "yes is not a boolean", text: "version: 1\nallow_file: yes\nfiles:\n  - url: https://example.org/a\n",
                location: "m.yaml:2:13", key: "allow_file", phrase: "expected true or false, found `yes`; write `true`"),
    BadManifest(name: "quoted boolean", text: validEntry + "\n    insecure: \"false\"\n", location: "m.yaml:4:15",
                key: "files[0].insecure", phrase: "expected true or false, found the quoted string \"false\"; write `false`"),
    BadManifest(name: "ftp_tls misspelt value", text: validEntry + "\n    ftp_tls: requried\n", location: "m.yaml:4:14",
                key: "files[0].ftp_tls", phrase: "expected one of `no`, `try`, `required`, found `requried`; did you mean `required`?"),
    BadManifest(name: "ftp_tls as a boolean", text: validEntry + "\n    ftp_tls: true\n", location: "m.yaml:4:14",
                key: "files[0].ftp_tls", phrase: "expected one of `no`, `try`, `required`, found `true`; write `required`"),
    BadManifest(name: "ftp_tls key misspelt", text: "version: 1\ndefaults:\n  ftp_tsl: required\nfiles:\n  - url: ftp://example.org/a\n",
                location: "m.yaml:3:3", key: "defaults.ftp_tsl", phrase: "unknown key `ftp_tsl`; did you mean `ftp_tls`?"),
    BadManifest(name: "root empty", text: "version: 1\nroot:\nfiles:\n  - url: https://example.org/a\n", location: "m.yaml:2:6",
                key: "root", phrase: "expected a directory path, found an empty value"),
    BadManifest(name: "defaults not a mapping", text: "version: 1\ndefaults: 5\nfiles:\n  - url: https://example.org/a\n",
                location: "m.yaml:2:11", key: "defaults", phrase: "expected a mapping, found `5`"),
    BadManifest(name: "mirrors not a sequence", text: validEntry + "\n    mirrors: https://example.net/a\n", location: "m.yaml:4:14",
                key: "files[0].mirrors", phrase: "expected a sequence of URLs, like `mirrors: [https://…]`"),

    // Durations
    BadManifest(name: "duration without unit", text: "version: 1\ndefaults:\n  timeout: 30\nfiles:\n  - url: https://example.org/a\n",
                location: "m.yaml:3:12", key: "defaults.timeout", phrase: "`30` has no unit; write `30s` for seconds"),
    BadManifest(name: "duration with unknown unit", text: validEntry + "\n    timeout: 5 minutes\n", location: "m.yaml:4:14",
                key: "files[0].timeout", phrase: "expected a duration like 500ms, 30s, 5m, 1h or 1m30s, found `5 minutes`"),
    BadManifest(name: "duration zero", text: "version: 1\nconnectivity:\n  wait: 0s\nfiles:\n  - url: https://example.org/a\n",
                location: "m.yaml:3:9", key: "connectivity.wait", phrase: "expected a duration greater than zero, found `0s`"),
    BadManifest(name: "duration fraction", text: validEntry + "\n    timeout: 1.5s\n", location: "m.yaml:4:14",
                key: "files[0].timeout", phrase: "found `1.5s`"),

    // sha256
    BadManifest(name: "sha256 too short", text: validEntry + "\n    sha256: " + String(repeating: "a", count: 63) + "\n", location: "m.yaml:4:13",
                key: "files[0].sha256", phrase: "expected 64 hexadecimal digits, found 63 characters"),
    BadManifest(name: "sha256 not hex", text: validEntry + "\n    sha256: " + String(repeating: "a", count: 10) + "g" + String(repeating: "a", count: 53) + "\n",
                location: "m.yaml:4:13", key: "files[0].sha256", phrase: "found `g` at position 11, which is not a hexadecimal digit"),

    // Variables
    BadManifest(name: "unset variable in url", text: "version: 1\nfiles:\n  - url: https://${NOPE}/a\n    dest: a\n", location: "m.yaml:3:10",
                key: "files[0].url", phrase: "environment variable `NOPE` is not set (referenced as ${NOPE})"),
    BadManifest(name: "unset variable in header", text: "version: 1\ndefaults:\n  headers:\n    Authorization: Bearer ${TOKEN}\nfiles:\n  - url: https://example.org/a\n",
                location: "m.yaml:4:20", key: "defaults.headers.Authorization", phrase: "environment variable `TOKEN` is not set"),
    BadManifest(name: "unset variable in probe", text: "version: 1\nconnectivity:\n  probe: https://${PROBE}/\nfiles:\n  - url: https://example.org/a\n",
                location: "m.yaml:3:10", key: "connectivity.probe", phrase: "environment variable `PROBE` is not set"),
    BadManifest(name: "unset variable in a mirror", text: validEntry + "\n    mirrors: [https://example.net/a, \"https://${MIRROR}/a\"]\n",
                location: "m.yaml:4:38", key: "files[0].mirrors[1]", phrase: "environment variable `MIRROR` is not set"),

    // Destinations
    BadManifest(name: "absolute dest", text: validEntry + "\n    dest: /etc/passwd\n", location: "m.yaml:4:11",
                key: "files[0].dest", phrase: "`/etc/passwd` is an absolute path; give a path relative to root, like `etc/passwd`"),
    BadManifest(name: "dest climbing out", text: validEntry + "\n    dest: ../x\n", location: "m.yaml:4:11",
                key: "files[0].dest", phrase: "`../x` contains a `..` component; a dest must stay inside root"),
    BadManifest(name: "dest climbing out midway", text: validEntry + "\n    dest: a/../../x\n", location: "m.yaml:4:11",
                key: "files[0].dest", phrase: "contains a `..` component"),
    BadManifest(name: "dest climbing out behind a combining mark", text: validEntry + "\n    dest: \"../\\u0301x\"\n", location: "m.yaml:4:11",
                key: "files[0].dest", phrase: "contains a `..` component; a dest must stay inside root"),
    BadManifest(name: "file name from url climbing out behind a combining mark",
                text: "version: 1\nfiles:\n  - url: https://example.org/a/..%2F%CC%81x\n", location: "m.yaml:3:10",
                key: "files[0].url", phrase: "decodes to a name containing `/`"),
    BadManifest(name: "dest in .mirror", text: validEntry + "\n    dest: ./.mirror/x\n", location: "m.yaml:4:11",
                key: "files[0].dest", phrase: "is inside `.mirror`, which is reserved for mirror's own state"),
    BadManifest(name: "dest naming a directory", text: validEntry + "\n    dest: a/\n", location: "m.yaml:4:11",
                key: "files[0].dest", phrase: "`a/` ends with `/` and so names a directory"),
    BadManifest(name: "dest of dots", text: validEntry + "\n    dest: ./.\n", location: "m.yaml:4:11",
                key: "files[0].dest", phrase: "`./.` does not name a file"),
    BadManifest(name: "dest with NUL", text: validEntry + "\n    dest: \"a\\0b\"\n", location: "m.yaml:4:11",
                key: "files[0].dest", phrase: "contains a NUL character"),
    BadManifest(name: "url ending in a slash", text: "version: 1\nfiles:\n  - url: https://example.org/dir/\n", location: "m.yaml:3:10",
                key: "files[0].url", phrase: "cannot derive a file name from url (its path ends with `/`); set dest"),
    BadManifest(name: "url with no path", text: "version: 1\nfiles:\n  - url: https://example.org\n", location: "m.yaml:3:10",
                key: "files[0].url", phrase: "cannot derive a file name from url (it has no path); set dest"),
    BadManifest(name: "file name from url is ..", text: "version: 1\nfiles:\n  - url: https://example.org/a/%2E%2E\n", location: "m.yaml:3:10",
                key: "files[0].url", phrase: "the file name taken from url cannot be a dest: `..` contains a `..` component"),
    BadManifest(name: "file name from a variable", text: "version: 1\nfiles:\n  - url: https://example.org/a/${HOST}\n", location: "m.yaml:3:10",
                key: "files[0].url", phrase: "the file name at the end of url comes from a ${VAR}, whose value must not be printed; set dest"),
    BadManifest(name: "file name partly from a variable", text: "version: 1\nfiles:\n  - url: https://example.org/a/x-${HOST}.bin?v=1\n",
                location: "m.yaml:3:10", key: "files[0].url", phrase: "comes from a ${VAR}"),
    BadManifest(name: "file name from a variable, userinfo redacted", text: "version: 1\nfiles:\n  - url: https://u:p@${HOST}/${HOST}\n",
                location: "m.yaml:3:10", key: "files[0].url", phrase: "comes from a ${VAR}"),
    BadManifest(name: "same dest, different url", text: validEntry + "\n  - url: https://example.org/b\n    dest: a\n", location: "m.yaml:5:11",
                key: "files[1].dest", phrase: "`a` is already the dest of the entry at line 3, which has a different url"),
    BadManifest(name: "same url and dest, different sha256", text: validEntry + "\n    sha256: " + String(repeating: "a", count: 64) + "\n  - url: https://example.org/a\n",
                location: "m.yaml:5:10", key: "files[1].url", phrase: "repeats the entry at line 3 (same url and dest) with a different sha256"),
    BadManifest(name: "sha256 and sha512 both pinned", text: validEntry + "\n    sha256: " + String(repeating: "a", count: 64) + "\n    sha512: " + String(repeating: "b", count: 128) + "\n",
                location: "m.yaml:5:13", key: "files[0].sha512", phrase: "an entry pins one digest: `sha256` or `sha512`, not both"),
    BadManifest(name: "sha512 of the wrong length", text: validEntry + "\n    sha512: " + String(repeating: "a", count: 64) + "\n",
                location: "m.yaml:4:13", key: "files[0].sha512", phrase: "expected 128 hexadecimal digits, found 64 characters"),
    BadManifest(name: "checksums not a URL", text: "version: 1\ndefaults:\n  checksums: SHA256SUMS\nfiles:\n  - url: https://example.org/a\n",
                location: "m.yaml:3:14", key: "defaults.checksums", phrase: "`SHA256SUMS` has no scheme"),
    BadManifest(name: "checksums of a file URL", text: validEntry + "\n    checksums: file:///srv/SHA256SUMS\n",
                location: "m.yaml:4:16", key: "files[0].checksums", phrase: "unsupported scheme `file` for a checksum file"),
    BadManifest(name: "checksum_name without checksums", text: validEntry + "\n    checksum_name: a.iso\n",
                location: "m.yaml:4:20", key: "files[0].checksum_name", phrase: "the entry has no `checksums`"),
    BadManifest(name: "file then directory", text: validEntry + "\n  - url: https://example.org/b\n    dest: a/b\n", location: "m.yaml:5:11",
                key: "files[1].dest", phrase: "`a/b` needs `a` to be a directory, but the entry at line 3 downloads `a` as a file"),
    BadManifest(name: "directory then file", text: "version: 1\nfiles:\n  - url: https://example.org/b\n    dest: a/b\n  - url: https://example.org/a\n",
                location: "m.yaml:5:10", key: "files[1].url", phrase: "`a` is a directory on the way to `a/b` (entry at line 3); it cannot also be a file"),
    BadManifest(name: "dest is another's partial file", text: "version: 1\nfiles:\n  - url: https://example.org/x\n  - url: https://example.org/y\n    dest: x.part\n",
                location: "m.yaml:5:11", key: "files[1].dest", phrase: "`x.part` is where the entry at line 3 keeps the partial download of `x`"),
    BadManifest(name: "dest is another's partial file behind a joining character",
                text: "version: 1\nfiles:\n  - url: https://example.org/x\n    dest: \"x\\u0600\"\n  - url: https://example.org/y\n    dest: \"x\\u0600.part\"\n",
                location: "m.yaml:6:11", key: "files[1].dest", phrase: "keeps the partial download of `x\u{600}`"),
    BadManifest(name: "partial file is another's dest", text: "version: 1\nfiles:\n  - url: https://example.org/x.part\n  - url: https://example.org/x\n",
                location: "m.yaml:4:10", key: "files[1].url", phrase: "the partial download of `x` goes to `x.part`, which collides with the dest `x.part` of the entry at line 3"),

    // URLs
    BadManifest(name: "unsupported scheme", text: "version: 1\nfiles:\n  - url: gopher://example.org/a\n", location: "m.yaml:3:10",
                key: "files[0].url", phrase: "unsupported scheme `gopher`; mirror downloads http, https, ftp and ftps URLs"),
    BadManifest(name: "file URL without allow_file", text: "version: 1\nfiles:\n  - url: file:///etc/hosts\n", location: "m.yaml:3:10",
                key: "files[0].url", phrase: "file URLs are refused unless the manifest sets `allow_file: true` at the top level"),
    BadManifest(name: "file URL as a probe", text: "version: 1\nallow_file: true\nconnectivity:\n  probe: file:///x\nfiles:\n  - url: https://example.org/a\n",
                location: "m.yaml:4:10", key: "connectivity.probe", phrase: "unsupported scheme `file` for a connectivity probe"),
    BadManifest(name: "URL without scheme", text: "version: 1\nfiles:\n  - url: example.org/a\n", location: "m.yaml:3:10",
                key: "files[0].url", phrase: "`example.org/a` has no scheme; write it in full, like `https://example.org/a`"),
    BadManifest(name: "URL without host", text: "version: 1\nfiles:\n  - url: https:///a\n", location: "m.yaml:3:10",
                key: "files[0].url", phrase: "`https` URL has no host"),
    BadManifest(name: "URL with a space", text: "version: 1\nfiles:\n  - url: https://example.org/a b\n", location: "m.yaml:3:10",
                key: "files[0].url", phrase: "`https://example.org/a b` is not a valid URL: a space must be percent-encoded"),
    BadManifest(name: "URL made invalid by a variable, userinfo redacted", text: "version: 1\nfiles:\n  - url: https://me:${MULTILINE}@example.org/a\n",
                location: "m.yaml:3:10", key: "files[0].url", phrase: "not a valid URL after expanding ${MULTILINE}"),
    BadManifest(name: "port out of range", text: "version: 1\nfiles:\n  - url: https://example.org:70000/a\n", location: "m.yaml:3:10",
                key: "files[0].url", phrase: "port 70000 is out of range"),

    // Headers
    BadManifest(name: "forbidden header", text: "version: 1\ndefaults:\n  headers:\n    Range: bytes=0-\nfiles:\n  - url: https://example.org/a\n",
                location: "m.yaml:4:5", key: "defaults.headers.Range", phrase: "header `Range` cannot be set in a manifest: mirror sets Range itself"),
    BadManifest(name: "forbidden header in any case", text: validEntry + "\n    headers:\n      accept-encoding: gzip\n", location: "m.yaml:5:7",
                key: "files[0].headers.accept-encoding", phrase: "mirror sends none and saves the bytes as the server sends them"),
    BadManifest(name: "header name not a token", text: validEntry + "\n    headers:\n      \"X Api\": 1\n", location: "m.yaml:5:7",
                key: "files[0].headers.X Api", phrase: "header name `X Api` is not a valid HTTP token: a space at position 2 is not allowed"),
    BadManifest(name: "header value with a line break", text: validEntry + "\n    headers:\n      X-A: \"1\\r\\nX-B: 2\"\n", location: "m.yaml:5:12",
                key: "files[0].headers.X-A", phrase: "header value contains a line break or NUL; a header value must be a single line"),
    BadManifest(name: "header line break from a variable", text: validEntry + "\n    headers:\n      X-A: ${MULTILINE}\n", location: "m.yaml:5:12",
                key: "files[0].headers.X-A", phrase: "header value contains a line break or NUL after expanding ${MULTILINE}"),
    BadManifest(name: "header set twice in different case", text: validEntry + "\n    headers:\n      X-A: 1\n      x-a: 2\n", location: "m.yaml:6:7",
                key: "files[0].headers.x-a", phrase: "header `x-a` is already set at line 5"),
    BadManifest(name: "header without value", text: validEntry + "\n    headers:\n      X-A:\n", location: "m.yaml:5:11",
                key: "files[0].headers.X-A", phrase: "expected a header value (a string; write \"\" for an empty one), found an empty value"),
    // Bandwidth and hosts
    BadManifest(name: "rate limit without a number", text: "version: 1\nrate_limit: fast\nfiles:\n  - url: https://example.org/a\n",
                location: "m.yaml:2:13", key: "rate_limit", phrase: "expected a rate like 1048576, 512KiB or 5MiB/s (bytes per second) or `off`, found `fast`"),
    BadManifest(name: "rate limit of zero", text: validEntry + "\n    rate_limit: 0\n", location: "m.yaml:4:17",
                key: "files[0].rate_limit", phrase: "a rate of 0 would stop every transfer; write `off` for no limit"),
    BadManifest(name: "timetable out of order", text: "version: 1\nrate_limit: \"19:00,off 08:00,1MiB\"\nfiles:\n  - url: https://example.org/a\n",
                location: "m.yaml:2:13", key: "rate_limit", phrase: "timetable item `08:00,1MiB` is not later than the one before it"),
    BadManifest(name: "timetable time out of range", text: "version: 1\nrate_limit: \"24:00,1MiB\"\nfiles:\n  - url: https://example.org/a\n",
                location: "m.yaml:2:13", key: "rate_limit", phrase: "does not start with a time from 00:00 to 23:59"),
    BadManifest(name: "rate limit in defaults", text: "version: 1\ndefaults:\n  rate_limit: 1MiB\nfiles:\n  - url: https://example.org/a\n",
                location: "m.yaml:3:3", key: "defaults.rate_limit", phrase: "set it at the top level to limit the whole run"),
    BadManifest(name: "host key with a scheme", text: "version: 1\nhosts:\n  https://example.org:\n    concurrency: 1\nfiles:\n  - url: https://example.org/a\n",
                location: "m.yaml:3:3", key: "hosts.https://example.org", phrase: "without scheme, login or path"),
    BadManifest(name: "host key with a bad port", text: "version: 1\nhosts:\n  example.org:99999:\n    concurrency: 1\nfiles:\n  - url: https://example.org/a\n",
                location: "m.yaml:3:3", key: "hosts.example.org:99999", phrase: "the port must be a number from 1 to 65535"),
    BadManifest(name: "host named twice", text: "version: 1\nhosts:\n  example.org:\n    concurrency: 1\n  Example.ORG:\n    concurrency: 2\nfiles:\n  - url: https://example.org/a\n",
                location: "m.yaml:5:3", key: "hosts.Example.ORG", phrase: "host `example.org` is already set at line 3"),
    BadManifest(name: "typo in a host's key", text: "version: 1\nhosts:\n  example.org:\n    concurrancy: 1\nfiles:\n  - url: https://example.org/a\n",
                location: "m.yaml:4:5", key: "hosts.example.org.concurrancy", phrase: "unknown key `concurrancy`; did you mean `concurrency`?"),
    BadManifest(name: "host concurrency out of range", text: "version: 1\nhosts:\n  example.org:\n    concurrency: 0\nfiles:\n  - url: https://example.org/a\n",
                location: "m.yaml:4:18", key: "hosts.example.org.concurrency", phrase: "expected an integer from 1 to 64, found 0"),
    BadManifest(name: "host settings not a mapping", text: "version: 1\nhosts:\n  example.org: 4\nfiles:\n  - url: https://example.org/a\n",
                location: "m.yaml:3:16", key: "hosts.example.org", phrase: "expected a mapping of the host's settings (concurrency, rate_limit, headers)"),
    BadManifest(name: "forbidden header on a host", text: "version: 1\nhosts:\n  example.org:\n    headers:\n      Range: bytes=0-\nfiles:\n  - url: https://example.org/a\n",
                location: "m.yaml:5:7", key: "hosts.example.org.headers.Range", phrase: "header `Range` cannot be set in a manifest"),
]

@Test(arguments: badManifests)
func badManifestIsReported(_ bad: BadManifest) {
    do {
        let manifest = try ManifestLoader.parse(
            text: bad.text, path: "m.yaml", baseDirectory: "/srv", environment: environment, currentDirectory: "/")
        Issue.record("parsed without error: \(manifest.entries.map(\.dest))")
    } catch {
        #expect(error.diagnostics.count == bad.count, "\(error)")
        let match = error.diagnostics.first {
            $0.location?.description == bad.location && $0.key == bad.key && $0.message.contains(bad.phrase)
        }
        #expect(match != nil, "expected \(bad.location): \(bad.key ?? "-"): …\(bad.phrase)…; got:\n\(error)")
        #expect(!error.description.contains("X-Injected"), "a variable's value reached a message")
    }
}

@Test func everyProblemIsReportedInFileOrder() {
    let text = """
        version: 1
        concurrency: 100
        defaults:
          timeout: soon
        files:
          - url: https://example.org/a
            sha256: abc
          - url: gopher://example.org/b
          - url: https://example.org/c
            dest: /c
        """
    #expect {
        _ = try ManifestLoader.parse(text: text, path: "m.yaml", baseDirectory: "/", environment: [:])
    } throws: { error in
        let lines = (error as! ManifestError).description.split(separator: "\n").map { $0.prefix(while: { $0 != " " }) }
        return lines == ["m.yaml:2:14:", "m.yaml:4:12:", "m.yaml:7:13:", "m.yaml:8:10:", "m.yaml:10:11:"]
    }
}

@Test func diagnosticDescriptionJoinsLocationKeyAndMessage() {
    let diagnostic = ManifestDiagnostic(
        location: SourceLocation(file: "assets.yaml", line: 12, column: 5), key: "files[2].sha256",
        message: "expected 64 hexadecimal digits, found 63 characters")
    #expect(diagnostic.description == "assets.yaml:12:5: files[2].sha256: expected 64 hexadecimal digits, found 63 characters")
    let unkeyed = ManifestDiagnostic(location: SourceLocation(file: "a.yaml", line: 1, column: 1), key: nil, message: "invalid YAML")
    #expect(unkeyed.description == "a.yaml:1:1: invalid YAML")
    #expect(ManifestError(diagnostics: [diagnostic, unkeyed]).description == diagnostic.description + "\n" + unkeyed.description)
}

@Test func aliasBombIsRefused() {
    var lines = ["version: 1", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for level in 1...9 {
        let previous = "*a\(level - 1)"
        lines.append("a\(level): &a\(level) [\(Array(repeating: previous, count: 10).joined(separator: ", "))]")
    }
    lines.append("files:\n  - url: https://example.org/a")
    #expect {
        _ = try ManifestLoader.parse(text: lines.joined(separator: "\n"), path: "m.yaml", baseDirectory: "/", environment: [:])
    } throws: { error in
        (error as! ManifestError).description.contains("expands to more than 1000000 YAML nodes")
    }
}

@Test func deepNestingIsRefused() {
    let text = "version: 1\nx: " + String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000) + "\n"
    #expect {
        _ = try ManifestLoader.parse(text: text, path: "m.yaml", baseDirectory: "/", environment: [:])
    } throws: { error in
        (error as! ManifestError).description.contains("nested more than 64 levels deep")
    }
}

@Test func invalidUTF8IsReportedWhereItIs() throws {
    let directory = "/tmp/mirror-manifest-utf8-\(getpid())"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let path = directory + "/m.yaml"
    try Data(Array("version: 1\nfiles:\n  - url: https://example.org/".utf8) + [0xFF] + Array("\n".utf8)).write(to: URL(fileURLWithPath: path))
    #expect {
        _ = try ManifestLoader.load(path: path, environment: [:])
    } throws: { error in
        let diagnostic = (error as! ManifestError).diagnostics[0]
        return diagnostic.location == SourceLocation(file: path, line: 3, column: 30)
            && diagnostic.message.contains("invalid leading UTF-8 octet")
    }
}

/// A variable set to the empty string in a key that names a path: `root: "${R}"` was the
/// manifest's own directory, and `${R}/data` would be `/data`. Every such key refuses it,
/// naming file:line:column, the key and the variable; a `dest` expands no variable at all and
/// refuses any it names (its value would be printed wherever the dest is).
@Test(arguments: [
    ("version: 1\nroot: \"${R}\"\nfiles:\n  - url: https://example.org/a\n", "m.yaml:2:7: root: environment variable `R` is set but empty"),
    ("version: 1\nroot: ${R}/data\nfiles:\n  - url: https://example.org/a\n", "m.yaml:2:7: root: environment variable `R` is set but empty"),
    ("version: 1\nroot: ~/${R}\nfiles:\n  - url: https://example.org/a\n", "m.yaml:2:7: root: environment variable `R` is set but empty"),
    ("version: 1\nroot: ${SET}/${R}\nfiles:\n  - url: https://example.org/a\n", "m.yaml:2:7: root: environment variable `R` is set but empty"),
    ("version: 1\ndefaults:\n  ca_file: ${R}\nfiles:\n  - url: https://example.org/a\n",
     "m.yaml:3:12: defaults.ca_file: environment variable `R` is set but empty"),
    ("version: 1\nfiles:\n  - url: https://example.org/a\n    ca_file: ${R}/ca.pem\n",
     "m.yaml:4:14: files[0].ca_file: environment variable `R` is set but empty"),
    ("version: 1\nfiles:\n  - url: https://example.org/a\n    dest: ${R}/a\n", "m.yaml:4:11: files[0].dest: dest does not expand ${R}"),
    ("version: 1\nfiles:\n  - url: https://example.org/a\n    dest: \"${SET}\"\n", "m.yaml:4:11: files[0].dest: dest does not expand ${SET}"),
])
func anEmptyVariableInAPathIsRefusedNamingIt(_ text: String, _ expected: String) {
    do {
        let manifest = try ManifestLoader.parse(
            text: text, path: "m.yaml", baseDirectory: "/srv", environment: ["R": "", "SET": "/srv/x", "HOME": "/home/ops"],
            currentDirectory: "/")
        Issue.record("parsed without error: root \(manifest.root), dests \(manifest.entries.map(\.dest))")
    } catch {
        #expect(error.diagnostics.count == 1, "\(error)")
        #expect(error.description.contains(expected), "\(error)")
    }
}

/// The other half: a path-valued key expands a variable that is set, and a leading `~`.
@Test func aCAFileExpandsVariablesAndHomeAsRootDoes() {
    for (value, path) in [("${CA_DIR}/ca.pem", "/srv/secrets/ca.pem"), ("~/ca.pem", "/home/ops/ca.pem")] {
        let text = "version: 1\nfiles:\n  - url: https://example.org/a\n    ca_file: \(value)\n"
        do {
            _ = try ManifestLoader.parse(
                text: text, path: "m.yaml", baseDirectory: "/srv", environment: ["CA_DIR": "/srv/secrets", "HOME": "/home/ops"],
                currentDirectory: "/")
            Issue.record("a missing CA file was accepted")
        } catch {
            // The file does not exist: the message names the path the value expanded to.
            #expect(error.description.contains("files[0].ca_file: cannot read `\(path)`"), "\(error)")
        }
    }
}

/// A `${VAR}` after the path's end (in the query or the fragment) is no part of the file name:
/// the dest comes from the path, and nothing is refused.
@Test(arguments: ["https://example.org/a/f1.bin#${TAG}", "https://example.org/a/f1.bin#/${TAG}", "https://example.org/a/f1.bin?v=${TAG}#x"])
func aVariableAfterThePathIsNoPartOfTheFileName(_ url: String) throws {
    let manifest = try ManifestLoader.parse(
        text: "version: 1\nfiles:\n  - url: \(url)\n", path: "m.yaml", baseDirectory: "/srv", environment: ["TAG": "t"],
        currentDirectory: "/")
    #expect(manifest.entries.map(\.dest) == ["f1.bin"])
}
