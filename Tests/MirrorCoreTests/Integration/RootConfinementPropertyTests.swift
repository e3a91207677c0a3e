import Foundation
import Synchronization
import Testing
@testable import MirrorCore

/// The confinement rule over many random cases: random trees of directories, files and
/// symbolic links (out of the root, inside it, dangling, at `DEST` or `DEST.part`, at
/// `.mirror`) under the root, random dests, and directories swapped for links to the outside
/// while entries are being worked on. Whatever `plan`, `sync` and `verify` do, the kernel
/// reports no file created, written, renamed or removed outside the root, and every entry
/// reported transferred is a regular file reached from the root without a symbolic link.
@Suite(.serialized)
struct RootConfinementPropertyTests {
    static let data = randomData(count: 40_000, seed: 121)
    static let directoryNames = ["a", "b", "c"]
    static let fileNames = ["f", "g", "h"]

    @Test(arguments: 0..<48)
    func nothingOutsideTheRootChanges(seed: Int) async throws {
        var random = SeededRandom(seed: UInt64(seed))
        let scenario = try SyncScenario(.faultServer)
        let server = scenario.server
        server.route("/f", reply: .file(Self.data, etag: "\"v\(seed)\""))
        let root = scenario.root, outside = scenario.directory.path("outside")
        try Self.makeOutside(outside)
        var made: [String] = []
        try Self.grow(root, relative: "", depth: 0, outside: outside, random: &random, made: &made)
        if random.chance(0.15) {
            try FileManager.default.createSymbolicLink(atPath: root + "/.mirror", withDestinationPath: outside + "/a")
        }

        var dests = Set<String>()
        for _ in 0..<random.next(in: 2...6) {
            let depth = random.next(in: 0...2)
            let parts = (0..<depth).map { _ in random.pick(Self.directoryNames) } + [random.pick(Self.fileNames)]
            dests.insert(parts.joined(separator: "/"))
        }
        let manifest = try scenario.load(ManifestText(entries: dests.sorted().enumerated().map { index, dest in
            .url("\(server.url("/f"))?\(index)", dest: dest)
        }))

        // While entries are worked on, real directories under the root are swapped for links out.
        let swaps = Swaps(random: SeededRandom(seed: UInt64(seed) &+ 1000), candidates: made)
        let settings = SyncScenario.Settings(concurrency: 2, retryPolicy: RetryPolicy(base: .milliseconds(1), cap: .milliseconds(5)), events: { event in
            guard case .decided = event else { return }
            swaps.state.withLock { state in
                guard state.random.chance(0.4), !state.candidates.isEmpty else { return }
                let victim = state.candidates.remove(at: state.random.next(in: 0...(state.candidates.count - 1)))
                // Below a swapped directory the path leads outside now: the test must not move things there.
                state.candidates.removeAll { $0.hasPrefix(victim + "/") }
                state.count += 1
                if rename(root + "/" + victim, root + "/moved-\(state.count)") == 0 {
                    _ = symlink(outside + "/" + state.random.pick(["", "a", "a/b"]), root + "/" + victim)
                }
            }
        })

        let watch = try WriteWatch(outside)
        let before = Self.snapshot(outside)
        _ = await scenario.runner(manifest, settings).plan()
        let reports = try? await scenario.sync(manifest, settings)
        _ = await scenario.verifier(manifest, settings).verify(rehash: true)

        let changes = watch.changes()
        let context = "seed \(seed), dests \(dests.sorted()), tree \(made)"
        #expect(changes == [], "\(context)")
        #expect(Self.snapshot(outside) == before, "\(context)")
        for report in reports ?? [] where report.outcome == .transferred {
            #expect(Self.isRegularFileWithoutLinks(root, report.dest), "\(report.dest) is not inside the root: \(context)")
        }
    }

    /// Directories and files outside, for links to point at and for writes to land in.
    static func makeOutside(_ outside: String) throws {
        try FileManager.default.createDirectory(atPath: outside + "/a/b", withIntermediateDirectories: true)
        for path in ["f", "f.part", "a/f", "a/g.part", "a/b/h"] {
            try WriteWatch.writeBeforeWatching("outside \(path)", to: outside + "/" + path)
        }
    }

    /// A random tree under `base`: real directories (recorded in `made`), files of the data's
    /// prefix (short DESTs and partials to resume), and links of every kind.
    static func grow(_ base: String, relative: String, depth: Int, outside: String, random: inout SeededRandom, made: inout [String]) throws {
        for name in directoryNames + fileNames + fileNames.map({ $0 + ".part" }) {
            let path = base + "/" + (relative.isEmpty ? name : relative + "/" + name)
            let isDirectoryName = directoryNames.contains(name)
            switch random.next(in: 0...9) {
            case 0...2:
                continue
            case 3...5 where isDirectoryName && depth < 2:
                try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
                let child = relative.isEmpty ? name : relative + "/" + name
                made.append(child)
                try grow(base, relative: child, depth: depth + 1, outside: outside, random: &random, made: &made)
            case 3...6:
                try data.prefix(random.next(in: 0...data.count)).write(to: URL(fileURLWithPath: path))
            default:
                let up = String(repeating: "../", count: depth + 1)
                let target = random.pick([
                    outside, outside + "/a", outside + "/f", outside + "/a/f", up + "outside/a",
                    "a", "../a", "nowhere", outside + "/missing",
                ])
                try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: target)
            }
        }
    }

    /// Every entry below `path` with its type, size and modification time, not following links.
    static func snapshot(_ path: String) -> [String] {
        let enumerator = FileManager.default.enumerator(atPath: path)
        var lines: [String] = []
        while let relative = enumerator?.nextObject() as? String {
            var info = stat()
            guard lstat(path + "/" + relative, &info) == 0 else { continue }
            lines.append("\(relative) \(info.st_mode) \(info.st_size) \(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec)")
        }
        return lines.sorted()
    }

    /// `dest` under `root` is a regular file and no component on the way is a symbolic link.
    static func isRegularFileWithoutLinks(_ root: String, _ dest: String) -> Bool {
        var path = root
        let parts = dest.split(separator: "/")
        for (index, part) in parts.enumerated() {
            path += "/" + part
            var info = stat()
            guard lstat(path, &info) == 0 else { return false }
            let wanted = index == parts.count - 1 ? S_IFREG : S_IFDIR
            if info.st_mode & S_IFMT != wanted { return false }
        }
        return true
    }
}

/// SplitMix64: the same cases on every run and machine, so a failure names its seed.
struct SeededRandom: Sendable {
    private var state: UInt64

    init(seed: UInt64) { state = seed &* 0x9E37_79B9_7F4A_7C15 &+ 1 }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var value = state
        value = (value ^ (value >> 30)) &* 0xBF58_476D_1CE4_E5B9
        value = (value ^ (value >> 27)) &* 0x94D0_49BB_1331_11EB
        return value ^ (value >> 31)
    }

    mutating func next(in range: ClosedRange<Int>) -> Int {
        range.lowerBound + Int(next() % UInt64(range.count))
    }

    mutating func chance(_ probability: Double) -> Bool {
        Double(next() % 1_000_000) < probability * 1_000_000
    }

    mutating func pick<T>(_ items: [T]) -> T {
        items[next(in: 0...(items.count - 1))]
    }
}

/// What the swapping event handler works through.
private final class Swaps: Sendable {
    let state: Mutex<(random: SeededRandom, candidates: [String], count: Int)>

    init(random: SeededRandom, candidates: [String]) {
        state = Mutex((random: random, candidates: candidates, count: 0))
    }
}
