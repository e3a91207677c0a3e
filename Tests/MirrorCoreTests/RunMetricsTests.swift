import Foundation
import Testing
@testable import MirrorCore

/// The metrics `sync --metrics-file` writes, as values: the exposition text, the last success
/// carried over, and the file read back and replaced.
struct RunMetricsTests {
    static func report(_ outcome: EntryReport.Outcome, bytes: Int64 = 0, attempts: Int = 1) -> EntryReport {
        EntryReport(dest: "d", url: "u", action: .download, outcome: outcome, bytesTransferred: bytes, size: nil,
                    attempts: attempts, sha256: nil)
    }

    @Test func theTextIsTheExpositionFormatWithEscapedLabelsAndNoTimestamps() {
        let metrics = RunMetrics(
            manifest: "/srv/a \"b\"\\c\nd.yaml", endedAtMilliseconds: 1_700_000_000_042, lastSuccessMilliseconds: nil,
            durationMilliseconds: 61_005, exitCode: 1, reports: [
                Self.report(.transferred, bytes: 300, attempts: 3),
                Self.report(.skipped),
                Self.report(.failed(.cancelled), bytes: 7, attempts: 2),
            ])
        let label = #"manifest="/srv/a \"b\"\\c\nd.yaml""#
        let samples = metrics.text.split(separator: "\n").filter { !$0.hasPrefix("#") }.map(String.init)
        #expect(samples == [
            "mirror_last_run_timestamp_seconds{\(label)} 1700000000.042",
            "mirror_run_duration_seconds{\(label)} 61.005",
            "mirror_exit_code{\(label)} 1",
            "mirror_entries{\(label),result=\"transferred\"} 1",
            "mirror_entries{\(label),result=\"skipped\"} 1",
            "mirror_entries{\(label),result=\"failed\"} 1",
            "mirror_bytes_transferred{\(label)} 307",
            "mirror_retries{\(label)} 3",
        ])
        #expect(metrics.text.contains("# TYPE mirror_retries gauge\n"))
        #expect(metrics.text.components(separatedBy: "# HELP ").count - 1 == 6, "one HELP per family written; no last success yet")
    }

    @Test(arguments: [
        // (exit code, last success before, last success written)
        (Int32(0), Int64?.none, Int64?.some(5_000)),
        (Int32(0), Int64?.some(1_000), Int64?.some(5_000)),
        (Int32(1), Int64?.some(1_000), Int64?.some(1_000)),
        (Int32(130), Int64?.some(1_000), Int64?.some(1_000)),
        (Int32(2), Int64?.none, Int64?.none),
    ])
    func onlyARunThatExitsZeroMovesTheLastSuccess(_ exitCode: Int32, _ before: Int64?, _ after: Int64?) {
        let metrics = RunMetrics(manifest: "m", endedAtMilliseconds: 5_000, lastSuccessMilliseconds: before,
                                 durationMilliseconds: 1, exitCode: exitCode, reports: [])
        #expect(metrics.lastSuccessMilliseconds == after)
        #expect(metrics.text.contains("mirror_last_success_timestamp_seconds") == (after != nil))
    }

    @Test func theFileIsReplacedWholeAndItsLastSuccessReadBackPerManifest() throws {
        let directory = try TemporaryDirectory(prefix: "mirror-metrics")
        let file = MetricsFile(path: directory.path("mirror.prom"))
        #expect(file.lastSuccessMilliseconds(manifest: "/a \"x\".yaml") == nil, "no file yet")
        try file.write(RunMetrics(manifest: "/a \"x\".yaml", endedAtMilliseconds: 1_700_000_000_042, lastSuccessMilliseconds: nil,
                                  durationMilliseconds: 1, exitCode: 0, reports: []))
        #expect(file.lastSuccessMilliseconds(manifest: "/a \"x\".yaml") == 1_700_000_000_042)
        #expect(file.lastSuccessMilliseconds(manifest: "/other.yaml") == nil, "another manifest's sample is not this one's")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["mirror.prom"], "no temporary file left")

        let missing = MetricsFile(path: directory.path("absent/mirror.prom"))
        #expect(throws: MetricsFileError.self) {
            try missing.write(RunMetrics(manifest: "m", endedAtMilliseconds: 0, lastSuccessMilliseconds: nil,
                                         durationMilliseconds: 0, exitCode: 0, reports: []))
        }
    }

    @Test(arguments: [(Int64(0), "0.000"), (1_042, "1.042"), (-5, "-0.005"), (Int64.max, "9223372036854775.807")])
    func millisecondsAreWrittenAsExactDecimalSeconds(_ milliseconds: Int64, _ text: String) {
        #expect(PrometheusText.seconds(milliseconds: milliseconds) == text)
    }
}
