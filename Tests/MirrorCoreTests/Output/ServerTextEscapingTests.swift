import Foundation
import Testing
@testable import MirrorCore
@testable import mirror

/// What a server controls (ETag, Content-Encoding, Location, reason phrase, the bytes of a
/// redirect target) reaches the terminal only as visible text, in every output of every command.
@Suite(.serialized)
struct ServerTextEscapingTests {
    static let hostile = "\u{1B}]0;owned\u{07}\u{1B}[2J\u{9B}31m\u{202E}"

    static func setUp() throws -> SyncScenario {
        let scenario = try SyncScenario(.faultServer)
        let server = scenario.server
        let data = Data("hello".utf8)
        server.route("/etag.bin", reply: .file(data, etag: "\"v1\(hostile)\""))
        server.route("/encoded.bin", reply: .status(200, headers: ["Content-Encoding": "gzip\(hostile)"], body: data))
        server.route("/moved.bin", reply: .redirect(to: "gopher\(hostile)://127.0.0.1/x"))
        server.route("/reason.bin", reply: .raw("HTTP/1.1 404 Not\(hostile)Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
        try scenario.write(ManifestText(entries: ["etag", "encoded", "moved", "reason"].map {
            .url(server.url("/\($0).bin"), dest: "\($0).bin", "retries: 0")
        }), to: "mirror.yaml")
        return scenario
    }

    static func expectNoControlCharacters(_ text: String, _ what: String) {
        let found = text.unicodeScalars.filter { $0 != "\n" && TerminalText.isControl($0) }
        #expect(found.isEmpty, "\(what) holds raw control characters \(found.map { String($0.value, radix: 16) }): \(text.debugDescription)")
    }

    @Test(arguments: [["plan"], ["plan", "-v"], ["sync", "-v"]])
    func serverControlledTextIsEscapedInTextOutput(_ command: [String]) throws {
        let scenario = try Self.setUp()
        let result = try scenario.run(command + ["mirror.yaml"])
        #expect(result.status == 1, "\(result)")
        Self.expectNoControlCharacters(result.stdout, "stdout")
        Self.expectNoControlCharacters(result.stderr, "stderr")
        if command == ["plan", "-v"] {
            #expect(result.stderr.contains("ETag \"v1\\x1B]0;owned\\x07\\x1B[2J\\x9B31m\\u{202E}\""), "\(result)")
        }
        withExtendedLifetime(scenario) {}
    }

    @Test(arguments: [["plan", "--json"], ["sync", "--json", "-v"]])
    func serverControlledTextStaysValidEscapedJSON(_ command: [String]) throws {
        let scenario = try Self.setUp()
        let result = try scenario.run(command + ["mirror.yaml"])
        #expect(result.status == 1, "\(result)")
        Self.expectNoControlCharacters(result.stdout, "stdout")
        Self.expectNoControlCharacters(result.stderr, "stderr")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result)")
        let entries = try #require(object["entries"] as? [[String: Any]])
        #expect(entries.count == 4)
        withExtendedLifetime(scenario) {}
    }

    @Test func escapingMakesEveryControlCharacterVisibleAndIsIdempotent() {
        #expect(TerminalText.escaped("a\u{1B}[2Jb\u{07}\u{7F}\u{9B}\u{202E}é\t") == "a\\x1B[2Jb\\x07\\x7F\\x9B\\u{202E}é\\x09")
        let once = TerminalText.escaped(Self.hostile)
        #expect(TerminalText.escaped(once) == once)
        #expect(TerminalText.escapedLines("one\u{1B}\ntwo") == "one\\x1B\ntwo")
        let json = JSONValue.object([("etag", .string(Self.hostile))]).text
        #expect(!json.unicodeScalars.contains(where: TerminalText.isControl))
        let decoded = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: String]
        #expect(decoded?["etag"] == Self.hostile, "the JSON string holds the server's exact text")
    }
}
