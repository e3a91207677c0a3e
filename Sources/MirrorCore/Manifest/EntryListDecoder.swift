/// Decodes the entries of `files` one at a time, as they are read. What it keeps per entry is
/// the `Entry` (only those of `shard`, when one is given) and a fingerprint of its dest
/// (`DestinationKeys`); never the YAML the entry came from, nor another shard's entries.
///
/// Conflicts between dests (`DestinationConflicts`) are judged after the list: where the
/// fingerprints say two entries' paths may meet, the list is read a second time with
/// `Purpose.claims`, keeping those entries' claims whole, and `settle` applies the verdicts.
struct EntryListDecoder {
    enum Purpose {
        /// Keeps the entries, or those of a shard chosen by the hash of their dest, with the
        /// totals of every shard.
        case entries(shard: ShardSelection?)
        /// Keeps no entry, only what judging them needs and, once settled, the repeats to skip:
        /// the first reading of a manifest whose entries are then streamed
        /// (`ManifestEntryStream`).
        case nothing
        /// Keeps the claims of entries that have a suspect fingerprint.
        case claims(suspects: Set<UInt64>)
        /// Hands each entry to `body` as it is decoded, except those at the indices `skipping`.
        case stream(skipping: Set<Int>, body: (Entry) -> Void)
    }

    /// An entry's claim, as the second reading keeps it.
    struct SuspectClaim {
        /// The entry's index in `files`.
        var index: Int
        var claim: DestinationClaim
        var location: SourceLocation
        var destLocation: SourceLocation
        var destKey: String
    }

    /// Records the entries' problems.
    private(set) var decoder: ManifestDecoder
    let context: EntryContext
    let purpose: Purpose
    /// The entries kept so far, and the index of each in `files`.
    private var entries: [Entry] = []
    private var indices: [Int] = []
    private var keys = DestinationKeys()
    /// With a shard: what every shard holds.
    private(set) var totals: [ShardTotals] = []
    /// With `Purpose.claims`: the claims kept.
    private(set) var claims: [SuspectClaim] = []
    /// Conflicts between dests, reported after every entry's own problems.
    private var conflictProblems: [ManifestDiagnostic] = []
    /// Entries seen so far, clean or not.
    private(set) var count = 0
    /// With `Purpose.nothing`: the entries decoded without a problem, before `settle`.
    private(set) var decodedCount = 0
    /// With `Purpose.nothing`, once settled: the indices in `files` of the entries dropped as
    /// repeats (a conflict is a problem, and nothing is streamed then).
    private(set) var skipped = Set<Int>()
    /// With `Purpose.nothing`: where each entry with `insecure: true` is, and its dest, for the
    /// warning a held entry gets.
    private(set) var insecure: [(location: SourceLocation, dest: String)] = []

    init(decoder: ManifestDecoder, context: EntryContext, purpose: Purpose = .entries(shard: nil)) {
        self.decoder = decoder
        self.context = context
        self.purpose = purpose
        if case .entries(let shard?) = purpose {
            totals = (0..<shard.count).map(ShardTotals.init(shard:))
        }
    }

    /// Makes room for `count` entries in all (of which a shard keeps its share), so that the
    /// list does not grow by doubling: that holds the old and the new copy of every entry at once.
    mutating func reserveCapacity(_ count: Int) {
        guard case .entries(let shard) = purpose else { return }
        let kept = shard.map { count / $0.count + count / (4 * $0.count) + 16 } ?? count
        entries.reserveCapacity(kept)
        indices.reserveCapacity(kept)
    }

