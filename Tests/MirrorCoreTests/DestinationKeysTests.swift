import Foundation
import Testing
@testable import MirrorCore

/// The first reading keeps a fingerprint of each dest, not the dest; the entries whose paths
/// meet are read again and judged exactly. The verdicts must be those of judging every entry
/// exactly, as the loader did before (`DestinationConflicts` over every claim), and a shard
/// read on its own must be the shard chosen from the whole manifest.
struct DestinationKeysTests {
    private static let resolution = ManifestDecoder.RootResolution(manifestDirectory: "/srv", override: nil, currentDirectory: "/")

    /// One manifest's entries: dests drawn from a few names (`x`, `x.part`, directories of
    /// one, and the same name twice) so that repeats, `a` beside `a/b`, and `x` beside
    /// `x.part` (as a file or a directory) all happen often.
    private struct Drawn {
        var url: String
        var dest: String
        var size: Int64?

        static func list<G: RandomNumberGenerator>(_ generator: inout G) -> [Drawn] {
            // `é` precomposed and decomposed: one `String`, two names on Linux.
            let names = ["a", "b", "a.part", "b.part", "c", "\u{e9}", "e\u{301}"]
            var drawn: [Drawn] = []
            for _ in 0..<Int.random(in: 1...8, using: &generator) {
                // A quarter of the entries repeat an earlier one, as lists joined by hand do.
                if let earlier = drawn.randomElement(using: &generator), Int.random(in: 0..<4, using: &generator) == 0 {
                    drawn.append(earlier)
                    continue
                }
                let depth = Int.random(in: 1...3, using: &generator)
                let dest = (0..<depth).map { _ in names.randomElement(using: &generator)! }.joined(separator: "/")
                drawn.append(Drawn(
                    url: "http://h/" + ["u1", "u1", "u1", "u2"].randomElement(using: &generator)!, dest: dest,
                    size: [nil, nil, nil, 2].randomElement(using: &generator)!))
            }
            return drawn
        }

        static func text(_ entries: [Drawn]) -> String {
            "version: 1\nfiles:\n" + entries.map { entry in
                "  - url: \(entry.url)\n    dest: \(entry.dest)\n" + (entry.size.map { "    size: \($0)\n" } ?? "")
            }.joined()
        }
    }

    /// What judging every claim exactly gives: the dests kept, with the lines of their
    /// repeats, or the problems (message and key) in file order.
    private enum Expected {
        /// The lines of each kept dest's repeats, by the dest's bytes.
        case loads(repeats: [[UInt8]: [Int]])
        case fails(problems: [String])
    }

    private static func exactly(_ entries: [Drawn]) -> Expected {
        var conflicts = DestinationConflicts()
        var kept: [DestinationClaim] = []
        var repeats: [[UInt8]: [Int]] = [:]
        var problems: [String] = []
        for (index, entry) in entries.enumerated() {
            // Each entry takes two lines after the two of the top level, three with a size.
            let line = 3 + entries[..<index].reduce(0) { $0 + ($1.size == nil ? 2 : 3) }
            let claim = DestinationClaim(dest: entry.dest, url: entry.url, digest: nil, size: entry.size, line: line)
            switch conflicts.add(claim, kept: { kept[$0] }) {
            case .kept:
                kept.append(claim)
                repeats[Array(claim.dest.utf8)] = []
            case .repeats(let owner):
                repeats[Array(kept[owner].dest.utf8)]!.append(line)
            case .conflict(let message):
                problems.append("files[\(index)].dest: \(message)")
            }
        }
        return problems.isEmpty ? .loads(repeats: repeats) : .fails(problems: problems)
    }

    private static func loaded(_ entries: [Drawn], shard: ShardSelection? = nil) -> Result<Manifest, ManifestError> {
        Result { () throws(ManifestError) in
            try ManifestLoader.decode(Array(Drawn.text(entries).utf8), path: "m.yaml", rootResolution: resolution, environment: [:], shard: shard)
        }
    }

    @Test func fingerprintsThenTheSuspectsJudgedExactlyGiveTheVerdictsOfJudgingEveryEntry() throws {
        var generator = SeededGenerator(seed: 20_261_128)
        var outcomes: [String: Int] = [:]
        for _ in 0..<1_500 {
            let entries = Drawn.list(&generator)
            let expected = Self.exactly(entries)
            switch (expected, Self.loaded(entries)) {
            case (.loads(let repeats), .success(let manifest)):
                outcomes["loads", default: 0] += 1
                let got = Dictionary(uniqueKeysWithValues: manifest.entries.map { (Array($0.dest.utf8), $0.repeatLocations.map(\.line)) })
                #expect(got == repeats, "\(Drawn.text(entries))")
                // In manifest order, as the exact judge keeps them.
                #expect(manifest.entries.map(\.location.line) == manifest.entries.map(\.location.line).sorted())
                if repeats.values.contains(where: { !$0.isEmpty }) { outcomes["repeats", default: 0] += 1 }
            case (.fails(let problems), .failure(let error)):
                outcomes["conflicts", default: 0] += 1
                #expect(error.diagnostics.map { "\($0.key ?? ""): \($0.message)" } == problems, "\(Drawn.text(entries))")
            case (let expected, let got):
                Issue.record("expected \(expected), got \(got.map { $0.entries.map(\.dest) }) for\n\(Drawn.text(entries))")
            }
        }
        // Every kind of outcome was drawn many times.
        #expect(outcomes["loads", default: 0] > 100)
        #expect(outcomes["repeats", default: 0] > 50)
        #expect(outcomes["conflicts", default: 0] > 100)
    }

