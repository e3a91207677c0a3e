/// What the first reading of a manifest keeps of every entry's dest: 64-bit fingerprints of the
/// paths it claims, about 8 bytes an entry, instead of the dest itself. Two entries can only
/// conflict (`DestinationConflicts`) where their fingerprints meet:
///
/// - two dests with one fingerprint (the same dest: a conflict or a harmless repeat);
/// - a dest whose fingerprint is that of a directory on the way to another dest (`a` and `a/b`);
/// - a dest or directory ending in `.part` whose name without it has a dest's fingerprint (`x`
///   and `x.part`).
///
/// The fingerprints found so are the suspects. A second reading of the manifest keeps the whole
/// claim of every entry that has one (`claimsSuspect`) and judges those alone with
/// `DestinationConflicts`, which decides exactly. That is the same verdict as over every entry:
/// an entry's verdict depends only on entries whose paths meet its own, and all of those have a
/// suspect fingerprint too. A fingerprint met by chance (two different paths, one value) only
/// brings a few more entries into the second reading. A manifest without repeats or conflicts,
/// the usual one, is read once.
struct DestinationKeys {
    /// A dest's fingerprint for each entry, in chunks, so that growing never copies them all.
    private var files: [[UInt64]] = [[]]
    private var directories = Set<UInt64>()
    /// For each dest or directory named `….part`, the fingerprint of its name without `.part`.
    private var partialTargets: [UInt64] = []

    private static let chunk = 1 << 16

    /// Adds the paths `dest` claims: a normalised dest, as `DestinationPath.normalised` gives it.
    mutating func add(dest: String) {
        if files[files.count - 1].count == Self.chunk {
            files.append([])
            files[files.count - 1].reserveCapacity(Self.chunk)
        }
        Self.paths(of: dest) { key, kind in
            switch kind {
            case .file: files[files.count - 1].append(key)
            case .directory: directories.insert(key)
            case .partialTarget: partialTargets.append(key)
            }
        }
    }

    /// The fingerprints where two entries' paths meet. Consumes what was added.
    mutating func takeSuspects() -> Set<UInt64> {
        var sorted: [UInt64] = []
        sorted.reserveCapacity(files.reduce(0) { $0 + $1.count })
        for index in files.indices {
            sorted += files[index]
            files[index] = []
        }
        files = [[]]
        sorted.sort()
        var suspects = Set<UInt64>()
        var index = 1
        while index < sorted.count {
            if sorted[index] == sorted[index - 1] { suspects.insert(sorted[index]) }
            index += 1
        }
        func isDest(_ key: UInt64) -> Bool {
            var low = 0, high = sorted.count
            while low < high {
                let middle = (low + high) / 2
                if sorted[middle] < key { low = middle + 1 } else { high = middle }
            }
            return low < sorted.count && sorted[low] == key
        }
        for key in directories where isDest(key) { suspects.insert(key) }
        for key in partialTargets where isDest(key) { suspects.insert(key) }
        directories = []
        partialTargets = []
        return suspects
    }

    /// Whether any path `dest` claims has a fingerprint among `suspects`.
    static func claimsSuspect(_ dest: String, _ suspects: Set<UInt64>) -> Bool {
        var found = false
        paths(of: dest) { key, _ in
            if suspects.contains(key) { found = true }
        }
        return found
    }

    enum Kind {
        /// The dest itself.
        case file
        /// A directory on the way to it.
        case directory
        /// The name, without `.part`, of the dest or of a directory on the way when it ends in
        /// `.part`: where it would meet that name's partial download.
        case partialTarget
    }

    /// Calls `body` with the fingerprint of each path `dest` claims. FNV-1a over the bytes, the
    /// state at each `/` giving the directory before it, each finished by a 64-bit mix; a fixed
    /// seed, so every reading of the manifest gives the same values.
    static func paths(of dest: String, _ body: (UInt64, Kind) -> Void) {
        var dest = dest
        dest.withUTF8 { bytes in
            var state: UInt64 = 0xcbf2_9ce4_8422_2325
            for (index, byte) in bytes.enumerated() {
                if byte == UInt8(ascii: "/") {
                    body(finished(state), .directory)
                    partialTarget(bytes[..<index], body)
                }
                state = (state ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
            }
            body(finished(state), .file)
            partialTarget(bytes[...], body)
        }
    }

    private static let partialSuffix = Array(DestinationConflicts.partialSuffix.utf8)

    private static func partialTarget(_ path: Slice<UnsafeBufferPointer<UInt8>>, _ body: (UInt64, Kind) -> Void) {
        guard path.count > partialSuffix.count, path.suffix(partialSuffix.count).elementsEqual(partialSuffix) else { return }
        var state: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in path.dropLast(partialSuffix.count) {
            state = (state ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        body(finished(state), .partialTarget)
    }

    /// splitmix64's finaliser: FNV's low bits alone are poor.
    private static func finished(_ state: UInt64) -> UInt64 {
        var value = state
        value = (value ^ (value >> 30)) &* 0xbf58_476d_1ce4_e5b9
        value = (value ^ (value >> 27)) &* 0x94d0_49bb_1331_11eb
        return value ^ (value >> 31)
    }
}