    /// Decodes the next entry of `files`.
    mutating func add(_ item: YAMLNode) {
        defer { count += 1 }
        guard let decoded = decoder.decodeEntry(item, index: count, context: context) else { return }
        switch purpose {
        case .entries(let shard):
            let entry = decoded.entry
            keys.add(dest: entry.dest)
            if let shard {
                let owner = ShardHash.shard(ofDest: entry.dest, count: shard.count)
                totals[owner].add(entry.size)
                guard owner == shard.index else { return }
            }
            entries.append(entry)
            indices.append(count)
        case .nothing:
            keys.add(dest: decoded.entry.dest)
            decodedCount += 1
            if decoded.entry.settings.insecure { insecure.append((decoded.entry.location, decoded.entry.dest)) }
        case .stream(let skipping, let body):
            if !skipping.contains(count) { body(decoded.entry) }
        case .claims(let suspects):
            guard DestinationKeys.claimsSuspect(decoded.entry.dest, suspects) else { return }
            claims.append(SuspectClaim(
                index: count, claim: Self.claim(decoded.entry), location: decoded.entry.location,
                destLocation: decoded.destLocation, destKey: decoded.destKey(index: count)))
        }
    }

    /// The fingerprints where entries' paths may meet: when there are any, the list is read
    /// again with `Purpose.claims` and given to `settle`.
    mutating func takeSuspects() -> Set<UInt64> {
        keys.takeSuspects()
    }

    /// Judges the claims of the second reading, in the order of `files`: a repeat of an entry
    /// is dropped (its location added to the entry's), a conflicting entry is dropped and
    /// reported.
    mutating func settle(_ suspects: [SuspectClaim]) {
        var conflicts = DestinationConflicts()
        // Positions in `suspects` of the claims kept, in the order `conflicts` counts them.
        var kept: [Int] = []
        var dropped = Set<Int>()
        var repeats: [(owner: Int, location: SourceLocation)] = []
        for (position, suspect) in suspects.enumerated() {
            switch conflicts.add(suspect.claim, kept: { suspects[kept[$0]].claim }) {
            case .kept:
                kept.append(position)
            case .repeats(let owner):
                dropped.insert(suspect.index)
                repeats.append((suspects[kept[owner]].index, suspect.location))
                if !totals.isEmpty {
                    totals[ShardHash.shard(ofDest: suspect.claim.dest, count: totals.count)].remove(suspect.claim.size)
                }
            case .conflict(let message):
                dropped.insert(suspect.index)
                conflictProblems.append(ManifestDiagnostic(location: suspect.destLocation, key: suspect.destKey, message: message))
            }
        }
        // Remembered so that `mirror lock` can pin the repeats too.
        for (owner, location) in repeats {
            if let position = position(ofEntryAt: owner) { entries[position].repeatLocations.append(location) }
        }
        if case .nothing = purpose { skipped = dropped }
        guard !dropped.isEmpty else { return }
        var position = 0
        for index in indices.indices where !dropped.contains(indices[index]) {
            entries.swapAt(position, index)
            indices[position] = indices[index]
            position += 1
        }
        entries.removeLast(entries.count - position)
        indices.removeLast(indices.count - position)
    }

    /// Where the entry at `index` in `files` is among those kept; nil when it is not kept.
    private func position(ofEntryAt index: Int) -> Int? {
        var low = 0, high = indices.count
        while low < high {
            let middle = (low + high) / 2
            if indices[middle] < index { low = middle + 1 } else { high = middle }
        }
        return low < indices.count && indices[low] == index ? low : nil
    }

    /// The entries kept, once the last has been added (and `settle` given the second reading's
    /// claims, if it needed one); problems are in `decoder`. `files` is the list's node, for
    /// the message when it is empty.
    mutating func finish(files: YAMLNode) -> [Entry] {
        guard count > 0 else {
            decoder.report("`files` is empty; list at least one entry (`- url: …`)", at: files, key: "files")
            return []
        }
        for problem in conflictProblems {
            decoder.report(problem.message, at: problem.location!, key: problem.key)
        }
        conflictProblems = []
        indices = []
        defer { entries = [] }
        return entries
    }

    private static func claim(_ entry: Entry) -> DestinationClaim {
        DestinationClaim(dest: entry.dest, url: entry.manifestURL.string, digest: entry.digest, size: entry.size, line: entry.location.line)
    }
}
