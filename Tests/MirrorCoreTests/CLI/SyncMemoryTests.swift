import Foundation
import Testing

/// What a run keeps of an entry once the entry is done is its result, not the machinery that
/// fetched it: a sync that downloads ten times the files peaks at about the same memory, plus
/// what the manifest and the results themselves take.
@Suite(.serialized)
struct SyncMemoryTests {
    /// Runs `mirror arguments` under a python3 wrapper that writes the run's peak resident set
    /// (`ru_maxrss` of its child, KiB) to `file`, and returns it.
    static func peakKiB(of scenario: SyncScenario, _ arguments: [String], file: String) throws -> Int {
        let python = try ExternalCommand.executable("python3", package: "python3")
        let wrapper = """
            import resource, subprocess, sys
            status = subprocess.call(sys.argv[2:])
            open(sys.argv[1], "w").write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
            sys.exit(status)
            """
        let path = scenario.directory.path(file)
        let result = try scenario.run(arguments, launcher: [python, "-c", wrapper, path])
        #expect(result.status == 0, "\(result)")
        let text = String(decoding: try Data(contentsOf: URL(fileURLWithPath: path)), as: UTF8.self)
        return try #require(Int(text.trimmingCharacters(in: .whitespacesAndNewlines)), "peak: \(text)")
    }

    /// Every finished download used to stay in memory to the end of the process (its lead's
    /// split callback held the download's driver, which held the lead): about 8 KB a file,
    /// 825 MB for a sync of 100,000 new files. 300 and 3,000 new files from nginx now peak
    /// within 4 KB a file of each other (the manifest's entries and the results take about 2).
    @Test func aSyncOfTenTimesTheFilesDoesNotKeepEachDownload() throws {
        var site: [String: Data] = [:]
        for index in 0..<3000 { site["f/\(index)"] = Data("file \(index)\n".utf8) }
        let scenario = try SyncScenario(.nginx(site: site))
        for (name, count) in [("few", 300), ("many", 3000)] {
            var manifest = "version: 1\nroot: ./\(name)\nconcurrency: 8\nfiles:\n"
            for index in 0..<count { manifest += "  - url: \(scenario.url("/f/\(index)"))\n" }
            _ = try scenario.write(text: manifest, to: "\(name).yaml")
        }
        let few = try Self.peakKiB(of: scenario, ["sync", "--quiet", "--no-fsync", "few.yaml"], file: "few.peak")
        let many = try Self.peakKiB(of: scenario, ["sync", "--quiet", "--no-fsync", "many.yaml"], file: "many.peak")
        #expect(FileManager.default.fileExists(atPath: scenario.directory.path("many/2999")))
        let perFile = Double(many - few) * 1024 / 2700
        #expect(perFile < 4096, "peak \(few) KiB for 300 new files, \(many) KiB for 3,000: \(Int(perFile)) bytes more a file")
    }
}
