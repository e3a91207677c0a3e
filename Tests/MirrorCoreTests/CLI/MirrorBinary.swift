import Foundation
import MirrorCore
import Testing

/// Runs the built `mirror` executable, as cron or a script would.
enum MirrorBinary {
    struct Result: Sendable, CustomStringConvertible {
        var status: Int32
        var stdout: String
        var stderr: String

        var description: String { "exit \(status)\n--- stdout ---\n\(stdout)\n--- stderr ---\n\(stderr)" }
    }

    struct NotBuilt: Error, CustomStringConvertible {
        var searched: [String]
        var description: String { "the mirror executable was not found (looked at \(searched.joined(separator: ", "))); run `swift build` first" }
    }

    struct TimedOut: Error, CustomStringConvertible {
        var arguments: [String]
        var description: String { "mirror \(arguments.joined(separator: " ")) did not finish in time" }
    }

    /// The executable SwiftPM built beside the test bundle.
    static func path() throws -> String {
        let besideTests = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let package = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        var candidates = [besideTests.appendingPathComponent("mirror").path]
        // The test bundle may be a directory (.xctest) one level further down.
        candidates.append(besideTests.deletingLastPathComponent().appendingPathComponent("mirror").path)
        candidates.append(package.appendingPathComponent(".build/debug/mirror").path)
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw NotBuilt(searched: candidates)
        }
        return found
    }

    /// A started `mirror` process whose output goes to files.
    final class Running {
        let process: Process
        let scratch: TemporaryDirectory
        let arguments: [String]
        let timeout: Duration
        let started = ContinuousClock.now

        init(process: Process, scratch: TemporaryDirectory, arguments: [String], timeout: Duration) {
            self.process = process
            self.scratch = scratch
            self.arguments = arguments
            self.timeout = timeout
        }

        var pid: Int32 { process.processIdentifier }

        /// Waits (up to 30 s) until the process has a handler for `signal`, read from the SigCgt
        /// mask of /proc/PID/status: a signal sent before that kills a process that has only
        /// just started (exit status 2 for SIGINT, with nothing printed) on a loaded machine.
        func waitUntilCatching(_ signal: Int32) {
            let deadline = ContinuousClock.now + .seconds(30)
            while process.isRunning && ContinuousClock.now < deadline {
                let status = (try? WholeFile.read(path: "/proc/\(pid)/status")).map { String(decoding: $0, as: UTF8.self) } ?? ""
                if let line = status.split(separator: "\n").first(where: { $0.hasPrefix("SigCgt:") }),
                   let mask = UInt64(line.dropFirst("SigCgt:".count).trimmingCharacters(in: .whitespaces), radix: 16),
                   mask & (UInt64(1) << UInt64(signal - 1)) != 0 {
                    return
                }
                Thread.sleep(forTimeInterval: 0.01)
            }
        }

        /// Waits for the exit (killing it past the timeout) and returns what it printed.
        func wait() throws -> Result {
            while process.isRunning {
                if ContinuousClock.now - started > timeout {
                    process.terminate()
                    process.waitUntilExit()
                    throw TimedOut(arguments: arguments)
                }
                Thread.sleep(forTimeInterval: 0.01)
            }
            process.waitUntilExit()
            return Result(
                status: process.terminationStatus,
                stdout: String(decoding: scratch.contents(of: "stdout") ?? Data(), as: UTF8.self),
                stderr: String(decoding: scratch.contents(of: "stderr") ?? Data(), as: UTF8.self)
            )
        }
    }

    /// Starts `mirror arguments` in `directory`, stdin closed, output captured through files.
    /// - Parameters:
    ///   - umask: when set, mirror runs under it (through /bin/sh, which sets it).
    ///   - standardOutput, standardError: where stdout and stderr go instead of files (a
    ///     `PseudoTerminal`'s device).
    ///   - launcher: a command line that runs mirror, e.g. `NetworkNamespace.launcher`.
    static func start(_ arguments: [String], in directory: String, environment extra: [String: String] = [:],
                      umask: mode_t? = nil, standardOutput: FileHandle? = nil, standardError: FileHandle? = nil,
                      launcher: [String] = [], timeout: Duration = .seconds(60)) throws -> Running {
        let scratch = try TemporaryDirectory(prefix: "mirror-cli")
        let out = scratch.path("stdout"), err = scratch.path("stderr")
        _ = FileManager.default.createFile(atPath: out, contents: nil)
        _ = FileManager.default.createFile(atPath: err, contents: nil)
        let process = Process()
        if let umask {
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", "umask \(String(umask, radix: 8)) && exec \"$0\" \"$@\"", try path()] + arguments
        } else if let command = launcher.first {
            process.executableURL = URL(fileURLWithPath: command)
            process.arguments = launcher.dropFirst() + [try path()] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: try path())
            process.arguments = arguments
        }
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        var environment = ProcessInfo.processInfo.environment
        // A proxy from the environment would take loopback requests elsewhere.
        for name in ["http_proxy", "https_proxy", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"] { environment[name] = nil }
        environment["no_proxy"] = "*"
        for (key, value) in extra { environment[key] = value }
        process.environment = environment
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = try standardOutput ?? FileHandle(forWritingTo: URL(fileURLWithPath: out))
        process.standardError = try standardError ?? FileHandle(forWritingTo: URL(fileURLWithPath: err))
        // Swift's worker threads block SIGINT/SIGTERM; the child must not inherit that mask.
        try process.runWithDefaultSignalMask()
        return Running(process: process, scratch: scratch, arguments: arguments, timeout: timeout)
    }

    /// Runs `mirror arguments` to completion.
    static func run(_ arguments: [String], in directory: String, environment extra: [String: String] = [:],
                    umask: mode_t? = nil, launcher: [String] = [], timeout: Duration = .seconds(60)) throws -> Result {
        try start(arguments, in: directory, environment: extra, umask: umask, launcher: launcher, timeout: timeout).wait()
    }
}
