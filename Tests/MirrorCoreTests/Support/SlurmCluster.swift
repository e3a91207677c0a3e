import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Why a `SlurmCluster` could not be started or asked something.
enum SlurmClusterError: Error, CustomStringConvertible {
    case notInstalled(program: String)
    case notRoot
    case failedToStart(reason: String, log: String)
    case commandFailed(ExternalCommand.Result)
    case timedOut(waitingFor: String, log: String)

    var description: String {
        switch self {
        case .notInstalled(let program):
            "\(program) not found: install Slurm and MUNGE with `apt-get install -y slurm-wlm munge` (make test does this)"
        case .notRoot:
            "a one-node Slurm cluster needs root: slurmd starts every job as its submitting user"
        case .failedToStart(let reason, let log):
            "the Slurm cluster failed to start: \(reason)\n--- logs ---\n\(log)"
        case .commandFailed(let result):
            "a Slurm command failed: \(result)"
        case .timedOut(let waitingFor, let log):
            "timed out waiting for \(waitingFor)\n--- logs ---\n\(log)"
        }
    }
}

/// One task of a job array as `scontrol show job` reports it.
struct SlurmArrayTask: Sendable, Equatable, CustomStringConvertible {
    /// The task's index (`SLURM_ARRAY_TASK_ID`).
    var index: Int
    /// PENDING, RUNNING, COMPLETED, FAILED, CANCELLED …
    var state: String
    /// The exit status of the batch script, 0 while it has none.
    var exitStatus: Int32
    /// The signal that ended it, 0 when none did.
    var signal: Int32

    /// States a task leaves no more.
    static let finalStates: Set<String> = [
        "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY",
    ]

    var isFinished: Bool { Self.finalStates.contains(state) }

    var description: String { "task \(index): \(state), exit \(exitStatus):\(signal)" }
}

/// Debian's Slurm as a one-node cluster on 127.0.0.1, for tests that submit real batch jobs:
/// `slurmctld` and `slurmd` on random loopback ports, authenticated by a `munged` of its own
/// with a fresh key and socket. Configuration, state, spool, logs and pid files all live in a
/// private temporary directory; clients reach this cluster and no other through `SLURM_CONF`
/// (see `environment`).
///
/// The node, `localhost`, has the machine's CPUs and lets four jobs share each of them
/// (`OverSubscribe=FORCE:4`), so a small job array runs at once even on one CPU. Jobs run as
/// root. `stop()`, or releasing the value, cancels every job, waits for the node to be empty,
/// then stops slurmd, slurmctld and munged by their pids and removes the directory.
final class SlurmCluster: Sendable {
    /// The one node's name, as `sinfo` and job records show it.
    static let nodeName = "localhost"
    static let partition = "mirror"

    let directory: TemporaryDirectory
    let controllerPort: UInt16
    let nodePort: UInt16
    /// munged, slurmctld and slurmd, in the order they were started.
    private let daemons: [SpawnedDaemon]
    private let stopped = Mutex(false)

    private init(directory: TemporaryDirectory, controllerPort: UInt16, nodePort: UInt16, daemons: [SpawnedDaemon]) {
        self.directory = directory
        self.controllerPort = controllerPort
        self.nodePort = nodePort
        self.daemons = daemons
    }

    deinit { stop() }

    /// The path of the cluster's `slurm.conf`.
    var configurationFile: String { directory.path("slurm.conf") }

    /// What a Slurm client (sbatch, squeue, scancel, sinfo, scontrol) needs in its environment
    /// to talk to this cluster. `sbatch` passes it on to the jobs.
    var environment: [String: String] { ["SLURM_CONF": configurationFile] }

    /// The pids of munged, slurmctld and slurmd while they run.
    var daemonPIDs: [pid_t] {
        daemons.filter(\.isRunning).map(\.pid)
    }

    // MARK: - Starting

    /// Starts munged, slurmctld and slurmd and returns once the node is idle.
    /// - Throws: `SlurmClusterError.notInstalled` naming the missing program, `.notRoot`,
    ///   `.failedToStart` with the daemons' logs when one exits or the node does not become
    ///   idle within `timeout`.
    static func start(timeout: Duration = .seconds(60)) async throws -> SlurmCluster {
        let programs = try Programs.locate()
        guard geteuid() == 0 else { throw SlurmClusterError.notRoot }
        // Ports are free when picked but may be taken before the daemons bind them; try again.
        var lastFailure = SlurmClusterError.failedToStart(reason: "no attempt made", log: "")
        for _ in 0..<3 {
            do {
                return try await startOnce(programs, timeout: timeout)
            } catch SlurmClusterError.failedToStart(let reason, let log) where log.contains("Address already in use") {
                lastFailure = .failedToStart(reason: reason, log: log)
            }
        }
        throw lastFailure
    }

