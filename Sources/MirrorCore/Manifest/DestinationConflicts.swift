/// One entry's claim on a path under root, as `DestinationConflicts` compares them.
struct DestinationClaim: Equatable {
    /// Normalised, as `DestinationPath.normalised` returns it.
    var dest: String
    /// The expanded URL: two entries are the same download when url and dest are equal.
    var url: String
    var digest: String?
    var size: Int64?
    /// The line of the entry, for naming it in the other entry's message.
    var line: Int
}

/// Entries whose files would land on each other, found claim by claim as the entries are read.
///
/// Two entries conflict when they share a dest but not a url, when one dest is a directory on
/// the way to another (`a` and `a/b`), or when one dest is where the other's partial download
/// goes (`x` and `x.part`). An entry repeated with the same url and dest is a harmless
/// duplicate and is dropped, unless the repeat pins a different digest or size.
struct DestinationConflicts {
    /// What becomes of one claim, given the claims before it.
    enum Verdict: Equatable {
        /// Kept: the next index of the kept claims.
        case kept
        /// A harmless duplicate of the kept claim at this index.
        case repeats(Int)
        /// Refused, and why. The message names the other entry's line; the claim found later in
        /// the file is the one refused.
        case conflict(String)
    }

    struct Outcome: Equatable {
        /// Indices of the claims to keep, in order: every claim except duplicates and conflicts.
        var kept: [Int]
        /// For each conflicting claim, by index, why. The message names the other entry's line;
        /// the claim found later in the file is the one reported.
        var problems: [Problem]
    }

    struct Problem: Equatable {
        var index: Int
        var message: String
    }

    /// The suffix of the partial file a dest is downloaded into.
    static let partialSuffix = ".part"

    /// Indices of kept claims by the dest they download, and by each directory on the way to one:
    /// names as bytes, as the file system compares them (`DestKey`).
    private var fileOwners: [DestKey: Int] = [:]
    private var directoryOwners: [DestKey: Int] = [:]
    private var keptCount = 0
    /// Kept dests and directories whose names end in `partialSuffix`: while there are none, no
    /// dest's partial download can collide with one, and its name is not even made.
    private var pathsEndingInPartialSuffix = 0

    /// Makes room for `count` kept claims.
    mutating func reserveCapacity(_ count: Int) {
        fileOwners.reserveCapacity(count)
    }

    /// Judges the next claim against the kept ones before it.
    ///
    /// - Parameter kept: The kept claim at an index, counting kept claims from 0 in the order
    ///   this returned `.kept` for them.
    mutating func add(_ claim: DestinationClaim, kept: (Int) -> DestinationClaim) -> Verdict {
        let directories = Self.parentDirectories(of: claim.dest)
        let fileOwner = fileOwners[DestKey(claim.dest)]
        if let message = problem(with: claim, fileOwner: fileOwner, directories: directories, kept: kept) {
            return .conflict(message)
        }
        if let fileOwner { return .repeats(fileOwner) }
        fileOwners[DestKey(claim.dest)] = keptCount
        if Self.endsWithPartialSuffix(claim.dest) { pathsEndingInPartialSuffix += 1 }
        for directory in directories where directoryOwners[DestKey(directory)] == nil {
            directoryOwners[DestKey(directory)] = keptCount
            if Self.endsWithPartialSuffix(directory) { pathsEndingInPartialSuffix += 1 }
        }
        keptCount += 1
        return .kept
    }

    /// The verdicts on a whole list of claims.
    static func check(_ claims: [DestinationClaim]) -> Outcome {
        var conflicts = DestinationConflicts()
        var keptClaims: [DestinationClaim] = []
        var outcome = Outcome(kept: [], problems: [])
        for (index, claim) in claims.enumerated() {
            switch conflicts.add(claim, kept: { keptClaims[$0] }) {
            case .kept:
                outcome.kept.append(index)
                keptClaims.append(claim)
            case .repeats:
                continue
            case .conflict(let message):
                outcome.problems.append(Problem(index: index, message: message))
            }
        }
        return outcome
    }

    /// - Parameters:
    ///   - fileOwner: The kept claim on the same dest, if any.
    ///   - directories: Those on the way to the claim's dest.
    private func problem(
        with claim: DestinationClaim, fileOwner: Int?, directories: [String], kept: (Int) -> DestinationClaim
    ) -> String? {
        let dest = claim.dest
        if let owner = fileOwner.map(kept) {
            if owner.url != claim.url {
                return "`\(dest)` is already the dest of the entry at line \(owner.line), which has a different url; give one of them another dest"
            }
            if owner.digest != claim.digest {
                return "repeats the entry at line \(owner.line) (same url and dest) with a different \((claim.digest ?? owner.digest).flatMap(DigestAlgorithm.init(hexDigest:))?.key ?? "digest")"
            }
            if owner.size != claim.size {
                return "repeats the entry at line \(owner.line) (same url and dest) with a different size"
            }
            return nil
        }
        if !directoryOwners.isEmpty, let owner = directoryOwners[DestKey(dest)].map(kept) {
            return "`\(dest)` is a directory on the way to `\(owner.dest)` (entry at line \(owner.line)); it cannot also be a file"
        }
        if let directory = directories.first(where: { fileOwners[DestKey($0)] != nil }) {
            let owner = kept(fileOwners[DestKey(directory)]!)
            return "`\(dest)` needs `\(directory)` to be a directory, but the entry at line \(owner.line) downloads `\(directory)` as a file"
        }
        if pathsEndingInPartialSuffix > 0 {
            let partial = dest + Self.partialSuffix
            if let owner = (fileOwners[DestKey(partial)] ?? directoryOwners[DestKey(partial)]).map(kept) {
                return "the partial download of `\(dest)` goes to `\(partial)`, which collides with the dest `\(owner.dest)` of the entry at line \(owner.line)"
            }
        }
        if let message = partialDownloadClash(dest, kept: kept) { return message }
        for directory in directories {
            if let message = partialDownloadClash(directory, kept: kept) { return message }
        }
        return nil
    }

    /// Why `path` (a dest or a directory on the way to one) cannot be used, when it is where a
    /// kept dest keeps its partial download.
    private func partialDownloadClash(_ path: String, kept: (Int) -> DestinationClaim) -> String? {
        guard Self.endsWithPartialSuffix(path) else { return nil }
        let completed = String(decoding: path.utf8.dropLast(Self.partialSuffix.utf8.count), as: UTF8.self)
        guard let owner = fileOwners[DestKey(completed)].map(kept) else { return nil }
        return "`\(path)` is where the entry at line \(owner.line) keeps the partial download of `\(completed)`; choose another dest"
    }

    /// Whether `path` is longer than `partialSuffix` and ends with it. On the bytes: a character
    /// that joins with what follows it (U+0600, say) would make ".part" end in another
    /// Character, and hide the clash.
    private static func endsWithPartialSuffix(_ path: String) -> Bool {
        var path = path
        return path.withUTF8 { bytes in
            let suffix = partialSuffixBytes
            return bytes.count > suffix.count && bytes[(bytes.count - suffix.count)...].elementsEqual(suffix)
        }
    }

    private static let partialSuffixBytes = Array(partialSuffix.utf8)

    /// `a/b/c` → `a`, `a/b`: the text before each `/` of a normalised dest.
    private static func parentDirectories(of dest: String) -> [String] {
        guard dest.containsByte(.slash) else { return [] }
        return dest.utf8.indices.filter { dest.utf8[$0] == .slash }.map { String(dest[..<$0]) }
    }
}
