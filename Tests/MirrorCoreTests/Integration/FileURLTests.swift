import Foundation
import Testing
@testable import MirrorCore

/// `file://` sources (with `allow_file: true`) go through the same planning and transfer rules.
struct FileURLTests {
    @Test func aFileSourceDownloadsSkipsAndResumes() async throws {
        let scenario = try SyncScenario()
        let directory = scenario.directory
        let data = randomData(count: 300_000, seed: 95)
        let source = try directory.write(data, to: "src/a.bin")
        let manifest = try scenario.load(ManifestText(root: "out", top: ["allow_file: true"], entries: [.url("file://\(source)")]))
        let runner = { scenario.runner(manifest, .init(concurrency: 1, retryPolicy: .standard)) }

        #expect(try await runner().sync().map(\.outcome) == [.transferred])
        #expect(try await runner().sync().map(\.outcome) == [.skipped])
        try data.prefix(100_000).write(to: URL(fileURLWithPath: directory.path("out/a.bin")))
        let plan = await runner().plan()
        #expect(plan[0].action == .resume(from: 100_000, source: .destination))
        let resumed = try await runner().sync()
        #expect(resumed[0].outcome == .transferred && resumed[0].bytesTransferred == 200_000)
        #expect(directory.contents(of: "out/a.bin")?.fingerprint == data.fingerprint)
    }

    /// A file source has no HTTP reply: its date is the file's time, recorded as its
    /// Last-Modified, and a same-size change is seen through it (FTP's, from MDTM, in
    /// `FTPTests`).
    @Test func aFileSourcesTimeIsItsLastModified() async throws {
        let scenario = try SyncScenario()
        let directory = scenario.directory
        let source = try directory.write(randomData(count: 10_000, seed: 96), to: "src/a.bin")
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: 1_700_000_000)], ofItemAtPath: source)
        let manifest = try scenario.load(ManifestText(root: "root", top: ["allow_file: true"], entries: [.url("file://\(source)")]))
        let runner = { scenario.runner(manifest, .init(concurrency: 1, retryPolicy: .standard)) }

        #expect(try await runner().sync().map(\.outcome) == [.transferred])
        #expect(try scenario.record("a.bin")?.complete?.validators.lastModified == "Tue, 14 Nov 2023 22:13:20 GMT")
        let changed = randomData(count: 10_000, seed: 97)
        try changed.write(to: URL(fileURLWithPath: source))
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: 1_700_000_060)], ofItemAtPath: source)
        let again = try await runner().sync()
        #expect(again.map(\.outcome) == [.transferred], "\(again.map(\.action))")
        #expect(directory.contents(of: "root/a.bin")?.fingerprint == changed.fingerprint)
    }

    @Test func aFileSourceIsRefusedWithoutAllowFile() {
        #expect(throws: ManifestError.self) {
            _ = try ManifestLoader.parse(text: "version: 1\nfiles:\n  - url: file:///etc/hostname\n", path: "f.yaml",
                                         baseDirectory: "/", environment: [:])
        }
    }
}

/// libcurl opens a file URL's path itself, with a blocking open: a FIFO there held the
/// transfer engine's thread, so the run never ended, neither by its timeout nor by SIGTERM.
@Suite(.serialized)
struct FileURLFIFOTests {
    @Test func aFIFOAsAFileSourceFailsAtOnceAndSIGTERMStillEndsTheRun() throws {
        let scenario = try SyncScenario(.faultServer)
        let directory = scenario.directory
        let fifo = directory.path("pipe")
        #expect(mkfifo(fifo, 0o600) == 0)
        // A second entry that stays in flight, so there is a run left to end with SIGTERM.
        let server = scenario.server
        server.route("/slow.bin", reply: .file(randomData(count: 1000, seed: 96)).delayed(by: .seconds(30)))
        try scenario.write(ManifestText(root: "out", top: ["allow_file: true", "concurrency: 2"], entries: [
            .url("file://\(fifo)", dest: "pipe.bin"),
            .url(server.url("/slow.bin"), dest: "slow.bin", "timeout: 60s"),
        ]))

        let running = try scenario.start(["sync", "m.yaml"], timeout: .seconds(30))
        let deadline = ContinuousClock.now + .seconds(15)
        func stderr() -> String { String(decoding: running.scratch.contents(of: "stderr") ?? Data(), as: UTF8.self) }
        while !stderr().contains("FAILED pipe.bin") && ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.02)
        }
        #expect(stderr().contains("FAILED pipe.bin: \(fifo) is a FIFO; mirror reads only regular files from file URLs"), "\(stderr())")
        #expect(stderr().contains("1 attempt"), "not retried")
        #expect(server.waitForRequests(1, timeout: .seconds(15)).count == 1, "the other entry is in flight")
        kill(running.pid, SIGTERM)
        let result = try running.wait()
        #expect(result.status == 143, "\(result)")
        #expect(!directory.listing("out").contains { $0.hasPrefix("pipe.bin") })
    }
}
