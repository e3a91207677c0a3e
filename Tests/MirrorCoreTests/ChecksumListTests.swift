import Testing
@testable import MirrorCore

/// The checksum-file parser as a table: each text, then the digest it lists for a name, or the
/// problem it is refused with.
struct ChecksumListTests {
    static let a256 = String(repeating: "a", count: 64)
    static let b256 = String(repeating: "b", count: 64)
    static let c512 = String(repeating: "c", count: 128)

    struct Row: Sendable, CustomTestStringConvertible {
        var name: String
        var text: String
        /// Looked up names and the digest expected for each (nil: not listed).
        var lookups: [(String, String?)] = []
        /// `line N: …` of the refusal; nil when the text parses.
        var problem: String?

        var testDescription: String { name }
    }

    static let rows: [Row] = [
        Row(name: "GNU text mode", text: "\(a256)  a.bin\n\(b256)  b.bin\n", lookups: [("a.bin", a256), ("b.bin", b256), ("c.bin", nil)]),
        Row(name: "GNU binary mode", text: "\(a256) *a.bin\n", lookups: [("a.bin", a256)]),
        Row(name: "GNU SHA-512 by length, uppercase hex", text: "\(c512.uppercased())  big.iso\n", lookups: [("big.iso", c512)]),
        Row(name: "CRLF, comments, blank lines", text: "# release 1\r\n\r\n\(a256)  a.bin\r\n  \r\n", lookups: [("a.bin", a256)]),
        Row(name: "no newline at the end", text: "\(a256)  a.bin", lookups: [("a.bin", a256)]),
        Row(name: "a name with spaces", text: "\(a256)  my file.bin\n", lookups: [("my file.bin", a256)]),
        Row(name: "a leading ./ is dropped", text: "\(a256)  ./a.bin\n", lookups: [("a.bin", a256)]),
        Row(name: "GNU escaped name", text: "\\\(a256)  back\\\\slash\n", lookups: [("back\\slash", a256)]),
        Row(name: "BSD SHA256", text: "SHA256 (a.bin) = \(a256)\n", lookups: [("a.bin", a256)]),
        Row(name: "BSD SHA512, name with parentheses", text: "SHA512 (a (1).bin) = \(c512)\n", lookups: [("a (1).bin", c512)]),
        Row(name: "both algorithms for a name: SHA-512 wins", text: "SHA256 (a.bin) = \(a256)\nSHA512 (a.bin) = \(c512)\n", lookups: [("a.bin", c512)]),
        Row(name: "a name listed twice with the same digest", text: "\(a256)  a.bin\n\(a256) *a.bin\n", lookups: [("a.bin", a256)]),
        Row(name: "a name listed twice with different digests", text: "\(a256)  a.bin\n\(b256)  a.bin\n",
            problem: "line 2: lists `a.bin` again with another sha256 digest"),
        Row(name: "an HTML page", text: "<html><body>Not here</body></html>\n",
            problem: "line 1: is neither `HASH  name` (sha256sum, sha512sum) nor `SHA256 (name) = HASH`"),
        Row(name: "a digest of another length (MD5)", text: "\(String(repeating: "d", count: 32))  a.bin\n",
            problem: "line 1: a digest of 32 hexadecimal digits is neither SHA-256 (64) nor SHA-512 (128)"),
        Row(name: "one space only", text: "\(a256) a.bin\n",
            problem: "line 1: is neither `HASH  name` (sha256sum, sha512sum) nor `SHA256 (name) = HASH`"),
        Row(name: "BSD tag that does not fit its digest", text: "SHA512 (a.bin) = \(a256)\n",
            problem: "line 1: the SHA512 line's digest has 64 hexadecimal digits, not 128"),
    ]

    @Test(arguments: rows)
    func checksumFileParses(_ row: Row) {
        do {
            let list = try ChecksumList.parse(row.text)
            #expect(row.problem == nil, "parsed, but expected: \(row.problem ?? "")")
            for (name, digest) in row.lookups {
                #expect(list.digest(for: name) == digest, "\(name)")
            }
        } catch {
            #expect(error.description == row.problem)
        }
    }
}
