/// What decoding an entry depends on besides the entry itself.
struct EntryContext: Equatable {
    /// The settings an entry's own keys override: the environment's, then `defaults`.
    var defaults: TransferSettings
    /// The top level's `allow_file`.
    var allowFile: Bool
}

/// Decodes the entries of `files` one at a time, as they are read, then checks their dests
/// against each other. Only the decoded entries are kept, never the YAML they came from.
struct EntryListDecoder {
    /// Records the entries' problems.
    private(set) var decoder: ManifestDecoder
    let context: EntryContext
    /// The entries that decoded cleanly, with their indices in `files`.
    private var decoded: [(index: Int, entry: ManifestDecoder.DecodedEntry)] = []
    /// Entries seen so far, clean or not.
    private(set) var count = 0

    init(decoder: ManifestDecoder, context: EntryContext) {
        self.decoder = decoder
        self.context = context
    }

    /// Decodes the next entry of `files`.
    mutating func add(_ item: YAMLNode) {
        if let entry = decoder.decodeEntry(item, index: count, context: context) {
            decoded.append((count, entry))
        }
        count += 1
    }

    /// The entries, duplicates removed; an empty list and conflicts between dests are reported
    /// in `decoder`. `files` is the list's node, for the message when it is empty.
    mutating func finish(files: YAMLNode) -> [Entry] {
        guard count > 0 else {
            decoder.report("`files` is empty; list at least one entry (`- url: …`)", at: files, key: "files")
            return []
        }
        let claims = decoded.map {
            DestinationClaim(
                dest: $0.entry.entry.dest, url: $0.entry.entry.url.string, sha256: $0.entry.entry.sha256,
                size: $0.entry.entry.size, line: $0.entry.entry.location.line)
        }
        let outcome = DestinationConflicts.check(claims)
        for problem in outcome.problems {
            let (index, conflicting) = decoded[problem.index]
            decoder.report(problem.message, at: conflicting.destLocation, key: conflicting.destKey(index: index))
        }
        var kept = outcome.kept.map { decoded[$0].entry.entry }
        // Remember where harmless repeats stand, so `mirror lock` can pin them too.
        let keptIndices = Set(outcome.kept)
        let conflicting = Set(outcome.problems.map(\.index))
        for index in decoded.indices where !keptIndices.contains(index) && !conflicting.contains(index) {
            let repeated = decoded[index].entry.entry
            if let owner = kept.firstIndex(where: { $0.dest == repeated.dest && $0.url.string == repeated.url.string }) {
                kept[owner].repeatLocations.append(repeated.location)
            }
        }
        decoded = []
        return kept
    }
}
