import Foundation
import Testing
@testable import MirrorCore

/// Random server behaviour, run after run on one root: versions that change (with or without
/// validators, same size or not), bodies cut short, lengths that lie, ranges that start or end
/// elsewhere, a part for the whole, 503s, a server that ignores If-Range. Whatever happens, a
/// `DEST` is only ever a whole version the server published, and an entry reported done is the
/// version the server published last.
@Suite(.serialized)
struct RandomRepliesTests {
    struct Version {
        var data: Data
        var etag: String?
        var lastModified: String?
    }

    /// A reply for `version`, whole or spoiled in one of the ways servers spoil them.
    static func reply<G: RandomNumberGenerator>(_ version: Version, _ generator: inout G) -> FaultReply {
        let honest = FaultReply.file(version.data, etag: version.etag, lastModified: version.lastModified,
                                     honorIfRange: Int.random(in: 0..<4, using: &generator) > 0)
        let count = version.data.count
        let somewhere = Int.random(in: 0...max(0, count - 1), using: &generator)
        switch Int.random(in: 0..<11, using: &generator) {
        case 0: return honest.cut(afterBodyBytes: somewhere)
        case 1: return honest.header("Content-Length", nil).cut(afterBodyBytes: somewhere)
        // A Content-Length longer than the body: the body ends short, which one reply shows.
        // (One shorter than the body cannot be told from a whole file of that length without a
        // second answer to compare it with; sync sends none for a file whose record names its
        // version, as for a file first downloaded: docs/DESIGN.md, "One request per entry".)
        case 2: return honest.contentLength(count + 1 + somewhere)
        case 3: return honest.misreportingRange(start: somewhere)
        case 4: return honest.misreportingRange(total: count + 1 + somewhere)
        case 5: return .status(503, headers: ["Retry-After": "0"])
        case 6:
            let head = "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-\(somewhere)/*\r\nContent-Length: \(somewhere + 1)\r\n\r\n"
            return .raw(Data(head.utf8) + version.data.prefix(somewhere + 1))
        case 7:
            let head = "HTTP/1.1 200 OK\r\nContent-Length: \(somewhere)\r\nContent-Length: \(count)\r\n\r\n"
            return .raw(Data(head.utf8) + version.data.prefix(somewhere))
        case 8: return honest.chunked()
        default: return honest
        }
    }

    static func version<G: RandomNumberGenerator>(_ index: Int, sameSizeAs previous: Version?, _ generator: inout G) -> Version {
        let count = previous.map { Bool.random(using: &generator) ? $0.data.count : Int.random(in: 1...180_000, using: &generator) }
            ?? Int.random(in: 1...180_000, using: &generator)
        let date = HTTPDate.format(Int64(784_111_777 + index * 60))!
        switch Int.random(in: 0..<4, using: &generator) {
        case 0: return Version(data: randomData(count: count, seed: UInt64(1_000 + index)), etag: "\"v\(index)\"", lastModified: date)
        case 1: return Version(data: randomData(count: count, seed: UInt64(1_000 + index)), etag: "\"v\(index)\"")
        case 2: return Version(data: randomData(count: count, seed: UInt64(1_000 + index)), lastModified: date)
        default:
            // Nothing names the version: only the bytes tell.
            var data = previous?.data ?? randomData(count: count, seed: UInt64(1_000 + index))
            if data.count != count { data = randomData(count: count, seed: UInt64(1_000 + index)) }
            // A change a resume's 64 KiB overlap would not see.
            data.replaceSubrange(0..<min(100, data.count), with: randomData(count: min(100, data.count), seed: UInt64(5_000 + index)))
            return Version(data: data)
        }
    }

    @Test func everyRunLeavesAWholePublishedVersionOrTheOldFile() async throws {
        var generator = SeededGenerator(seed: 0xB0)
        let scenario = try SyncScenario(.faultServer)
        let server = scenario.server
        defer { server.stop() }
        let manifest = try scenario.load(.files(.url(server.url("/r.bin"), "retries: 3")))
        var published: [Data] = []
        var current: Version?
        var completed = 0

        for round in 0..<60 {
            if current == nil || Int.random(in: 0..<3, using: &generator) == 0 {
                current = Self.version(round, sameSizeAs: current, &generator)
                published.append(current!.data)
            }
            let version = current!
            server.route("/r.bin", method: "HEAD", replies: [Self.reply(version, &generator), .file(version.data, etag: version.etag, lastModified: version.lastModified)])
            // A few spoiled replies, then an honest one: retries reach it unless they run out.
            let spoiled = (0..<Int.random(in: 0...3, using: &generator)).map { _ in Self.reply(version, &generator) }
            server.route("/r.bin", method: "GET", replies: spoiled + [.file(version.data, etag: version.etag, lastModified: version.lastModified)])

            let report = try await scenario.sync(
                manifest, .init(concurrency: 1, retryPolicy: RetryPolicy(base: .milliseconds(1), cap: .milliseconds(2))))[0]
            let onDisk = scenario.local("r.bin")
            if let onDisk {
                #expect(published.contains(onDisk), "round \(round): DEST (\(onDisk.count) bytes) is no version the server published")
            }
            if !report.failed {
                completed += 1
                #expect(onDisk == version.data, "round \(round): \(report.outcome) but DEST is not the current version")
            }
        }
        #expect(completed > 30, "most runs reach the honest reply")
    }
}
