import Foundation
import Testing
@testable import MirrorCore

/// `sync --log-format json` and `--log-timestamps`, through the built binary: what a log
/// shipper or journald reads from stderr.
@Suite(.serialized)
struct LogFormatTests {
    static let payload = randomData(count: 100_000, seed: 62)

    /// Whether `text` is an RFC 3339 time in UTC with milliseconds.
    static func isTimestamp(_ text: some StringProtocol) -> Bool {
        String(text).wholeMatch(of: #/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z/#) != nil
    }

    /// Every stderr line parsed as a JSON object; a line that is not one fails the test.
    static func records(_ stderr: String) throws -> [[String: Any]] {
        try stderr.split(separator: "\n").map { line in
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8))
            return try #require(object as? [String: Any], "not a JSON object: \(line)")
        }
    }

    @Test func jsonLogIsOneObjectPerEventWithTimeEventDestAndRedactedURL() throws {
        let scenario = try SyncScenario(.faultServer)
        let server = scenario.server
        defer { server.stop() }
        server.route("/a.bin", method: "GET", replies: [.status(503, headers: ["Retry-After": "1"]), .file(Self.payload)])
        server.route("/gone.bin", reply: .status(404))
        server.route("/copy.bin", reply: .file(Self.payload))
        // A password in the URL: it must not reach the log.
        let withSecret = server.url("/a.bin").replacingOccurrences(of: "http://", with: "http://user:s3cret@")
        try scenario.write(ManifestText(entries: [
            .init(withSecret, dest: "a.bin"),
            .init(server.url("/gone.bin"), dest: "gone.bin", "retries: 0"),
            .init(server.url("/gone.bin"), dest: "m.bin", "mirrors: [\"\(server.url("/copy.bin"))\"]"),
        ]))

        let result = try scenario.run(["sync", "--log-format", "json", "m.yaml"])
        #expect(result.status == 1, "\(result)")
        #expect(result.stdout.isEmpty, "stdout carries only --json: \(result)")
        #expect(!result.stderr.contains("s3cret"), "\(result)")
        let records = try Self.records(result.stderr)
        for record in records {
            let time = try #require(record["time"] as? String, "\(record)")
            #expect(Self.isTimestamp(time), "\(time)")
            #expect(record["event"] is String && record["level"] is String, "\(record)")
        }
        func events(_ name: String, dest: String? = nil) -> [[String: Any]] {
            records.filter { $0["event"] as? String == name && (dest == nil || $0["dest"] as? String == dest) }
        }
        #expect(events("started").compactMap { $0["dest"] as? String }.sorted() == ["a.bin", "gone.bin", "m.bin"])
        let started = try #require(events("started", dest: "a.bin").first)
        #expect(started["url"] as? String == server.url("/a.bin").replacingOccurrences(of: "http://", with: "http://***@"),
                "userinfo redacted as elsewhere: \(started)")

        let retry = try #require(events("retrying", dest: "a.bin").first, "\(result)")
        #expect(retry["attempt"] as? Int == 1 && retry["next_attempt"] as? Int == 2)
        #expect((retry["error"] as? String)?.contains("503") == true, "\(retry)")
        #expect(retry["delay_ms"] as? Int == 1000, "Retry-After: 1")
        let wait = try #require(events("waiting_for_host").first, "\(result)")
        #expect(wait["host"] as? String != nil && wait["pause_ms"] as? Int == 1000)

        let finished = try #require(events("finished", dest: "a.bin").first)
        #expect(finished["result"] as? String == "transferred")
        #expect(finished["bytes_transferred"] as? Int == Self.payload.count)
        #expect(finished["attempts"] as? Int == 2)

        let failed = try #require(events("failed", dest: "gone.bin").first)
        #expect(failed["level"] as? String == "error")
        #expect((failed["error"] as? String)?.contains("404") == true, "\(failed)")
        #expect(failed["url"] as? String == server.url("/gone.bin"))

        let fallback = try #require(events("fallback", dest: "m.bin").first, "\(result)")
        #expect(fallback["url"] as? String == server.url("/copy.bin"))
        #expect(events("finished", dest: "m.bin").first?["url"] as? String == server.url("/copy.bin"))

        let summary = try #require(events("summary").first)
        #expect(summary["transferred"] as? Int == 2 && summary["failed"] as? Int == 1, "\(summary)")
        #expect(records.last?["event"] as? String == "summary")
    }

    @Test func jsonLogKeepsTheJSONReportOnStdoutAndLogsManifestErrorsAsJSON() throws {
        let scenario = try SyncScenario(.nginx(site: ["a.bin": Self.payload]))
        try scenario.write(.files(.url(scenario.url("/a.bin"), dest: "a.bin")))
        let result = try scenario.run(["sync", "--json", "--log-format", "json", "m.yaml"])
        #expect(result.status == 0, "\(result)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect((report["summary"] as? [String: Any])?["transferred"] as? Int == 1, "\(result)")
        #expect(try Self.records(result.stderr).map { $0["event"] as? String } == ["started", "finished", "summary"])

        try scenario.write(text: "version: 1\nfilez: []\n", to: "bad.yaml")
        let bad = try scenario.run(["sync", "--log-format", "json", "bad.yaml"])
        #expect(bad.status == 2, "\(bad)")
        let messages = try Self.records(bad.stderr)
        #expect(!messages.isEmpty && messages.allSatisfy { $0["level"] as? String == "error" }, "\(bad)")
        #expect(messages.contains { ($0["message"] as? String)?.contains("bad.yaml:2:1") == true }, "\(bad)")
    }

    @Test func logTimestampsBeginEveryTextLineWithTheUTCTime() throws {
        let scenario = try SyncScenario(.nginx(site: ["a.bin": Self.payload]))
        try scenario.write(ManifestText(entries: [
            .init(scenario.url("/a.bin"), dest: "a.bin"),
            .init(scenario.url("/nope.bin"), dest: "nope.bin", "retries: 0"),
        ]))
        let result = try scenario.run(["sync", "--log-timestamps", "m.yaml"])
        #expect(result.status == 1, "\(result)")
        let lines = (result.stdout + result.stderr).split(separator: "\n")
        #expect(lines.count >= 3, "\(result)")
        for line in lines {
            let stamp = line.prefix(while: { $0 != " " })
            #expect(Self.isTimestamp(stamp), "\(line)")
        }
        #expect(result.stdout.contains("Z downloaded   a.bin"), "\(result)")
        #expect(result.stderr.contains("Z FAILED nope.bin"), "\(result)")
    }
}
