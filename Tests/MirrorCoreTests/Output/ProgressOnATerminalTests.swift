import Foundation
import Testing
@testable import MirrorCore

/// `mirror sync` drawing its progress on a real pseudo-terminal 80 columns wide, against nginx
/// serving Debian-style paths slowly enough for many frames.
@Suite(.serialized)
struct ProgressOnATerminalTests {
    static let paths = [
        "pool/main/l/linux-signed-amd64/linux-image-6.1.0-18-amd64-unsigned_6.1.76-1_amd64.deb",
        "pool/main/f/firmware-nonfree/firmware-misc-nonfree_20230210-5_all.deb",
        "pool/main/g/gcc-12/libstdc++-12-dev_12.2.0-14_amd64.deb",
    ]
    static let columns = 80

    /// Runs a sync of `paths` (each `size` bytes) with stderr (and, when asked, stdout) on the
    /// terminal.
    static func syncOnTerminal(term: String, size: Int, rate: Int, stdoutToo: Bool = false) throws -> (result: MirrorBinary.Result, terminal: String) {
        var files: [String: Data] = [:]
        for (index, path) in paths.enumerated() { files[path] = randomData(count: size, seed: UInt64(60 + index)) }
        let scenario = try SyncScenario(.nginx(site: files, options: NginxOptions(rateLimit: rate)))
        try scenario.write(ManifestText(entries: paths.map { .url(scenario.url("/" + $0), dest: $0) }), to: "mirror.yaml")
        let terminal = try PseudoTerminal(columns: UInt16(columns))
        var environment = ["TERM": term]
        environment["COLUMNS"] = nil
        let running = try scenario.start(["sync", "-j", "2", "mirror.yaml"],
                                        environment: environment, standardOutput: stdoutToo ? terminal.device : nil,
                                             standardError: terminal.device)
        let result = try running.wait()
        let output = String(decoding: try terminal.finish(), as: UTF8.self)
        for path in paths {
            #expect(scenario.local(path) == scenario.served(path), "\(path) arrived whole")
        }
        return (result, output)
    }

    /// The terminal's output as the lines a person reads: escape sequences and carriage
    /// returns dropped.
    static func plainLines(_ output: String) -> [String] {
        var text = ""
        var scalars = output.unicodeScalars[...]
        while let scalar = scalars.popFirst() {
            if scalar == "\u{1B}" {
                // CSI: parameters up to a final byte in @...~.
                _ = scalars.popFirst()
                while let next = scalars.popFirst(), !(0x40...0x7E).contains(next.value) {}
            } else if scalar != "\r" {
                text.unicodeScalars.append(scalar)
            }
        }
        return text.components(separatedBy: "\n")
    }

    @Test func progressFitsAnEightyColumnTerminalAndLeavesNoStaleFrame() throws {
        let (result, output) = try Self.syncOnTerminal(term: "xterm-256color", size: 150_000, rate: 100_000)
        #expect(result.status == 0, "\(result)")
        #expect(output.contains("\u{1B}[K"), "frames were drawn: \(output.debugDescription)")
        #expect(!output.contains("0 B of 0 B"))
        for line in Self.plainLines(output) {
            #expect(line.count < Self.columns, "a line wider than the terminal wraps: \(line)")
        }
        var screen = TerminalScreen(columns: Self.columns)
        try screen.receive(output)
        #expect(screen.text.isEmpty, "every frame was redrawn in place and cleared at the end; left on screen: \(screen.text)")
    }

