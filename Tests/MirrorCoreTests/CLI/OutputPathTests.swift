import Foundation
import Glibc
import Testing

/// Every output the `mirror` binary writes (`sync --report`, `sync --metrics-file`,
/// `report --failed-manifest`) against every kind of path it may be given: a regular file is
/// replaced whole, a new one created; `-`, a link to standard output (a file, or a pipe), a
/// character device and a FIFO with a reader are written in place and stay what they were; a
/// FIFO that no one reads and a device that refuses writes are errors named on stderr, never a
/// hang; a directory is refused.
@Suite(.serialized)
struct OutputPathTests {
    /// One output option, and how a run that writes it looks.
    enum Output: String, CaseIterable, CustomTestStringConvertible {
        case report = "--report"
        case metricsFile = "--metrics-file"
        case failedManifest = "--failed-manifest"

        var testDescription: String { rawValue }

        func arguments(writingTo path: String) -> [String] {
            switch self {
            case .report, .metricsFile: ["sync", "--quiet", "m.yaml", rawValue, path]
            case .failedManifest: ["report", "--quiet", "r.json", rawValue, path]
            }
        }

        /// Text every version of the output holds.
        var marker: String {
            switch self {
            case .report: "\"mirror_report\":"
            case .metricsFile: "mirror_exit_code{"
            case .failedManifest: "version: 1\n"
            }
        }

        /// The exit status of a run whose output was written: one entry fails in each.
        static let statusWhenWritten: Int32 = 1

        /// `sync` keeps its own status when an output cannot be written; `report` ends with 2.
        var statusWhenNotWritten: Int32 { self == .failedManifest ? 2 : 1 }
    }

    /// What is at the output's path before the run.
    enum Form: String, CaseIterable, CustomTestStringConvertible {
        case regularFile, newFile, dash, linkToStandardOutput, linkToStandardOutputOnAPipe
        case characterDevice, characterDeviceThatIsFull, fifoWithAReader, fifoWithoutAReader, directory

        var testDescription: String { rawValue }
    }

    /// A directory with a manifest of two `file://` entries (one missing, so each run has a
    /// failed entry) and the report of a sync of it, for `report --failed-manifest` to read.
    static func prepared() throws -> SyncScenario {
        let scenario = try SyncScenario()
        let present = try scenario.directory.write(Data("here".utf8), to: "source/present.txt")
        try scenario.write(text: """
            version: 1
            allow_file: true
            root: ./root
            files:
              - url: "file://\(present)"
                dest: present.txt
              - url: "file://\(scenario.directory.path("source/missing.txt"))"
                dest: missing.txt
            """)
        let first = try scenario.run(["sync", "--quiet", "m.yaml", "--report", "r.json"])
        #expect(first.status == 1, "\(first)")
        return scenario
    }

    static func fileType(_ path: String) -> mode_t? {
        var info = stat()
        return lstat(path, &info) == 0 ? info.st_mode & S_IFMT : nil
    }

