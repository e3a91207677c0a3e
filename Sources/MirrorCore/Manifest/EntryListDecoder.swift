/// Decodes the entries of `files` one at a time, as they are read, and checks each one's dest
/// against the entries before it. What it keeps per entry is the `Entry`; never the YAML the
/// entry came from.
struct EntryListDecoder {
    /// Records the entries' problems.
    private(set) var decoder: ManifestDecoder
    let context: EntryContext
    /// The entries kept so far: duplicates and conflicting entries left out.
    private var entries: [Entry] = []
    private var conflicts = DestinationConflicts()
    /// Conflicts between dests, reported after every entry's own problems.
    private var conflictProblems: [ManifestDiagnostic] = []
    /// Entries seen so far, clean or not.
    private(set) var count = 0

    init(decoder: ManifestDecoder, context: EntryContext) {
        self.decoder = decoder
        self.context = context
    }

    /// Makes room for `count` entries in all, so that the list does not grow by doubling: that
    /// holds the old and the new copy of every entry at once.
    mutating func reserveCapacity(_ count: Int) {
        entries.reserveCapacity(count)
        conflicts.reserveCapacity(count)
    }

    /// Decodes the next entry of `files`.
    mutating func add(_ item: YAMLNode) {
        defer { count += 1 }
        guard let decoded = decoder.decodeEntry(item, index: count, context: context) else { return }
        let entry = decoded.entry
        let verdict = conflicts.add(Self.claim(entry)) { Self.claim(entries[$0]) }
        switch verdict {
        case .kept:
            entries.append(entry)
        case .repeats(let owner):
            // Remembered so that `mirror lock` can pin the repeat too.
            entries[owner].repeatLocations.append(entry.location)
        case .conflict(let message):
            conflictProblems.append(ManifestDiagnostic(
                location: decoded.destLocation, key: decoded.destKey(index: count), message: message))
        }
    }

    /// The entries kept, once the last has been added; problems are in `decoder`. `files` is the
    /// list's node, for the message when it is empty.
    mutating func finish(files: YAMLNode) -> [Entry] {
        guard count > 0 else {
            decoder.report("`files` is empty; list at least one entry (`- url: …`)", at: files, key: "files")
            return []
        }
        for problem in conflictProblems {
            decoder.report(problem.message, at: problem.location!, key: problem.key)
        }
        conflictProblems = []
        defer { entries = [] }
        return entries
    }

    private static func claim(_ entry: Entry) -> DestinationClaim {
        DestinationClaim(dest: entry.dest, url: entry.url.string, digest: entry.digest, size: entry.size, line: entry.location.line)
    }
}
