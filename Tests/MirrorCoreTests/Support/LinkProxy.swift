import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The project's link emulator (Benchmarks/linkproxy.c: a TCP proxy that holds every chunk
/// `delay` before passing it on) in front of a test server, on 127.0.0.1 and a random port, so
/// that each request takes a round trip of 2 × `delay` and requests in flight together overlap
/// at the server. Compiled with `cc` once (see `executable`); `stop()` (or releasing the value)
/// ends it by its pid.
final class LinkProxy: Sendable {
    struct Unavailable: Error, CustomStringConvertible {
        var description: String
    }

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

    /// The compiled emulator, built with `cc` once per version of the source (the directory's
    /// name carries a hash of it), so that test runs leave one build behind, not one each.
    private static let executable: Result<String, Unavailable> = {
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Benchmarks/linkproxy.c").path
        guard let text = FileManager.default.contents(atPath: source) else {
            return .failure(Unavailable(description: "cannot read \(source)"))
        }
        guard let compiler = ["/usr/bin/cc", "/usr/bin/gcc", "/usr/bin/clang"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            return .failure(Unavailable(description: "no C compiler (cc) to build Benchmarks/linkproxy.c: install it with `apt-get install -y gcc` (make test does this)"))
        }
        // FNV-1a over the source: a stable name for this version of it.
        let hash = text.reduce(UInt64(0xcbf2_9ce4_8422_2325)) { ($0 ^ UInt64($1)) &* 0x100_0000_01b3 }
        let output = NSTemporaryDirectory() + "mirror-linkproxy-" + String(hash, radix: 16)
        let binary = output + "/linkproxy"
        if FileManager.default.isExecutableFile(atPath: binary) { return .success(binary) }
        try? FileManager.default.createDirectory(atPath: output, withIntermediateDirectories: true)
        // Built under a name of this process's own and renamed into place: another test process
        // building it at the same time never runs a half-written file.
        let building = output + "/linkproxy.\(getpid())"
        let compile = Process()
        compile.executableURL = URL(fileURLWithPath: compiler)
        compile.arguments = ["-O2", "-o", building, source]
        let errors = Pipe()
        compile.standardError = errors
        do {
            try compile.run()
        } catch {
            return .failure(Unavailable(description: "could not run \(compiler): \(error)"))
        }
        let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        compile.waitUntilExit()
        guard compile.terminationStatus == 0, rename(building, binary) == 0 else {
            return .failure(Unavailable(description: "\(compiler) could not build \(source) into \(binary):\n\(message)"))
        }
        return .success(binary)
    }()

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