    /// Past its first `EntryDecodePipeline.batch` entries a shard's list is decoded on a thread
    /// of its own: entries drawn before that point and after it, with hundreds of distinct ones
    /// between, meet as they do in a short list, and every entry comes back in order.
    @Test func entriesDecodedOnTheDecodingThreadGiveTheSameVerdicts() throws {
        var generator = SeededGenerator(seed: 20_261_129)
        var outcomes: [String: Int] = [:]
        for round in 0..<120 {
            let filler = (0..<(EntryDecodePipeline.batch + 50 + round)).map { Drawn(url: "http://h/p\($0)", dest: "pad/f\($0)") }
            let entries = Drawn.list(&generator) + filler + Drawn.list(&generator)
            // A shard (of one: every entry) is what is decoded on the thread of its own.
            switch (Self.exactly(entries), Self.loaded(entries, shard: ShardSelection(index: 0, count: 1))) {
            case (.loads(let repeats), .success(let manifest)):
                outcomes["loads", default: 0] += 1
                let got = Dictionary(uniqueKeysWithValues: manifest.entries.map { (Array($0.dest.utf8), $0.repeatLocations.map(\.line)) })
                #expect(got == repeats)
                #expect(manifest.entries.map(\.location.line) == manifest.entries.map(\.location.line).sorted())
                #expect(manifest.entries.filter { $0.dest.hasPrefix("pad/") }.map(\.dest) == filler.map(\.dest))
            case (.fails(let problems), .failure(let error)):
                outcomes["conflicts", default: 0] += 1
                #expect(error.diagnostics.map { "\($0.key ?? ""): \($0.message)" } == problems)
            case (let expected, let got):
                Issue.record("expected \(expected), got \(got.map { $0.entries.map(\.dest) }) for\n\(Drawn.text(entries))")
            }
        }
        #expect(outcomes["loads", default: 0] > 10)
        #expect(outcomes["conflicts", default: 0] > 10)
    }

    @Test func aShardReadOnItsOwnIsTheShardChosenFromTheWholeManifest() throws {
        var generator = SeededGenerator(seed: 7)
        var compared = 0
        for _ in 0..<300 {
            // Distinct directories of files, with repeats: a manifest that loads.
            let entries = Drawn.list(&generator).enumerated().map { index, entry in
                Drawn(url: entry.url, dest: "d\(index % 5)/f\(index % 9)", size: entry.size.map { $0 * 100 + Int64(index % 9) })
            }
            guard case .success(let whole) = Self.loaded(entries) else { continue }
            for count in [1, 2, 3, 16] {
                for index in 0..<count {
                    let selection = try #require(ShardSelection(index: index, count: count))
                    let shard = try Self.loaded(entries, shard: selection).get()
                    let (chosen, totals) = whole.selecting(selection, by: .hash)
                    #expect(shard.entries == chosen.entries)
                    #expect(shard.shard == selection && shard.shardBalance == .hash)
                    #expect(shard.shardTotals == totals)
                    compared += 1
                }
            }
        }
        #expect(compared > 1_000)
    }

    /// Names are compared as the file system compares them, byte for byte: `café` precomposed
    /// and decomposed are two files, with or without a repeat of either beside them.
    @Test func namesThatAreOneStringButTwoFilesDoNotConflict() throws {
        let precomposed = Drawn(url: "http://h/1", dest: "caf\u{e9}")
        let decomposed = Drawn(url: "http://h/2", dest: "cafe\u{301}")
        for entries in [[precomposed, decomposed], [precomposed, decomposed, precomposed, decomposed]] {
            let manifest = try Self.loaded(entries).get()
            #expect(manifest.entries.map { Array($0.dest.utf8) } == [Array(precomposed.dest.utf8), Array(decomposed.dest.utf8)])
        }
    }

    /// The partial download's name meets a directory's: `x` and `x.part/y`, found through the
    /// fingerprint of `x.part` without its suffix.
    @Test(arguments: [
        (["x", "x.part/y"], "files[1].dest: `x.part` is where the entry at line 3 keeps the partial download of `x`; choose another dest"),
        (["x.part/y", "x"], "files[1].dest: the partial download of `x` goes to `x.part`, which collides with the dest `x.part/y` of the entry at line 3"),
        (["a/b", "a"], "files[1].dest: `a` is a directory on the way to `a/b` (entry at line 3); it cannot also be a file"),
    ])
    func pathsThatMeetOnlyThroughADirectoryAreFound(dests: [String], problem: String) {
        let entries = dests.map { Drawn(url: "http://h/" + $0, dest: $0) }
        guard case .failure(let error) = Self.loaded(entries) else {
            Issue.record("\(dests) loaded")
            return
        }
        #expect(error.diagnostics.map { "\($0.key ?? ""): \($0.message)" } == [problem])
    }
}