    @Test(arguments: Output.allCases, Form.allCases)
    func everyOutputIsWrittenToEachKindOfPathWithoutReplacingIt(output: Output, form: Form) throws {
        let scenario = try Self.prepared()
        let path = scenario.directory.path("out")
        var expectedType: mode_t? = S_IFREG
        var reader: Int32 = -1
        defer { if reader >= 0 { close(reader) } }
        switch form {
        case .regularFile:
            try scenario.directory.write(Data("old contents\n".utf8), to: "out")
            #expect(chmod(path, 0o640) == 0)
        case .newFile, .dash:
            expectedType = form == .dash ? nil : S_IFREG
        case .linkToStandardOutput, .linkToStandardOutputOnAPipe:
            #expect(symlink("/dev/stdout", path) == 0)
            expectedType = S_IFLNK
        case .characterDevice, .characterDeviceThatIsFull:
            // /dev/null's or /dev/full's numbers, in the test's own directory: the machine's
            // devices are never touched.
            try #require(geteuid() == 0, "making a device node needs root; the suite runs as root (make test)")
            #expect(mknod(path, S_IFCHR | 0o666, dev_t(1 << 8 | (form == .characterDevice ? 3 : 7))) == 0)
            expectedType = S_IFCHR
        case .fifoWithAReader, .fifoWithoutAReader:
            #expect(mkfifo(path, 0o600) == 0)
            if form == .fifoWithAReader {
                reader = open(path, O_RDONLY | O_NONBLOCK)
                #expect(reader >= 0)
            }
            expectedType = S_IFIFO
        case .directory:
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
            expectedType = S_IFDIR
        }

        let result: MirrorBinary.Result
        let arguments = output.arguments(writingTo: form == .dash ? "-" : "out")
        if form == .linkToStandardOutputOnAPipe {
            // Read as it is written, so that no output can fill the pipe; and only until mirror
            // has exited (a process started meanwhile by another test may hold the write end).
            let pipe = Pipe()
            let running = try scenario.start(arguments, standardOutput: pipe.fileHandleForWriting, timeout: .seconds(30))
            try pipe.fileHandleForWriting.close()
            let descriptor = pipe.fileHandleForReading.fileDescriptor
            _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
            var piped: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            var exited = false
            while true {
                var ready = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                _ = poll(&ready, 1, 50)
                let count = read(descriptor, &chunk, chunk.count)
                if count > 0 {
                    piped += chunk[..<count]
                } else if count == 0 || exited {
                    break
                } else if !running.process.isRunning {
                    exited = true
                }
            }
            result = try running.wait()
            #expect(String(decoding: piped, as: UTF8.self).contains(output.marker), "\(result)")
        } else {
            result = try scenario.start(arguments, timeout: .seconds(30)).wait()
        }
        #expect(Self.fileType(path) == expectedType, "\(form) is still what it was")
        #expect(scenario.directory.listing().filter { $0.hasPrefix(".out") }.isEmpty, "no temporary file left")

        let written = String(decoding: scenario.directory.contents(of: "out") ?? Data(), as: UTF8.self)
        switch form {
        case .regularFile, .newFile:
            #expect(result.status == Output.statusWhenWritten, "\(result)")
            #expect(written.contains(output.marker) && !written.contains("old contents"), "\(written)")
            var info = stat()
            #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == (form == .regularFile ? 0o640 : 0o666 & ~Self.umask()),
                    "a replaced file keeps its mode")
        case .dash, .linkToStandardOutput:
            #expect(result.status == Output.statusWhenWritten, "\(result)")
            #expect(result.stdout.contains(output.marker), "\(result)")
        case .linkToStandardOutputOnAPipe:
            #expect(result.status == Output.statusWhenWritten, "\(result)")
        case .characterDevice:
            #expect(result.status == Output.statusWhenWritten, "\(result)")
            #expect(!result.stderr.contains("cannot write") && !result.stderr.contains("out is "), "\(result)")
        case .fifoWithAReader:
            #expect(result.status == Output.statusWhenWritten, "\(result)")
            var bytes = [UInt8](repeating: 0, count: 1 << 16)
            let count = read(reader, &bytes, bytes.count)
            #expect(count > 0 && String(decoding: bytes[..<max(count, 0)], as: UTF8.self).contains(output.marker))
        case .characterDeviceThatIsFull:
            #expect(result.status == output.statusWhenNotWritten, "\(result)")
            #expect(result.stderr.contains("cannot write out: No space left on device"), "\(result)")
        case .fifoWithoutAReader:
            #expect(result.status == output.statusWhenNotWritten, "\(result)")
            #expect(result.stderr.contains("out is a FIFO that no process is reading"), "\(result)")
        case .directory:
            #expect(result.status == output.statusWhenNotWritten, "\(result)")
            #expect(result.stderr.contains("out is a directory"), "\(result)")
        }
    }

    /// The metrics file's last success is carried over from a regular file only: through a
    /// link the file it names is replaced and read, and the link stays.
    @Test func theLastSuccessIsCarriedOverThroughALinkAndTheLinkKept() throws {
        let scenario = try SyncScenario()
        let present = try scenario.directory.write(Data("here".utf8), to: "source/present.txt")
        try scenario.write(text: "version: 1\nallow_file: true\nroot: ./root\nfiles:\n  - url: \"file://\(present)\"\n")
        try FileManager.default.createDirectory(atPath: scenario.directory.path("textfile"), withIntermediateDirectories: false)
        #expect(symlink(scenario.directory.path("textfile/mirror.prom"), scenario.directory.path("link.prom")) == 0)
        #expect(try scenario.run(["sync", "--quiet", "m.yaml", "--metrics-file", "textfile/mirror.prom"]).status == 0)
        let first = scenario.text(of: "textfile/mirror.prom")
        let success = try #require(first.split(separator: "\n").first { $0.hasPrefix("mirror_last_success_timestamp_seconds{") })

        try scenario.write(text: "version: 1\nallow_file: true\nroot: ./root\nfiles:\n  - url: \"file://\(scenario.directory.path("absent"))\"\n")
        let failed = try scenario.run(["sync", "--quiet", "m.yaml", "--metrics-file", "link.prom"])
        #expect(failed.status == 1, "\(failed)")
        #expect(Self.fileType(scenario.directory.path("link.prom")) == S_IFLNK)
        let second = scenario.text(of: "textfile/mirror.prom")
        #expect(second.contains("mirror_exit_code{manifest=\"\(scenario.directory.path("m.yaml"))\"} 1"), "\(second)")
        #expect(second.contains(success), "the last success is carried over:\n\(second)")
        #expect(scenario.directory.listing("textfile") == ["mirror.prom"])
    }

    /// An empty output path is a usage error naming the option (it was accepted, and the run
    /// ended 0 after failing to rename to "").
    @Test(arguments: Output.allCases)
    func anEmptyOutputPathIsAUsageError(output: Output) throws {
        let scenario = try SyncScenario()
        let present = try scenario.directory.write(Data("here".utf8), to: "source/present.txt")
        try scenario.write(text: "version: 1\nallow_file: true\nroot: ./root\nfiles:\n  - url: \"file://\(present)\"\n")
        let arguments = output == .failedManifest
            ? ["report", "shard.json", "--failed-manifest", ""]
            : ["sync", "--quiet", "m.yaml", output.rawValue, ""]
        let result = try scenario.run(arguments)
        #expect(result.status == 2, "\(result)")
        #expect(result.stderr.contains("\(output.rawValue) is empty"), "\(result)")
        #expect(scenario.directory.listing("root").isEmpty, "nothing was synced: \(result)")
    }

    static func umask() -> mode_t {
        let current = Glibc.umask(0o022)
        Glibc.umask(current)
        return current
    }
}
