import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The project's link emulator (Benchmarks/linkproxy.c: a TCP proxy that holds every chunk
/// `delay` before passing it on) in front of a test server, on 127.0.0.1 and a random port, so
/// that each request takes a round trip of 2 × `delay` and requests in flight together overlap
/// at the server. Compiled with `cc` once (`CCompiler`); `stop()` (or releasing the value)
/// ends it by its pid.
final class LinkProxy: Sendable {
    typealias Unavailable = CCompiler.Unavailable

    let port: UInt16
    private let process: Mutex<Process?>
    private let directory: TemporaryDirectory

    private init(port: UInt16, process: consuming sending Process, directory: TemporaryDirectory) {
        self.port = port
        self.process = Mutex(process)
        self.directory = directory
    }

    deinit { stop() }

    /// `url`'s path and query at the proxy: `https://127.0.0.1:PORT/…`.
    func url(_ path: String, scheme: String = "https") -> String {
        "\(scheme)://127.0.0.1:\(port)\(path)"
    }

    /// The compiled emulator.
    private static let executable = CCompiler.build("Benchmarks/linkproxy.c", into: "linkproxy")

    /// Starts the emulator in front of 127.0.0.1:`upstreamPort` with a one-way `delay` (and a
    /// per-connection `rate` in bytes per second) and returns once it accepts connections.
    static func start(upstreamPort: UInt16, delay: Duration, rate: Int? = nil) async throws -> LinkProxy {
        let executable = try Self.executable.get()
        let directory = try TemporaryDirectory(prefix: "mirror-linkproxy")
        let portFile = directory.path("port")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        let delayMilliseconds = delay.components.seconds * 1000 + delay.components.attoseconds / 1_000_000_000_000_000
        process.arguments = ["--upstream", "127.0.0.1:\(upstreamPort)", "--delay", "\(delayMilliseconds)", "--port-file", portFile]
            + (rate.map { ["--rate", "\($0)"] } ?? [])
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.runWithDefaultSignalMask()
        let deadline = ContinuousClock.now + .seconds(30)
        // Checked once more after the deadline: on a busy machine this task may wake long after
        // its sleep, and an emulator that came up meanwhile is not a failure.
        while true {
            if let text = try? String(contentsOfFile: portFile, encoding: .utf8),
               let port = UInt16(text.trimmingCharacters(in: .whitespacesAndNewlines)),
               LoopbackSocket.acceptsConnections(on: try LoopbackAddress("127.0.0.1"), port: port) {
                return LinkProxy(port: port, process: process, directory: directory)
            }
            if !process.isRunning || ContinuousClock.now >= deadline { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        let status = process.isRunning ? "did not write its port within 30 s" : "exited with status \(process.terminationStatus)"
        process.terminateAndWait()
        throw Unavailable(description: "linkproxy \(status)")
    }

    /// Stops the emulator by its pid and removes its directory. Idempotent.
    func stop() {
        process.withLock { process in
            process?.terminateAndWait()
            process = nil
        }
        directory.remove()
    }
}
