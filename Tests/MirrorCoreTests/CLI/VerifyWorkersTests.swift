import Foundation
import Glibc
import Testing

/// `verify` runs its entries on `concurrency` workers that each take the next entry, reading
/// the store's records from one snapshot: no thread hop and no lock per entry, and the same
/// answers in the manifest's order, whichever way the records are read.
@Suite(.serialized)
struct VerifyWorkersTests {
    /// The `futex` calls of a run, from `strace -c`'s summary.
    static func futexCalls(inSummary text: String) -> Int? {
        for line in text.split(separator: "\n") where line.hasSuffix(" futex") {
            let columns = line.split(separator: " ", omittingEmptySubsequences: true)
            // % time, seconds, usecs/call, calls, [errors,] syscall
            if columns.count >= 5 { return Int(columns[3]) }
        }
        return nil
    }

    @Test func twoThousandEntriesAreVerifiedWithoutAThreadHopEach() throws {
        let strace = try ExternalCommand.executable("strace", package: "strace")
        let scenario = try BufferedOutputTests.syncedLocalFiles(2000)
        let summary = scenario.directory.path("futex")
        // One worker: a hop per entry shows at any load, while the contention of several
        // workers on a lock or a malloc arena comes and goes with what else the machine runs.
        let verified = try scenario.run(["verify", "--concurrency", "1", "m.yaml"],
                                        launcher: [strace, "-f", "-c", "-e", "trace=futex", "-o", summary])
        #expect(verified.status == 0, "\(verified)")
        let lines = verified.stdout.split(separator: "\n")
        #expect(lines.count == 2001)
        #expect(lines.prefix(2000).enumerated().allSatisfy { $0.element == "ok          f\($0.offset).txt" }, "in the manifest's order")
        // And with the manifest's 8 workers, the same lines in the same order.
        let again = try scenario.run(["verify", "m.yaml"])
        #expect(again.status == 0 && again.stdout == verified.stdout, "\(again)")
        let text = String(decoding: try Data(contentsOf: URL(fileURLWithPath: summary)), as: UTF8.self)
        let calls = try #require(Self.futexCalls(inSummary: text), "strace's summary:\n\(text)")
        // A hop to a pool thread and back per entry made several futex calls an entry.
        #expect(calls < 200, "\(calls) futex calls for 2,000 entries:\n\(text)")
    }

    /// A root that does not exist is looked for by every entry, each on its own: the workers
    /// used to take turns at a lock around the root's `open`, and on two cores spent half a
    /// `verify` of 100,000 entries spinning for it (4.8 s, now 0.8).
    @Test func workersLookForAMissingRootWithoutWaitingForEachOther() throws {
        let strace = try ExternalCommand.executable("strace", package: "strace")
        let scenario = try BufferedOutputTests.localFiles(2000)
        let whole = String(decoding: try Data(contentsOf: URL(fileURLWithPath: scenario.directory.path("m.yaml"))), as: UTF8.self)
        _ = try scenario.write(text: whole.replacingOccurrences(of: "root: ./root\n", with: "root: ./absent\n"), to: "absent.yaml")
        let summary = scenario.directory.path("futex")
        let verified = try scenario.run(["verify", "--concurrency", "8", "absent.yaml"],
                                        launcher: [strace, "-f", "-c", "-e", "trace=futex", "-o", summary])
        #expect(verified.status == 1, "\(verified)")
        let missing = verified.stderr.split(separator: "\n").filter { $0.hasPrefix("missing ") }
        #expect(missing.count == 2000, "\(verified)")
        let text = String(decoding: try Data(contentsOf: URL(fileURLWithPath: summary)), as: UTF8.self)
        let calls = try #require(Self.futexCalls(inSummary: text), "strace's summary:\n\(text)")
        #expect(calls < 400, "\(calls) futex calls for 2,000 entries:\n\(text)")
    }

