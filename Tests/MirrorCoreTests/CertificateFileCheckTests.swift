import Foundation
import Testing
@testable import MirrorCore

/// The check of a CA bundle reads up to its first PEM marker, a block at a time: a marker across
/// two blocks, or far into the file, is found; a file without one is refused whatever its size.
struct CertificateFileCheckTests {
    static let marker = "-----BEGIN CERTIFICATE-----\n"

    /// `filler` bytes of comment lines, then `tail`.
    static func bundle(filler: Int, then tail: String) -> Data {
        var text = String(repeating: "# a comment line, as some bundles begin with one.......\n", count: filler / 56 + 1)
        text = String(text.prefix(filler))
        return Data((text + tail).utf8)
    }

    @Test(arguments: [0, 1, 100, 16_384 - 20, 16_384 - 16, 16_384 - 10, 16_384 - 1, 16_384, 16_384 + 3, 32_768 - 8, 200_000])
    func findsTheMarkerWherever(offset: Int) throws {
        let directory = try TemporaryDirectory()
        let path = try directory.write(Self.bundle(filler: offset, then: Self.marker + "MIIB\n"), to: "ca.pem")
        try CertificateFileCheck.checkBundle(path)
    }

    @Test(arguments: [0, 15, 16_384, 100_000])
    func refusesAFileWithoutOne(size: Int) throws {
        let directory = try TemporaryDirectory()
        // A marker cut one byte short at the very end is no marker.
        let path = try directory.write(Self.bundle(filler: size, then: "-----BEGIN CERTIFICATE----"), to: "notes.txt")
        #expect(throws: ValueProblem.self) { try CertificateFileCheck.checkBundle(path) }
    }

    @Test func aLoadChecksEachBundleOnce() throws {
        let directory = try TemporaryDirectory()
        let path = try directory.write(Data(Self.marker.utf8), to: "ca.pem")
        let missing = directory.path("missing.pem")
        let checks = CertificateChecks()
        try checks.checkBundle(path)
        #expect(throws: ValueProblem.self) { try checks.checkBundle(missing) }
        // What this load found stands for the rest of it: the file is not read again.
        try FileManager.default.removeItem(atPath: path)
        try directory.write(Data(Self.marker.utf8), to: "missing.pem")
        try checks.checkBundle(path)
        #expect(throws: ValueProblem.self) { try checks.checkBundle(missing) }
        // Another load reads them afresh.
        let next = CertificateChecks()
        #expect(throws: ValueProblem.self) { try next.checkBundle(path) }
        try next.checkBundle(missing)
    }
}
