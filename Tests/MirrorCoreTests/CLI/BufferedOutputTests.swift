import Foundation
import Glibc
import Testing

/// Standard output to a file or a pipe goes out in large writes, not one per line; it stays in
/// order with stderr when both go to one place; and a line is not held while the run goes on.
@Suite(.serialized)
struct BufferedOutputTests {
    /// A scenario whose manifest copies `count` local files (`file://`) into its root, one at a
    /// time; entries whose index is in `missing` name a file that does not exist.
    static func localFiles(_ count: Int, missing: Set<Int> = [], concurrency: Int = 8) throws -> SyncScenario {
        let scenario = try SyncScenario()
        var manifest = "version: 1\nallow_file: true\nroot: ./root\nconcurrency: \(concurrency)\nfiles:\n"
        for index in 0..<count {
            let name = "f\(index).txt"
            if !missing.contains(index) {
                _ = try scenario.directory.write(Data("file \(index)\n".utf8), to: "source/\(name)")
            }
            manifest += "  - url: \"file://\(scenario.directory.path("source/\(name)"))\"\n    dest: \(name)\n"
        }
        _ = try scenario.write(text: manifest)
        return scenario
    }

    /// `localFiles(count)`, synced once.
    static func syncedLocalFiles(_ count: Int) throws -> SyncScenario {
        let scenario = try localFiles(count)
        let synced = try scenario.run(["sync", "--quiet", "m.yaml"])
        #expect(synced.status == 0, "\(synced)")
        return scenario
    }

    /// `mirror verify m.yaml` in `scenario` under strace: its result, and its writes to
    /// `descriptor` as strace saw them.
    static func verifyTracingWrites(_ scenario: SyncScenario, to descriptor: Int) throws -> (MirrorBinary.Result, [Substring]) {
        let strace = try ExternalCommand.executable("strace", package: "strace")
        let trace = scenario.directory.path("trace")
        let verified = try scenario.run(["verify", "m.yaml"], launcher: [strace, "-f", "-e", "trace=write", "-o", trace])
        let writes = String(decoding: try Data(contentsOf: URL(fileURLWithPath: trace)), as: UTF8.self)
            .split(separator: "\n").filter { $0.contains("write(\(descriptor),") }
        return (verified, writes)
    }

    @Test func aLinePerEntryToAFileIsNotAWritePerLine() throws {
        let (verified, writes) = try Self.verifyTracingWrites(try Self.syncedLocalFiles(300), to: 1)
        #expect(verified.status == 0, "\(verified)")
        let lines = verified.stdout.split(separator: "\n")
        #expect(lines.count == 301, "a line per entry and the summary:\n\(verified)")
        #expect(lines.filter { $0.hasPrefix("ok ") }.count == 300)
        // 301 lines of about 20 bytes: one write, or a few if the flusher ran in between.
        #expect((1...4).contains(writes.count), "\(writes.count) writes to stdout:\n\(writes.prefix(10).joined(separator: "\n"))")
    }

    /// Problems go to stderr, held as stdout is when it is a file: a verify of 300 missing
    /// files made 300 writes to stderr.
    @Test func aProblemPerEntryToAFileIsNotAWritePerLine() throws {
        let (verified, writes) = try Self.verifyTracingWrites(try Self.localFiles(300), to: 2)
        #expect(verified.status == 1, "\(verified)")
        let lines = verified.stderr.split(separator: "\n")
        #expect(lines.filter { $0.hasPrefix("missing ") }.count == 300, "\(verified)")
        #expect(lines.last?.hasPrefix("0 ok, 0 unverified, 300 with problems") == true)
        #expect((1...4).contains(writes.count), "\(writes.count) writes to stderr:\n\(writes.prefix(10).joined(separator: "\n"))")
    }

    /// With stdout and stderr on one file (`2>&1`), each entry's line comes where it was made:
    /// held stdout lines go out before anything is written to stderr. `verify` says each entry
    /// in the manifest's order, those in order on stdout and the others on stderr.
    @Test func standardOutputAndErrorOnOneFileKeepTheirOrder() throws {
        let scenario = try Self.syncedLocalFiles(12)
        let gone: Set<Int> = [1, 2, 5, 8, 9]
        for index in gone { #expect(unlink(scenario.directory.path("root/f\(index).txt")) == 0) }
        let combined = scenario.directory.path("combined")
        _ = FileManager.default.createFile(atPath: combined, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: combined))
        let result = try scenario.start(["verify", "m.yaml"], standardOutput: handle, standardError: handle).wait()
        try handle.close()
        #expect(result.status == 1, "\(result)")
        let lines = String(decoding: try Data(contentsOf: URL(fileURLWithPath: combined)), as: UTF8.self).split(separator: "\n")
        let named = lines.compactMap { line in (0..<12).first { line.hasSuffix(" f\($0).txt") }.map { (index: $0, line: line) } }
        #expect(named.map(\.index) == Array(0..<12), "entries in the manifest's order:\n\(lines.joined(separator: "\n"))")
        for (index, line) in named {
            #expect(line.hasPrefix(gone.contains(index) ? "missing" : "ok"), "\(line)")
        }
        #expect(lines.last?.hasPrefix("7 ok, 0 unverified, 5 with problems") == true, "the summary last: \(lines.last ?? "")")
    }

    /// A line goes out within half a second even when nothing follows it for long: a
    /// second entry whose server waits before it answers holds the run, not the first's line.
    @Test func aLineIsNotHeldWhileTheRunGoesOn() throws {
        let server = try FaultServer.start()
        var slow = FaultReply.file(Data("slow\n".utf8))
        slow.delayBeforeHeaders = .seconds(30)
        server.route("/slow.txt", reply: slow)
        let scenario = try SyncScenario()
        let present = try scenario.directory.write(Data("here\n".utf8), to: "source/first.txt")
        _ = try scenario.write(text: """
            version: 1
            allow_file: true
            root: ./root
            concurrency: 1
            files:
              - url: "file://\(present)"
                dest: first.txt
              - url: \(server.url("/slow.txt"))
                dest: slow.txt
            """)
        let running = try scenario.start(["sync", "m.yaml"])
        defer {
            if running.process.isRunning {
                kill(running.pid, SIGKILL)
                running.process.waitUntilExit()
            }
        }
        #expect(server.waitForRequests(1, timeout: .seconds(20)).count == 1, "the second entry's request")
        // Held at most half a second; ten allow for a loaded machine.
        let deadline = ContinuousClock.now + .seconds(10)
        var stdout = ""
        while ContinuousClock.now < deadline {
            stdout = String(decoding: running.scratch.contents(of: "stdout") ?? Data(), as: UTF8.self)
            if stdout.contains("first.txt") { break }
            Thread.sleep(forTimeInterval: 0.05)
        }
        #expect(stdout.contains("first.txt"), "the first entry's line while the second waits: \(stdout)")
        #expect(running.process.isRunning, "the run still waits for the second entry")
    }
}
