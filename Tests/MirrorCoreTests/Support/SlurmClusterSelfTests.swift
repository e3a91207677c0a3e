import Foundation
import MirrorCore
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Shows that `SlurmCluster` is a working one-node cluster of its own: the node is idle, the
/// daemons listen on loopback only, an array job's tasks see their index and count, exit codes
/// and cancellations are reported per task, and `stop()` leaves no daemon or job behind.
@Suite(.timeLimit(.minutes(3)))
struct SlurmClusterSelfTests {
    @Test func runsAnArrayJobReportsEachTaskAndStopsEveryDaemon() async throws {
        let cluster = try await SlurmCluster.start()
        let work = try TemporaryDirectory(prefix: "mirror-slurm-job")

        let nodes = try cluster.succeed("sinfo", ["--noheader", "--Node", "--format", "%N %T %P"])
        #expect(nodes.trimmingCharacters(in: .whitespacesAndNewlines) == "localhost idle mirror*", "\(nodes)")
        for port in [cluster.controllerPort, cluster.nodePort] {
            #expect(Self.listeners(on: port) == ["127.0.0.1"], "port \(port) is bound to loopback only")
        }

        // Each task writes what Slurm told it; task 2 fails with status 3.
        let script = try work.write(Data("""
            #!/bin/sh
            echo "$SLURM_ARRAY_TASK_ID $SLURM_ARRAY_TASK_COUNT" > "task-$SLURM_ARRAY_TASK_ID"
            [ "$SLURM_ARRAY_TASK_ID" = 2 ] && exit 3
            exit 0

            """.utf8), to: "task.sh")
        let job = try cluster.submit(script, options: ["--array=0-2", "--output=/dev/null"], in: work.path)
        let tasks = try await cluster.waitUntilFinished(job)
        #expect(tasks.map(\.state) == ["COMPLETED", "COMPLETED", "FAILED"], "\(tasks)")
        #expect(tasks.map(\.exitStatus) == [0, 0, 3])
        for index in 0..<3 {
            #expect(work.contents(of: "task-\(index)").map { String(decoding: $0, as: UTF8.self) } == "\(index) 3\n")
        }

        // A task that would run for a minute, cancelled as soon as it runs.
        let sleeper = try work.write(Data("#!/bin/sh\nexec sleep 60\n".utf8), to: "sleep.sh")
        let long = try cluster.submit(sleeper, options: ["--array=0", "--output=/dev/null"], in: work.path)
        try await cluster.waitUntilRunning(long, task: 0)
        try cluster.cancel(long, task: 0)
        let cancelled = try await cluster.waitUntilFinished(long, timeout: .seconds(30))
        #expect(cancelled.map(\.state) == ["CANCELLED"], "\(cancelled)")

        // A job left running when the cluster stops is cancelled with it.
        let leftOver = try cluster.submit(sleeper, options: ["--output=/dev/null"], in: work.path)
        try await cluster.waitUntilRunning(leftOver, task: 0)
        let pids = cluster.daemonPIDs
        #expect(pids.count == 3)
        cluster.stop()
        for pid in pids {
            #expect(kill(pid, 0) != 0, "daemon \(pid) is gone")
        }
        #expect(!FileManager.default.fileExists(atPath: cluster.directory.path))
    }

    /// The local addresses with a listening TCP socket on `port`, from /proc/net/tcp.
    static func listeners(on port: UInt16) -> [String] {
        // Read whole: Foundation's String(contentsOfFile:) returned the first page of it only,
        // and with a full test run's sockets open the listening ones were further down.
        let table = (try? WholeFile.read(path: "/proc/net/tcp")).map { String(decoding: $0, as: UTF8.self) } ?? ""
        return table.split(separator: "\n").dropFirst().compactMap { line in
            let columns = line.split(separator: " ")
            // local_address is "0100007F:1F90" (address little-endian, port big-endian); 0A is LISTEN.
            guard columns.count > 3, columns[3] == "0A" else { return nil }
            let local = columns[1].split(separator: ":")
            guard local.count == 2, UInt16(local[1], radix: 16) == port, let raw = UInt32(local[0], radix: 16) else { return nil }
            let bytes = withUnsafeBytes(of: raw.littleEndian) { Array($0) }
            return bytes.map(String.init).joined(separator: ".")
        }
    }
}
