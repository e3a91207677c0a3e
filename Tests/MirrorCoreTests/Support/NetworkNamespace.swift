import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A network namespace of the test's own, with its own mount namespace: there a test takes the
/// network away for real (`setLoopback(up: false)`: every packet is dropped, connects time out)
/// and names its own resolver in /etc/resolv.conf, without touching the machine's network.
///
/// A holder process (`unshare --net --mount`) keeps the namespaces alive; it brings `lo` up,
/// bind-mounts a resolv.conf of the test's over /etc/resolv.conf inside, then waits for its
/// stdin to close. Commands join it with `nsenter`; in-process sockets join it through
/// `entered(_:)`. `stop()` (also run when the value is released) ends every process started
/// here and the holder, by their pids.
final class NetworkNamespace: Sendable {
    struct Unavailable: Error, CustomStringConvertible {
        var description: String
    }

    /// The holder's pid: `/proc/PID/ns/net` is the namespace.
    let pid: Int32
    private let holder: Mutex<Process?>
    private let holderInput: Pipe
    private let started = Mutex<[Process]>([])
    let scratch: TemporaryDirectory

    /// - Parameter nameserver: the address /etc/resolv.conf names inside.
    init(nameserver: String = "127.0.0.1") throws {
        for tool in ["/usr/bin/unshare", "/usr/bin/nsenter"] where !FileManager.default.isExecutableFile(atPath: tool) {
            throw Unavailable(description: "\(tool) not found: install it with `apt-get install -y util-linux` (make test does this)")
        }
        guard Self.ipTool != nil else {
            throw Unavailable(description: "ip not found: install it with `apt-get install -y iproute2` (make test does this)")
        }
        scratch = try TemporaryDirectory(prefix: "mirror-netns")
        try scratch.write(Data("nameserver \(nameserver)\noptions timeout:1 attempts:1\n".utf8), to: "resolv.conf")
        let ready = scratch.path("ready")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
        process.arguments = [
            "--net", "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
            "\"$0\" link set lo up && mount --bind \"$1\" /etc/resolv.conf && : > \"$2\" && exec cat > /dev/null",
            Self.ipTool!, scratch.path("resolv.conf"), ready,
        ]
        let input = Pipe()
        process.standardInput = input
        _ = FileManager.default.createFile(atPath: scratch.path("holder.err"), contents: nil)
        process.standardError = FileHandle(forWritingAtPath: scratch.path("holder.err"))
        try process.runWithDefaultSignalMask()
        holderInput = input
        pid = process.processIdentifier
        holder = Mutex(process)
        let deadline = ContinuousClock.now + .seconds(10)
        while !FileManager.default.fileExists(atPath: ready) {
            if !process.isRunning || ContinuousClock.now > deadline {
                let said = String(decoding: scratch.contents(of: "holder.err") ?? Data(), as: UTF8.self)
                stop()
                throw Unavailable(description: "could not make a network namespace (unshare --net --mount needs root): \(said)")
            }
            Thread.sleep(forTimeInterval: 0.01)
        }
    }

    deinit { stop() }

    private static let ipTool = ["/usr/sbin/ip", "/usr/bin/ip", "/sbin/ip", "/bin/ip"]
        .first { FileManager.default.isExecutableFile(atPath: $0) }

    /// Put before a command line to run it inside, in `directory`: `nsenter` into both
    /// namespaces (joining a mount namespace would otherwise leave it in /).
    func launcher(in directory: String) -> [String] {
        ["/usr/bin/nsenter", "--target", String(pid), "--net", "--mount", "--wd=" + directory, "--"]
    }

    /// Takes the network away (down: packets are dropped, connects time out) or gives it back.
    func setLoopback(up: Bool) throws {
        try run([Self.ipTool!, "link", "set", "lo", up ? "up" : "down"])
    }