    /// Entries in subdirectories: each worker keeps the directory of its last entry open while
    /// the next ones are in it too, and looks for `DEST.part` only where `DEST` is missing (to
    /// say that there is a partial download): one system call an entry instead of four.
    @Test func entriesInADirectoryCostOneLookEach() throws {
        let strace = try ExternalCommand.executable("strace", package: "strace")
        let scenario = try SyncScenario()
        var manifest = "version: 1\nallow_file: true\nroot: ./root\nconcurrency: 8\nfiles:\n"
        for index in 0..<2000 {
            let source = try scenario.directory.write(Data("file \(index)\n".utf8), to: "source/f\(index).txt")
            manifest += "  - url: \"file://\(source)\"\n    dest: d\(index / 1000)/f\(index).txt\n"
        }
        _ = try scenario.write(text: manifest)
        let synced = try scenario.run(["sync", "--quiet", "m.yaml"])
        #expect(synced.status == 0, "\(synced)")
        // One DEST gone with a partial download left, one gone without.
        #expect(rename(scenario.rootPath("d0/f7.txt"), scenario.rootPath("d0/f7.txt.part")) == 0)
        #expect(unlink(scenario.rootPath("d1/f1500.txt")) == 0)
        let summary = scenario.directory.path("calls")
        let verified = try scenario.run(["verify", "m.yaml"], launcher: [strace, "-f", "-c", "-e", "trace=openat,openat2,newfstatat,close", "-o", summary])
        #expect(verified.status == 1, "\(verified)")
        #expect(verified.stdout.split(separator: "\n").filter { $0.hasPrefix("ok ") }.count == 1998, "\(verified)")
        let problems = verified.stderr.split(separator: "\n")
        #expect(problems.contains("missing     d0/f7.txt: a partial download of 7 bytes exists"), "\(verified)")
        #expect(problems.contains("missing     d1/f1500.txt"), "\(verified)")
        let text = String(decoding: try Data(contentsOf: URL(fileURLWithPath: summary)), as: UTF8.self)
        func calls(_ name: String) -> Int {
            for line in text.split(separator: "\n") where line.hasSuffix(" " + name) {
                let columns = line.split(separator: " ", omittingEmptySubsequences: true)
                if columns.count >= 5 { return Int(columns[3]) ?? 0 }
            }
            return 0
        }
        // The directories: a few opens for each worker, not one for each entry (by openat2, or
        // one component at a time by openat on a kernel without it; the libraries and the
        // manifest take about a hundred).
        #expect(calls("openat2") + calls("openat") < 400, "\(text)")
        // DEST for every entry, DEST.part for the two without one, and what the run reads besides.
        #expect(calls("newfstatat") < 2300, "\(text)")
    }

    /// A store of many more rows than the manifest's entries is read a row at a time (through
    /// its lock), not whole: the answers are the same.
    @Test(arguments: [false, true])
    func theAnswersAreTheSameWhetherTheStoreIsReadWholeOrByRow(manifestOfFew: Bool) throws {
        let scenario = try BufferedOutputTests.syncedLocalFiles(1100)
        // f1 changed in place (same size, a later date), f2 gone.
        let changed = scenario.directory.path("root/f1.txt")
        try Data("FILE 1\n".utf8).write(to: URL(fileURLWithPath: changed))
        var later = [timespec(tv_sec: time(nil) + 5, tv_nsec: 0), timespec(tv_sec: time(nil) + 5, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, changed, &later, 0) == 0)
        #expect(unlink(scenario.directory.path("root/f2.txt")) == 0)
        var manifest = "m.yaml"
        if manifestOfFew {
            // The same root and store, five of its 1,100 entries: more than 1,024 and twice five rows.
            let whole = String(decoding: try Data(contentsOf: URL(fileURLWithPath: scenario.directory.path("m.yaml"))), as: UTF8.self)
            let kept = whole.split(separator: "\n", omittingEmptySubsequences: false).prefix(5 + 2 * 5)
            _ = try scenario.write(text: kept.joined(separator: "\n") + "\n", to: "few.yaml")
            manifest = "few.yaml"
        }
        let verified = try scenario.run(["verify", manifest])
        #expect(verified.status == 1, "\(verified)")
        #expect(verified.stdout.split(separator: "\n").filter { $0.hasPrefix("ok ") }.count == (manifestOfFew ? 3 : 1098), "\(verified)")
        let problems = verified.stderr.split(separator: "\n")
        #expect(problems.contains { $0.hasPrefix("modified    f1.txt: sha256 is ") }, "\(verified)")
        #expect(problems.contains { $0 == "missing     f2.txt" }, "\(verified)")
    }
}
