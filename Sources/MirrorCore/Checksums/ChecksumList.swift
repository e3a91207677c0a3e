/// The digests a checksum file lists (SHA256SUMS, SHA512SUMS, a BSD-style CHECKSUM file), by
/// file name. Parsed whole: a line that is neither form makes the file unusable, so a page of
/// HTML or a truncated file is never read as "no such name".
///
/// Accepted, one per line, CRLF or LF:
/// - GNU coreutils: `HASH  name` (text mode) or `HASH *name` (binary mode), the algorithm told
///   by the digest's length; a leading `\` marks a name with `\\` and `\n` escapes.
/// - BSD (`sha256 -r` aside, as `shasum --tag` writes): `SHA256 (name) = HASH`, `SHA512 (…) = …`.
/// - Blank lines and lines starting with `#` are skipped. A leading `./` on a name is dropped.
public struct ChecksumList: Sendable, Equatable {
    private var digests: [String: [DigestAlgorithm: String]] = [:]

    public init() {}

    /// Why a checksum file cannot be used; `line` counts from 1.
    public struct Problem: Error, Equatable, CustomStringConvertible {
        public var line: Int
        public var message: String

        public var description: String { "line \(line): \(message)" }
    }

    /// The digest the file lists for `name` (lowercase hex): SHA-512 when it lists both.
    public func digest(for name: String) -> String? {
        guard let listed = digests[Self.normalised(name)] else { return nil }
        return listed[.sha512] ?? listed[.sha256]
    }

    public var count: Int { digests.count }

    /// - Throws: `Problem` at the first line that is neither form, has a digest of no known
    ///   length, or lists a name again with another digest of the same algorithm.
    public static func parse(_ text: String) throws(Problem) -> ChecksumList {
        var list = ChecksumList()
        var number = 0
        // Split on the bytes: a Character holds CR LF as one.
        for rawLine in text.utf8.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            number += 1
            let bytes = rawLine.last == UInt8(ascii: "\r") ? rawLine.dropLast() : rawLine
            let line = Substring(bytes)
            if line.allSatisfy({ $0 == " " || $0 == "\t" }) || line.first == "#" { continue }
            let (algorithm, name, digest) = try parseLine(line, number: number)
            let key = normalised(name)
            if let earlier = list.digests[key]?[algorithm], earlier != digest {
                throw Problem(line: number, message: "lists `\(name)` again with another \(algorithm.key) digest")
            }
            list.digests[key, default: [:]][algorithm] = digest
        }
        return list
    }

    private static func parseLine(_ line: Substring, number: Int) throws(Problem) -> (DigestAlgorithm, String, String) {
        for algorithm in DigestAlgorithm.allCases {
            let prefix = algorithm.bsdTag + " ("
            guard line.hasPrefix(prefix), let separator = line.ranges(of: ") = ").last else { continue }
            let name = String(line[line.index(line.startIndex, offsetBy: prefix.count)..<separator.lowerBound])
            let digest = try hex(line[separator.upperBound...], number: number)
            guard DigestAlgorithm(hexDigest: digest) == algorithm, !name.isEmpty else {
                throw Problem(line: number, message: "the \(algorithm.bsdTag) line's digest has \(digest.count) hexadecimal digits, not \(algorithm.hexLength)")
            }
            return (algorithm, name, digest)
        }
        var rest = line
        let escaped = rest.first == "\\"
        if escaped { rest = rest.dropFirst() }
        guard let space = rest.firstIndex(of: " ") else { throw notAChecksumLine(number) }
        let digest = try hex(rest[..<space], number: number)
        guard let algorithm = DigestAlgorithm(hexDigest: digest) else {
            throw Problem(line: number, message: "a digest of \(digest.count) hexadecimal digits is neither SHA-256 (64) nor SHA-512 (128)")
        }
        let afterSpace = rest.index(after: space)
        guard afterSpace < rest.endIndex, rest[afterSpace] == " " || rest[afterSpace] == "*" else { throw notAChecksumLine(number) }
        var name = String(rest[rest.index(after: afterSpace)...])
        if escaped { name = unescaped(name) }
        guard !name.isEmpty else { throw notAChecksumLine(number) }
        return (algorithm, name, digest)
    }

    private static func hex(_ text: Substring, number: Int) throws(Problem) -> String {
        guard !text.isEmpty, text.utf8.allSatisfy(DigestSyntax.isASCIIHexDigit) else { throw notAChecksumLine(number) }
        return text.lowercased()
    }

    private static func notAChecksumLine(_ number: Int) -> Problem {
        Problem(line: number, message: "is neither `HASH  name` (sha256sum, sha512sum) nor `SHA256 (name) = HASH`")
    }

    /// GNU's escaping of a name holding a backslash or a newline.
    private static func unescaped(_ name: String) -> String {
        var result = ""
        var iterator = name.makeIterator()
        while let character = iterator.next() {
            guard character == "\\", let next = iterator.next() else {
                result.append(character)
                continue
            }
            result.append(next == "n" ? "\n" : next)
        }
        return result
    }

    private static func normalised(_ name: String) -> String {
        name.hasPrefix("./") ? String(name.dropFirst(2)) : name
    }
}
