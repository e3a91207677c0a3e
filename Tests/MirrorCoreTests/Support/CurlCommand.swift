import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What one run of the curl command-line tool did.
struct CurlResult: Sendable, CustomStringConvertible {
    /// curl's exit status (0 success, 18 partial file, 28 timeout, 52 empty reply, …).
    var exitCode: Int32
    var standardOutput: Data
    var standardError: String

    var output: String { String(decoding: standardOutput, as: UTF8.self) }

    var description: String {
        "curl exited \(exitCode)\n--- stdout ---\n\(output)\n--- stderr ---\n\(standardError)"
    }
}

/// Runs `/usr/bin/curl` as an independent HTTP client, to show a test server behaves the way
/// real clients expect before `mirror` is tested against it.
enum CurlCommand {
    struct NotInstalled: Error, CustomStringConvertible {
        var description: String { "curl not found: install it with `apt-get install -y curl`" }
    }

    /// Runs curl with `arguments`, never through a proxy (a proxy from the environment would
    /// hijack loopback requests) and for at most `timeout`; returns once it has exited.
    static func run(_ arguments: [String], timeout: Duration = .seconds(20)) throws -> CurlResult {
        let executable = ["/usr/bin/curl", "/usr/local/bin/curl"].first {
            FileManager.default.isExecutableFile(atPath: $0)
        }
        guard let executable else { throw NotInstalled() }

        // Output goes to files, not pipes: a pipe nobody reads while curl runs can fill and hang it.
        let scratch = try TemporaryDirectory(prefix: "mirror-curl")
        let stdoutPath = scratch.path("stdout")
        let stderrPath = scratch.path("stderr")
        _ = FileManager.default.createFile(atPath: stdoutPath, contents: nil)
        _ = FileManager.default.createFile(atPath: stderrPath, contents: nil)

        let seconds = max(1, Int(timeout.components.seconds))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["--noproxy", "*", "--max-time", String(seconds)] + arguments
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle(forWritingAtPath: stdoutPath)
        process.standardError = FileHandle(forWritingAtPath: stderrPath)
        try process.runWithDefaultSignalMask()

        // --max-time bounds curl itself; this bounds the wait should curl not honour it.
        let deadline = ContinuousClock.now + timeout + .seconds(5)
        while process.isRunning && ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.005)
        }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            while process.isRunning { Thread.sleep(forTimeInterval: 0.005) }
        }
        return CurlResult(exitCode: process.terminationStatus,
                          standardOutput: FileManager.default.contents(atPath: stdoutPath) ?? Data(),
                          standardError: (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "")
    }
}

/// A response's status line and headers, as curl dumps them with `-D`.
struct CurlResponseHead: Sendable {
    var status: Int
    var headers: HeaderFields

    /// Every response head in `dump` (one per redirect hop or request), in order.
    static func all(in dump: String) -> [CurlResponseHead] {
        var heads: [CurlResponseHead] = []
        for line in dump.components(separatedBy: "\r\n") {
            if line.hasPrefix("HTTP/") {
                let parts = line.split(separator: " ")
                heads.append(CurlResponseHead(status: parts.count > 1 ? Int(parts[1]) ?? 0 : 0, headers: [:]))
            } else if let colon = line.firstIndex(of: ":"), !heads.isEmpty {
                heads[heads.count - 1].headers.append(
                    String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
            }
        }
        return heads
    }

    /// The last response head in `dump`: the final answer after any redirects.
    static func last(in dump: String) -> CurlResponseHead? { all(in: dump).last }
}

/// One curl transfer: how curl exited, the last response head and the body it wrote.
struct CurlTransfer {
    var result: CurlResult
    var head: CurlResponseHead?
    var heads: [CurlResponseHead]
    var body: Data

    var status: Int? { head?.status }

    /// Runs `curl -sS -o BODY -D HEADERS … url`.
    static func run(_ url: String, _ options: [String] = [], timeout: Duration = .seconds(20)) throws -> CurlTransfer {
        let scratch = try TemporaryDirectory(prefix: "mirror-curl-transfer")
        let result = try CurlCommand.run(["-sS", "-o", scratch.path("body"), "-D", scratch.path("headers")]
            + options + [url], timeout: timeout)
        let dump = (try? String(contentsOfFile: scratch.path("headers"), encoding: .utf8)) ?? ""
        let heads = CurlResponseHead.all(in: dump)
        return CurlTransfer(result: result, head: heads.last, heads: heads,
                            body: scratch.contents(of: "body") ?? Data())
    }
}
