import Foundation

/// A system tool (make, man, bash, systemd-analyze …) run to completion, its stdout and stderr
/// captured separately through files.
enum ExternalCommand {
    struct Result: Sendable, CustomStringConvertible {
        var arguments: [String]
        var status: Int32
        var stdout: String
        var stderr: String

        var description: String {
            "\(arguments.joined(separator: " ")): exit \(status)\n--- stdout ---\n\(stdout)\n--- stderr ---\n\(stderr)"
        }
    }

    struct Missing: Error, CustomStringConvertible {
        var tool: String
        var package: String
        var description: String { "\(tool) not found: install it with `apt-get install -y \(package)` (make test does this)" }
    }

    struct TimedOut: Error, CustomStringConvertible {
        var arguments: [String]
        var description: String { "\(arguments.joined(separator: " ")) did not finish in time; it was killed" }
    }

    /// The absolute path of `tool` in /usr/bin or /bin, or `Missing` naming the Debian package.
    static func executable(_ tool: String, package: String) throws -> String {
        guard let found = ["/usr/bin/", "/bin/", "/usr/local/bin/"].map({ $0 + tool })
            .first(where: { FileManager.default.isExecutableFile(atPath: $0) })
        else { throw Missing(tool: tool, package: package) }
        return found
    }

    /// Runs `executable arguments` in `directory` with `extra` added to the environment, stdin
    /// closed; kills it (by its pid) past `timeout`.
    static func run(_ executable: String, _ arguments: [String], in directory: String,
                    environment extra: [String: String] = [:], timeout: Duration = .seconds(60)) throws -> Result {
        let scratch = try TemporaryDirectory(prefix: "mirror-command")
        let out = try scratch.write(Data(), to: "stdout"), err = try scratch.write(Data(), to: "stderr")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        process.environment = ProcessInfo.processInfo.environment.merging(extra) { _, new in new }
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: out))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: err))
        try process.runWithDefaultSignalMask()
        let started = ContinuousClock.now
        while process.isRunning {
            if ContinuousClock.now - started > timeout {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                throw TimedOut(arguments: [executable] + arguments)
            }
            Thread.sleep(forTimeInterval: 0.01)
        }
        process.waitUntilExit()
        return Result(arguments: [executable] + arguments, status: process.terminationStatus,
                      stdout: String(decoding: scratch.contents(of: "stdout") ?? Data(), as: UTF8.self),
                      stderr: String(decoding: scratch.contents(of: "stderr") ?? Data(), as: UTF8.self))
    }
}