    /// Runs a command inside to completion; throws with its stderr when it fails.
    func run(_ arguments: [String]) throws {
        let process = try spawn(arguments, output: "run.err")
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let said = String(decoding: scratch.contents(of: "run.err") ?? Data(), as: UTF8.self)
            throw Unavailable(description: "\(arguments.joined(separator: " ")) failed inside the namespace: \(said)")
        }
    }

    /// Starts a long-running command inside (a server); `stop()` ends it by its pid.
    ///
    /// The command runs under a shell that waits for it and passes SIGTERM on to it by its pid.
    /// Foundation takes a child that closes the descriptors it inherited (as daemons such as
    /// dnsmasq do) for exited and then blocks its one reaping thread waiting for it; the shell
    /// keeps them open.
    func start(_ arguments: [String], log: String) throws -> Process {
        let relay = "\"$@\" & child=$!; trap 'kill -TERM $child 2>/dev/null; wait $child; exit 0' TERM INT; wait $child"
        let process = try spawn(["/bin/sh", "-c", relay, "sh"] + arguments, output: log)
        started.withLock { $0.append(process) }
        return process
    }

    /// `start`, returning once `log` contains `ready` (a server's "I am listening" line); the
    /// server is named in the failure when it exits or takes longer than 5 s.
    func start(_ arguments: [String], log: String, readyWhen ready: String, server: String) throws {
        let process = try start(arguments, log: log)
        let deadline = ContinuousClock.now + .seconds(5)
        while true {
            let said = String(decoding: scratch.contents(of: log) ?? Data(), as: UTF8.self)
            if said.contains(ready) { return }
            if !process.isRunning || ContinuousClock.now > deadline {
                throw Unavailable(description: "\(server) did not start in the namespace:\n\(said)")
            }
            Thread.sleep(forTimeInterval: 0.01)
        }
    }

    private func spawn(_ arguments: [String], output: String) throws -> Process {
        let launcher = launcher(in: scratch.path)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: launcher[0])
        process.arguments = Array(launcher.dropFirst()) + arguments
        process.standardInput = FileHandle.nullDevice
        _ = FileManager.default.createFile(atPath: scratch.path(output), contents: nil)
        process.standardOutput = FileHandle(forWritingAtPath: scratch.path(output))
        process.standardError = FileHandle(forWritingAtPath: scratch.path(output))
        try process.runWithDefaultSignalMask()
        return process
    }

    /// Runs `body` on a thread of its own that has joined the network namespace, so that the
    /// sockets it makes (a listener) live in there. The thread ends with the call.
    func entered<T: Sendable>(_ body: @escaping @Sendable () throws -> T) throws -> T {
        let path = "/proc/\(pid)/ns/net"
        let result = Mutex<Result<T, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            defer { done.signal() }
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else {
                result.withLock { $0 = .failure(Unavailable(description: "open \(path): \(String(cString: strerror(errno)))")) }
                return
            }
            defer { close(fd) }
            guard Self.setns(fd, Self.newNetworkNamespace) == 0 else {
                result.withLock { $0 = .failure(Unavailable(description: "setns \(path): \(String(cString: strerror(errno)))")) }
                return
            }
            result.withLock { $0 = Result { try body() } }
        }
        thread.start()
        done.wait()
        return try result.withLock { $0! }.get()
    }

    /// CLONE_NEWNET, from <sched.h>.
    private static let newNetworkNamespace: Int32 = 0x4000_0000

    /// setns(2), which Swift's Glibc does not import (glibc declares it under _GNU_SOURCE only).
    private static let setns: @convention(c) (Int32, Int32) -> Int32 = {
        guard let symbol = dlsym(nil, "setns") else { fatalError("glibc has no setns") }
        return unsafeBitCast(symbol, to: (@convention(c) (Int32, Int32) -> Int32).self)
    }()

    /// Ends every process started inside, then the holder; waits for each. Idempotent.
    func stop() {
        for process in started.withLock({ processes in defer { processes.removeAll() }; return processes }) {
            if process.isRunning { kill(process.processIdentifier, SIGTERM) }
            process.waitUntilExit()
        }
        holder.withLock { holder in
            guard let process = holder else { return }
            try? holderInput.fileHandleForWriting.close()
            if process.isRunning { kill(process.processIdentifier, SIGTERM) }
            process.waitUntilExit()
            holder = nil
        }
    }
}