    /// As a person runs it: the finished lines (stdout) and the progress (stderr) share the
    /// terminal, and what stays on screen is the finished lines and the summary, nothing else.
    @Test func finishedLinesAndProgressShareTheTerminalCleanly() throws {
        let (result, output) = try Self.syncOnTerminal(term: "xterm-256color", size: 150_000, rate: 100_000, stdoutToo: true)
        #expect(result.status == 0, "\(result)")
        #expect(output.contains("\u{1B}[K"), "frames were drawn: \(output.debugDescription)")
        var screen = TerminalScreen(columns: Self.columns)
        try screen.receive(output)
        // A finished line longer than the terminal wraps onto the next rows, as any text does;
        // any other row is a progress frame left behind.
        var previous: String?
        for line in screen.text {
            if !line.hasPrefix("downloaded ") && !line.hasPrefix("3 transferred") {
                #expect(previous?.count == Self.columns, "a stale row: \(line)\n\(screen.text)")
            }
            previous = line
        }
        let finished = screen.text.filter { $0.hasPrefix("downloaded") }
        #expect(finished.count == Self.paths.count, "\(screen.text)")
        #expect(screen.text.last?.hasPrefix("3 transferred") == true, "\(screen.text)")
    }

    @Test func aDumbTerminalGetsPlainLinesOnly() throws {
        // Longer than ProgressDisplay.plainInterval, so that at least one line is written.
        let (result, output) = try Self.syncOnTerminal(term: "dumb", size: 200_000, rate: 45_000)
        #expect(result.status == 0, "\(result)")
        #expect(!output.unicodeScalars.contains("\u{1B}"), "no escape sequence: \(output.debugDescription)")
        let lines = Self.plainLines(output).filter { !$0.isEmpty }
        #expect(lines.contains { $0.contains("/3 files") }, "a progress line: \(output.debugDescription)")
        for line in lines {
            #expect(line.count < Self.columns, "\(line)")
        }
    }

    /// A dumb terminal's plain line (every 5 s) shows the run's rate and the time left while
    /// the transfers run, as the redrawn block does: it showed `0 B/s` and `ETA --` always.
    @Test func aDumbTerminalLineShowsTheRateAndTimeLeft() throws {
        // Two at a time at 45,000 bytes a second each: about 9 s in all, a line at 5 s.
        let (result, output) = try Self.syncOnTerminal(term: "dumb", size: 200_000, rate: 45_000)
        #expect(result.status == 0, "\(result)")
        let progress = Self.plainLines(output).filter { $0.contains("/3 files") && !$0.contains("3/3 files") }
        #expect(!progress.isEmpty, "a progress line while transfers ran: \(output.debugDescription)")
        for line in progress {
            let rate = try #require(line.firstMatch(of: #/([0-9.]+) (B|KiB|MiB)\/s/#), "a rate: \(line)")
            #expect(Double(rate.1) ?? 0 > 0, "a rate above zero: \(line)")
            #expect(line.contains("ETA ") && !line.contains("ETA --"), "a time left: \(line)")
        }
    }

    /// Two transfers announcing `Content-Length: 9223372036854775807` and dripping a byte at a
    /// time: the display sums them and works out an ETA many times over without a trap.
    @Test func hugeContentLengthsOnATerminalDoNotTrapTheDisplay() throws {
        let scenario = try SyncScenario(.faultServer)
        let server = scenario.server
        for name in ["a", "b"] {
            server.route("/\(name).bin", reply: FaultReply.status(200, headers: ["Content-Length": "\(Int64.max)"], body: Data("abcd".utf8))
                .dripped(bytes: 1, every: .milliseconds(250)))
        }
        try scenario.write(ManifestText(entries: ["a", "b"].map { .url(server.url("/\($0).bin"), dest: "\($0).bin", "retries: 0") }), to: "mirror.yaml")
        let terminal = try PseudoTerminal(columns: UInt16(Self.columns))
        let result = try scenario.start(["sync", "mirror.yaml"], environment: ["TERM": "xterm"], standardError: terminal.device).wait()
        let output = String(decoding: try terminal.finish(), as: UTF8.self)
        #expect(result.status == 1, "both entries fail (the body ends short), and mirror lives to say so: \(result)\n\(output)")
        #expect(output.contains("16.0 EiB") == false && output.contains("8.00 EiB"), "the total saturates: \(output.debugDescription)")
    }
}

