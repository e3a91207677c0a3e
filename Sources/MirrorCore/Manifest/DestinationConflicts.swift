/// One entry's claim on a path under root, as `DestinationConflicts` compares them.
struct DestinationClaim: Equatable {
    /// Normalised, as `DestinationPath.normalised` returns it.
    var dest: String
    /// The expanded URL: two entries are the same download when url and dest are equal.
    var url: String
    var sha256: String?
    var size: Int64?
    /// The line of the entry, for naming it in the other entry's message.
    var line: Int
}

/// Entries whose files would land on each other.
///
/// Two entries conflict when they share a dest but not a url, when one dest is a directory on
/// the way to another (`a` and `a/b`), or when one dest is where the other's partial download
/// goes (`x` and `x.part`). An entry repeated with the same url and dest is a harmless
/// duplicate and is dropped, unless the repeat pins a different sha256 or size.
enum DestinationConflicts {
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

    static func check(_ claims: [DestinationClaim]) -> Outcome {
        var fileOwners: [String: Int] = [:]
        var directoryOwners: [String: Int] = [:]
        var outcome = Outcome(kept: [], problems: [])

        for (index, claim) in claims.enumerated() {
            if let message = problem(with: claim, claims: claims, fileOwners: fileOwners, directoryOwners: directoryOwners) {
                outcome.problems.append(Problem(index: index, message: message))
                continue
            }
            if fileOwners[claim.dest] != nil { continue }
            fileOwners[claim.dest] = index
            for directory in parentDirectories(of: claim.dest) where directoryOwners[directory] == nil {
                directoryOwners[directory] = index
            }
            outcome.kept.append(index)
        }
        return outcome
    }

    private static func problem(
        with claim: DestinationClaim, claims: [DestinationClaim],
        fileOwners: [String: Int], directoryOwners: [String: Int]
    ) -> String? {
        let dest = claim.dest
        if let owner = fileOwners[dest].map({ claims[$0] }) {
            if owner.url != claim.url {
                return "`\(dest)` is already the dest of the entry at line \(owner.line), which has a different url; give one of them another dest"
            }
            if owner.sha256 != claim.sha256 {
                return "repeats the entry at line \(owner.line) (same url and dest) with a different sha256"
            }
            if owner.size != claim.size {
                return "repeats the entry at line \(owner.line) (same url and dest) with a different size"
            }
            return nil
        }
        if let owner = directoryOwners[dest].map({ claims[$0] }) {
            return "`\(dest)` is a directory on the way to `\(owner.dest)` (entry at line \(owner.line)); it cannot also be a file"
        }
        let directories = parentDirectories(of: dest)
        if let directory = directories.first(where: { fileOwners[$0] != nil }) {
            let owner = claims[fileOwners[directory]!]
            return "`\(dest)` needs `\(directory)` to be a directory, but the entry at line \(owner.line) downloads `\(directory)` as a file"
        }
        let partial = dest + partialSuffix
        if let owner = (fileOwners[partial] ?? directoryOwners[partial]).map({ claims[$0] }) {
            return "the partial download of `\(dest)` goes to `\(partial)`, which collides with the dest `\(owner.dest)` of the entry at line \(owner.line)"
        }
        // On the bytes: a character that joins with what follows it (U+0600, say) would make
        // ".part" end in another Character, and hide the clash.
        for path in [dest] + directories where path.utf8.count > partialSuffix.utf8.count
            && path.utf8.reversed().starts(with: partialSuffix.utf8.reversed()) {
            let completed = String(decoding: path.utf8.dropLast(partialSuffix.utf8.count), as: UTF8.self)
            if let owner = fileOwners[completed].map({ claims[$0] }) {
                return "`\(path)` is where the entry at line \(owner.line) keeps the partial download of `\(completed)`; choose another dest"
            }
        }
        return nil
    }

    /// `a/b/c` → `a`, `a/b`: the text before each `/` of a normalised dest.
    private static func parentDirectories(of dest: String) -> [String] {
        dest.utf8.indices.filter { dest.utf8[$0] == .slash }.map { String(dest[..<$0]) }
    }
}