    private static func startOnce(_ programs: Programs, timeout: Duration) async throws -> SlurmCluster {
        let deadline = ContinuousClock.now + timeout
        let directory = try TemporaryDirectory(prefix: "mirror-slurm")
        for folder in ["munge", "state", "spool", "log"] {
            try FileManager.default.createDirectory(atPath: directory.path(folder), withIntermediateDirectories: true)
        }
        // munged refuses a key that others may read.
        try directory.write(Data((0..<1024).map { _ in UInt8.random(in: 0...255) }), to: "munge/munge.key")
        guard chmod(directory.path("munge/munge.key"), 0o600) == 0 else { throw SystemCallError("chmod munge.key") }

        let address = try LoopbackAddress("127.0.0.1")
        let controllerPort = try LoopbackSocket.pickFreePort(on: address)
        var nodePort = try LoopbackSocket.pickFreePort(on: address)
        while nodePort == controllerPort { nodePort = try LoopbackSocket.pickFreePort(on: address) }
        try configuration(directory: directory, controllerPort: controllerPort, nodePort: nodePort)
            .write(toFile: directory.path("slurm.conf"), atomically: true, encoding: .utf8)

        var started: [SpawnedDaemon] = []
        func log() -> String { logs(directory) }
        func fail(_ reason: String) -> SlurmClusterError {
            let ended = started.filter { !$0.isRunning }.map { "pid \($0.pid): \($0.termination)" }
            for daemon in started.reversed() { daemon.terminateAndWait() }
            return .failedToStart(reason: reason + (ended.isEmpty ? "" : " (ended: \(ended.joined(separator: ", ")))"), log: log())
        }

        // --force: the private directory is not laid out as munged wants /run/munge to be.
        started.append(try launch(programs.munged, [
            "--foreground", "--force",
            "--socket=\(directory.path("munge/munge.socket"))", "--key-file=\(directory.path("munge/munge.key"))",
            "--pid-file=\(directory.path("munge/munged.pid"))", "--log-file=\(directory.path("log/munged.log"))",
            "--seed-file=\(directory.path("munge/munged.seed"))",
        ], output: directory.path("log/munged.out")))
        guard try await waitUntil(deadline, { FileManager.default.fileExists(atPath: directory.path("munge/munge.socket")) },
                                  while: started) else {
            throw fail("munged did not create its socket")
        }

        let configuration = directory.path("slurm.conf")
        started.append(try launch(programs.slurmctld, ["-D", "-f", configuration], output: directory.path("log/slurmctld.out")))
        guard try await waitUntil(deadline, { LoopbackSocket.acceptsConnections(on: address, port: controllerPort) },
                                  while: started) else {
            throw fail("slurmctld did not listen on 127.0.0.1:\(controllerPort)")
        }
        started.append(try launch(programs.slurmd, ["-D", "-N", nodeName, "-f", configuration],
                                  output: directory.path("log/slurmd.out")))
        let sinfo = try ExternalCommand.executable("sinfo", package: "slurm-client")
        // The node registers with slurmctld a moment after slurmd starts; until then it is
        // "unknown" (or "idle*": not responding).
        let idle = try await waitUntil(deadline, {
            let result = try? ExternalCommand.run(sinfo, ["--noheader", "--node", nodeName, "--format", "%T"],
                                                  in: directory.path, environment: ["SLURM_CONF": configuration],
                                                  timeout: .seconds(10))
            return result?.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "idle"
        }, while: started)
        guard idle else { throw fail("the node did not become idle") }
        return SlurmCluster(directory: directory, controllerPort: controllerPort, nodePort: nodePort, daemons: started)
    }

