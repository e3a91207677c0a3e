import Foundation
import Testing
@testable import MirrorCore

/// Ctrl-C early in a sync of a long manifest: the entries the run never reached are one line,
/// not a line each (each is listed with --verbose), while --json still gives every entry's status.
@Suite(.serialized)
struct InterruptedRunOutputTests {
    static let entryCount = 2000

    /// A sync of `entryCount` entries, one at a time, interrupted (SIGINT) while the first one's
    /// request waits for its reply: the other 1,999 never start.
    static func interruptedSync(_ options: [String]) throws -> MirrorBinary.Result {
        let scenario = try SyncScenario(.faultServer)
        let server = scenario.server
        defer { server.stop() }
        server.route("/first.bin", reply: FaultReply.file(Data("hello".utf8)).delayed(by: .seconds(30)))
        var entries: [ManifestText.Entry] = [.url(server.url("/first.bin"), dest: "first.bin")]
        for index in 1..<entryCount { entries.append(.url(server.url("/e\(index).bin"), dest: "e\(index).bin")) }
        try scenario.write(ManifestText(entries: entries))
        let running = try scenario.start(["sync", "-j", "1"] + options + ["m.yaml"])
        let received = server.waitForRequests(1, timeout: .seconds(20))
        try #require(received.count == 1, "the first entry's request arrived: \(received)")
        kill(running.pid, SIGINT)
        let result = try running.wait()
        #expect(result.status == 130, "\(result)")
        #expect(server.requests.allSatisfy { $0.path == "/first.bin" }, "no other entry made a request")
        return result
    }

    static func lines(_ text: String, containing needle: String) -> Int {
        text.split(separator: "\n").filter { $0.contains(needle) }.count
    }

    @Test func entriesThatNeverStartedAreOneLine() throws {
        let result = try Self.interruptedSync([])
        let output = result.stdout + result.stderr
        #expect(Self.lines(output, containing: "before it started") == 0, "\(result)")
        #expect(result.stderr.contains("mirror: interrupted by SIGINT; 1999 entries were not started (--verbose lists them)"), "\(result)")
        #expect(Self.lines(output, containing: "first.bin") == 1, "the one entry that started still has its line: \(result)")
        #expect(output.split(separator: "\n").count <= 3, "\(result)")
    }

    @Test func verboseListsEachEntryThatNeverStarted() throws {
        let result = try Self.interruptedSync(["--verbose"])
        #expect(Self.lines(result.stderr, containing: ": interrupted before it started") == Self.entryCount - 1, "\(result.stderr.suffix(2000))")
        for index in [1, 2, 1000, Self.entryCount - 1] {
            #expect(result.stderr.contains("stopped      e\(index).bin: interrupted before it started"))
        }
        #expect(result.stderr.contains("mirror: interrupted by SIGINT; 1999 entries were not started\n"), "\(result.stderr.suffix(500))")
    }

    /// The --json document is for programs: every entry with its status, started or not.
    @Test func jsonStillCarriesEveryEntry() throws {
        let result = try Self.interruptedSync(["--json"])
        let document = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result)")
        let entries = try #require(document["entries"] as? [[String: Any]])
        #expect(entries.count == Self.entryCount)
        #expect(Set(entries.compactMap { $0["dest"] as? String }).count == Self.entryCount)
        #expect(entries.allSatisfy { $0["status"] as? String == "failed" && $0["error"] as? String == "interrupted" })
        #expect(Self.lines(result.stderr, containing: "before it started") == 0, "\(result.stderr)")
    }

    /// The JSON log says the same as the text: a `started` and an `interrupted` record for the
    /// entry that started, and one message counting the rest.
    @Test func jsonLogCountsEntriesThatNeverStartedInOneRecord() throws {
        let result = try Self.interruptedSync(["--log-format", "json"])
        let records = try LogFormatTests.records(result.stderr)
        for event in ["started", "interrupted"] {
            #expect(records.filter { $0["event"] as? String == event }.compactMap { $0["dest"] as? String } == ["first.bin"],
                    "\(event): \(result.stderr.prefix(2000))")
        }
        let messages = records.compactMap { $0["event"] as? String == "message" ? $0["message"] as? String : nil }
        #expect(messages.contains { $0.contains("1999 entries were not started") }, "\(messages)")
        #expect(records.count <= 4, "\(result.stderr.prefix(2000))")
    }
}
