import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Why a test server (Apache, lighttpd, vsftpd) could not be started.
enum ServerProcessError: Error, CustomStringConvertible {
    case notInstalled(server: String, install: String)
    case failedToStart(server: String, reason: String, log: String)

    var description: String {
        switch self {
        case .notInstalled(let server, let install):
            "\(server) not found: install it with `\(install)` (make test does this)"
        case .failedToStart(let server, let reason, let log):
            "\(server) failed to start: \(reason)\n--- \(server) log ---\n\(log)"
        }
    }
}

/// A server program that a test runs in the foreground on 127.0.0.1 and a random port, with a
/// configuration the test writes into a private directory. `stop()` (or releasing the value)
/// sends SIGTERM to its pid, SIGKILL 5 s later if need be, waits for it and removes the directory.
final class ServerProcess: Sendable {
    let name: String
    let port: UInt16
    /// Holds the configuration, logs and pid file the server writes.
    let workDirectory: TemporaryDirectory
    private let process: Mutex<Process?>

    private init(name: String, port: UInt16, workDirectory: TemporaryDirectory, process: consuming sending Process) {
        self.name = name
        self.port = port
        self.workDirectory = workDirectory
        self.process = Mutex(process)
    }

    deinit { stop() }

    /// The first executable among `candidates`; throws `notInstalled` naming `install`.
    static func locate(_ server: String, among candidates: [String], install: String) throws -> String {
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw ServerProcessError.notInstalled(server: server, install: install)
        }
        return found
    }

    /// Picks a free port, lets `configure` write the configuration for it into the work
    /// directory and return the command line, runs it, and returns once the port accepts
    /// connections. A port taken between picking and binding (the log says so) is picked again,
    /// up to five times.
    /// - Parameter logs: files in the work directory worth showing when the server fails.
    ///
    /// Waits with `Task.sleep`, never blocking a thread of the shared pool the other tests run on.
    static func start(
        _ name: String, executable: String, logs: [String], startupTimeout: Duration = .seconds(30),
        configure: (UInt16, TemporaryDirectory) throws -> [String]
    ) async throws -> ServerProcess {
        let address = try LoopbackAddress("127.0.0.1")
        var lastFailure = ServerProcessError.failedToStart(server: name, reason: "no attempt made", log: "")
        for _ in 0..<5 {
            let workDirectory = try TemporaryDirectory(prefix: "mirror-\(name)")
            let port = try LoopbackSocket.pickFreePort(on: address)
            let arguments = try configure(port, workDirectory)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = arguments
            process.currentDirectoryURL = workDirectory.url
            _ = FileManager.default.createFile(atPath: workDirectory.path("output.log"), contents: nil)
            let output = FileHandle(forWritingAtPath: workDirectory.path("output.log"))
            process.standardInput = FileHandle.nullDevice
            process.standardOutput = output
            process.standardError = output
            do {
                try process.runWithDefaultSignalMask()
            } catch {
                throw ServerProcessError.failedToStart(server: name, reason: "could not run \(executable): \(error)", log: "")
            }
            func log() -> String {
                (logs + ["output.log"])
                    .compactMap { try? String(contentsOfFile: workDirectory.path($0), encoding: .utf8) }
                    .filter { !$0.isEmpty }.joined(separator: "\n")
            }
            let deadline = ContinuousClock.now + startupTimeout
            var exited = false
            // Checked once more after the deadline: on a busy machine this task may wake long
            // after its sleep, and a server that came up meanwhile is not a failure.
            while true {
                if !process.isRunning {
                    exited = true
                    break
                }
                if LoopbackSocket.acceptsConnections(on: address, port: port) {
                    return ServerProcess(name: name, port: port, workDirectory: workDirectory, process: process)
                }
                if ContinuousClock.now >= deadline { break }
                try await Task.sleep(for: .milliseconds(20))
            }
            let text = log()
            process.terminateAndWait()
            if exited, text.contains("Address already in use") || text.contains("could not bind") {
                lastFailure = .failedToStart(server: name, reason: "port \(port) was taken", log: text)
                continue
            }
            let reason = exited
                ? "\(name) exited with status \(process.terminationStatus)"
                : "\(name) did not accept connections on port \(port) within \(startupTimeout)"
            throw ServerProcessError.failedToStart(server: name, reason: reason, log: text)
        }
        throw lastFailure
    }

    /// A file the server wrote into its work directory (a log), or "" if there is none.
    func contents(of file: String) -> String {
        (try? String(contentsOfFile: workDirectory.path(file), encoding: .utf8)) ?? ""
    }

    /// Stops the server and removes its directory. Idempotent.
    /// The requests in `access.log` so far. A server writes a line once it has finished a
    /// response, or later still when it buffers its log, so with `atLeast` this waits up to
    /// `within` for that many lines.
    func requests(atLeast count: Int, within: Duration, polling interval: Duration) async throws -> [ServedRequest] {
        let deadline = ContinuousClock.now + within
        while true {
            let logged = ServedRequest.parse(log: contents(of: "access.log"))
            if logged.count >= count || ContinuousClock.now >= deadline { return logged }
            try await Task.sleep(for: interval)
        }
    }

    func stop() {
        process.withLock { process in
            process?.terminateAndWait()
            process = nil
        }
        workDirectory.remove()
    }
}

extension Process {
    /// SIGTERM by its pid, then SIGKILL if it is still there after 5 s; returns once it has
    /// exited (or after 10 s at the most).
    func terminateAndWait() {
        stopByPid(processIdentifier) { isRunning }
    }

    /// Waits for a short-lived helper (openssl, gzip) to exit without blocking a pool thread;
    /// throws when it did not exit with status 0.
    func succeed(_ what: String) async throws {
        while isRunning { try await Task.sleep(for: .milliseconds(10)) }
        guard terminationStatus == 0 else {
            throw ServerProcessError.failedToStart(server: what, reason: "exited with status \(terminationStatus)", log: "")
        }
    }
}

extension String {
    /// The text as a double-quoted string for a server's configuration file.
    var configQuoted: String {
        "\"" + replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }
}

extension TemporaryDirectory {
    /// Lets a server that drops root (Apache's children, vsftpd's anonymous sessions) read the
    /// directory: mkdtemp makes it 0700.
    func openForReading() throws {
        guard chmod(path, 0o755) == 0 else { throw SystemCallError("chmod 0755 \(path)") }
    }
}

/// SIGTERM to `pid`, then SIGKILL if `isRunning` still says so after 5 s; returns once it no
/// longer does (or after 10 s at the most). Does nothing for a process that has ended.
func stopByPid(_ pid: pid_t, isRunning: () -> Bool) {
    guard isRunning() else { return }
    func waitForExit(timeout: Duration) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while isRunning() {
            if ContinuousClock.now >= deadline { return false }
            Thread.sleep(forTimeInterval: 0.01)
        }
        return true
    }
    kill(pid, SIGTERM)
    if !waitForExit(timeout: .seconds(5)) {
        kill(pid, SIGKILL)
        _ = waitForExit(timeout: .seconds(5))
    }
}