    /// Polls `condition` every 50 ms until it holds (true), `deadline` passes or one of
    /// `daemons` exits (false).
    private static func waitUntil(_ deadline: ContinuousClock.Instant, _ condition: () -> Bool,
                                  while daemons: [SpawnedDaemon]) async throws -> Bool {
        while true {
            if condition() { return true }
            if daemons.contains(where: { !$0.isRunning }) || ContinuousClock.now >= deadline { return false }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    private static func launch(_ executable: String, _ arguments: [String], output path: String) throws -> SpawnedDaemon {
        do {
            return try SpawnedDaemon.spawn(executable, arguments, output: path)
        } catch {
            throw SlurmClusterError.failedToStart(reason: "could not run \(executable): \(error)", log: "")
        }
    }

    private static func configuration(directory: TemporaryDirectory, controllerPort: UInt16, nodePort: UInt16) -> String {
        let cpus = max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        return """
            # Written by SlurmCluster for one test run: one node, everything in this directory.
            ClusterName=mirrortest
            SlurmctldHost=\(nodeName)(127.0.0.1)
            SlurmctldPort=\(controllerPort)
            SlurmdPort=\(nodePort)
            # Bind to the address the host name resolves to (127.0.0.1), not to every interface.
            CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
            SlurmUser=root
            SlurmdUser=root
            AuthType=auth/munge
            CredType=cred/munge
            AuthInfo=socket=\(directory.path("munge/munge.socket"))
            StateSaveLocation=\(directory.path("state"))
            SlurmdSpoolDir=\(directory.path("spool"))
            SlurmctldPidFile=\(directory.path("slurmctld.pid"))
            SlurmdPidFile=\(directory.path("slurmd.pid"))
            SlurmctldLogFile=\(directory.path("log/slurmctld.log"))
            SlurmdLogFile=\(directory.path("log/slurmd.log"))
            SlurmctldDebug=info
            SlurmdDebug=info
            MailProg=/bin/true
            ProctrackType=proctrack/linuxproc
            TaskPlugin=task/none
            JobAcctGatherType=jobacct_gather/none
            AccountingStorageType=accounting_storage/none
            JobCompType=jobcomp/none
            MpiDefault=none
            SelectType=select/cons_tres
            SelectTypeParameters=CR_CPU
            ReturnToService=2
            # A cancelled job's processes get SIGTERM, and SIGKILL this many seconds later.
            KillWait=10
            NodeName=\(nodeName) NodeAddr=127.0.0.1 CPUs=\(cpus) State=UNKNOWN
            PartitionName=\(partition) Nodes=\(nodeName) Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4

            """
    }

    private static func logs(_ directory: TemporaryDirectory) -> String {
        ["log/munged.log", "log/munged.out", "log/slurmctld.log", "log/slurmctld.out", "log/slurmd.log", "log/slurmd.out"]
            .compactMap { name in
                guard let text = try? String(contentsOfFile: directory.path(name), encoding: .utf8), !text.isEmpty else { return nil }
                return "== \(name) ==\n" + text
            }
            .joined(separator: "\n")
    }

    /// The daemons' logs so far, for failure messages.
    var logs: String { Self.logs(directory) }

    /// Where Debian installs the three daemons.
    private struct Programs {
        var munged: String
        var slurmctld: String
        var slurmd: String

        static func locate() throws -> Programs {
            func find(_ name: String) throws -> String {
                guard let found = ["/usr/sbin/", "/usr/bin/", "/usr/local/sbin/"].map({ $0 + name })
                    .first(where: { FileManager.default.isExecutableFile(atPath: $0) })
                else { throw SlurmClusterError.notInstalled(program: name) }
                return found
            }
            return Programs(munged: try find("munged"), slurmctld: try find("slurmctld"), slurmd: try find("slurmd"))
        }
    }

    // MARK: - Clients

    /// Runs the Slurm client `tool` (sbatch, squeue …) against this cluster, in `directory`
    /// (the cluster's own by default), with `environment` added.
    func run(_ tool: String, _ arguments: [String], in workingDirectory: String? = nil,
             environment extra: [String: String] = [:]) throws -> ExternalCommand.Result {
        let executable: String
        do {
            executable = try ExternalCommand.executable(tool, package: "slurm-client")
        } catch {
            throw SlurmClusterError.notInstalled(program: tool)
        }
        return try ExternalCommand.run(executable, arguments, in: workingDirectory ?? directory.path,
                                       environment: extra.merging(environment) { _, cluster in cluster },
                                       timeout: .seconds(30))
    }

    /// Like `run`, but a non-zero exit throws `commandFailed`.
    @discardableResult
    func succeed(_ tool: String, _ arguments: [String], in workingDirectory: String? = nil,
                 environment extra: [String: String] = [:]) throws -> String {
        let result = try run(tool, arguments, in: workingDirectory, environment: extra)
        guard result.status == 0 else { throw SlurmClusterError.commandFailed(result) }
        return result.stdout
    }

    /// Submits `script` (a path) with `sbatch options` and the script's `arguments`, from
    /// `workingDirectory` with `environment` added (sbatch passes its environment on to the
    /// job); returns the job id.
    func submit(_ script: String, options: [String], arguments: [String] = [], in workingDirectory: String,
                environment extra: [String: String] = [:]) throws -> Int {
        let output = try succeed("sbatch", ["--parsable"] + options + [script] + arguments, in: workingDirectory,
                                 environment: extra)
        // --parsable prints "JOBID" or "JOBID;CLUSTER".
        guard let id = Int(output.split(separator: ";").first?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") else {
            throw SlurmClusterError.commandFailed(ExternalCommand.Result(
                arguments: ["sbatch"], status: 0, stdout: output, stderr: "no job id in sbatch's output"))
        }
        return id
    }

    /// The tasks of the job array `job` (or the job itself as task 0), by index. A range of
    /// tasks that are still pending together counts as one entry per index.
    func tasks(of job: Int) throws -> [SlurmArrayTask] {
        let output = try succeed("scontrol", ["--oneliner", "show", "job", String(job)])
        var tasks: [SlurmArrayTask] = []
        for line in output.split(separator: "\n") {
            var fields: [String: String] = [:]
            for field in line.split(separator: " ") {
                guard let equals = field.firstIndex(of: "=") else { continue }
                fields[String(field[..<equals])] = String(field[field.index(after: equals)...])
            }
            let exit = (fields["ExitCode"] ?? "0:0").split(separator: ":").map { Int32($0) ?? 0 }
            for index in Self.indices(fields["ArrayTaskId"] ?? "0") {
                tasks.append(SlurmArrayTask(index: index, state: fields["JobState"] ?? "", exitStatus: exit.first ?? 0,
                                            signal: exit.count > 1 ? exit[1] : 0))
            }
        }
        return tasks.sorted { $0.index < $1.index }
    }

    /// The indices of an `ArrayTaskId` value: "3", "0-3", "0-3%2", "1,3-4".
    private static func indices(_ value: String) -> [Int] {
        let withoutLimit = value.split(separator: "%").first ?? ""
        return withoutLimit.split(separator: ",").flatMap { part -> [Int] in
            let bounds = part.split(separator: "-").compactMap { Int($0) }
            guard let low = bounds.first else { return [] }
            return Array(low...(bounds.last ?? low))
        }
    }

    /// Polls the job every 100 ms until each of its tasks has finished, and returns them.
    /// - Throws: `timedOut` with the daemons' logs after `timeout`.
    func waitUntilFinished(_ job: Int, timeout: Duration = .seconds(60)) async throws -> [SlurmArrayTask] {
        let deadline = ContinuousClock.now + timeout
        while true {
            let tasks = try self.tasks(of: job)
            if !tasks.isEmpty, tasks.allSatisfy(\.isFinished) { return tasks }
            if ContinuousClock.now >= deadline {
                throw SlurmClusterError.timedOut(waitingFor: "job \(job) to finish: \(tasks)", log: logs)
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    /// Polls every 50 ms until task `index` of `job` is running.
    func waitUntilRunning(_ job: Int, task index: Int, timeout: Duration = .seconds(30)) async throws {
        let deadline = ContinuousClock.now + timeout
        while true {
            let tasks = try self.tasks(of: job)
            if tasks.contains(where: { $0.index == index && $0.state == "RUNNING" }) { return }
            if ContinuousClock.now >= deadline {
                throw SlurmClusterError.timedOut(waitingFor: "task \(index) of job \(job) to run: \(tasks)", log: logs)
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Cancels task `index` of the array `job` (`scancel JOB_INDEX`): its processes get SIGTERM.
    func cancel(_ job: Int, task index: Int) throws {
        try succeed("scancel", ["\(job)_\(index)"])
    }

    // MARK: - Stopping

    /// Cancels every job and waits (up to 30 s) until none is left, then stops slurmd,
    /// slurmctld and munged by their pids (SIGTERM, SIGKILL after 5 s) and removes the
    /// directory. Idempotent.
    func stop() {
        let alreadyStopped = stopped.withLock { stopped in
            defer { stopped = true }
            return stopped
        }
        guard !alreadyStopped else { return }
        if daemons.allSatisfy(\.isRunning) { cancelEveryJob() }
        for daemon in daemons.reversed() { daemon.terminateAndWait() }
        directory.remove()
    }

    /// Jobs run under slurmstepd, which outlives slurmd: cancel them all and wait until the
    /// queue is empty and no step is left in the spool directory, so that no job process is
    /// left behind.
    private func cancelEveryJob() {
        _ = try? run("scancel", ["--partition", Self.partition])
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            let queue = (try? run("squeue", ["--noheader", "--format", "%A"]))?.stdout ?? ""
            let steps = (try? FileManager.default.contentsOfDirectory(atPath: directory.path("spool")))?
                .filter { $0.hasPrefix(Self.nodeName + "_") } ?? []
            if queue.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, steps.isEmpty { return }
            Thread.sleep(forTimeInterval: 0.1)
        }
    }
}
