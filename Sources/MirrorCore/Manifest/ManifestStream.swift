/// Decodes a manifest from libyaml's events as they arrive, without a tree of the whole
/// document: the top-level mapping and the `files` sequence are walked event by event
/// (`YAMLTreeBuilder.openStreamed`); each entry is built as a node of its own, decoded into an
/// `Entry` (`EntryListDecoder`) and dropped. The other top-level values are small and built whole.
/// Syntax errors, tags, limits, anchors and aliases are checked exactly as `YAMLDocumentParser`
/// checks them, and every problem is reported where the tree's decoding reports it.
///
/// Entries are decoded in the context (`defaults`, `allow_file`) that the top-level keys before
/// `files` give. When a key after `files` changes that context, the text is read a second time,
/// with the context known; memory stays as small, only the time doubles, and only for such a
/// manifest.
enum ManifestStream {
    /// Where the manifest's text is.
    enum Text {
        case bytes([UInt8])
        /// A regular file of `size` bytes when opened, read as libyaml needs it, from its start
        /// for each reading.
        case file(descriptor: Int32, size: Int)
    }

    /// A document as read: its top level, and the entries decoded on the way.
    struct Document {
        /// The top-level node. When it is a mapping, the value of its first `files` key stands in
        /// for the sequence without its entries (when it was one); other values are whole.
        var root: YAMLNode
        /// The entries of the first `files` key, when its value was a sequence.
        var files: EntryListDecoder?
        /// The most nodes built into one node on the way (`YAMLTreeBuilder.largestNodeBuilt`).
        var largestNodeBuilt = 0
        /// From a file: the checksum of the text read (`TextChecksum`).
        var checksum: UInt64?
    }

    /// What reading the entries again needs, after a first reading that kept none of them
    /// (`EntryListDecoder.Purpose.nothing`).
    struct Streaming {
        /// What the entries are decoded in.
        var context: EntryContext
        /// The indices in `files` of the entries dropped as repeats.
        var skipped: Set<Int>
        /// The entries the second reading hands on.
        var count: Int
        /// The checksum of the text the first reading read (`TextChecksum`).
        var checksum: UInt64?
        /// The entries with `insecure: true` (`EntryListDecoder.insecure`).
        var insecure: [(location: SourceLocation, dest: String)] = []
    }

    /// The manifest in `text`, or nil after recording its problems in `decoder`.
    ///
    /// - Parameter shard: Keeps only the entries of this shard, chosen by the hash of their
    ///   dest (`ShardHash`), and sets the manifest's `shard` and `shardTotals`. Every entry is
    ///   still decoded and checked.
    /// - Throws: `ManifestError` for an empty document and for problems at the YAML level (a
    ///   syntax error, a tag, a second document, the limits of `YAMLDocumentParser`), which
    ///   stop the reading.
    static func decode(
        _ text: Text, into decoder: inout ManifestDecoder, shard: ShardSelection? = nil
    ) throws(ManifestError) -> Manifest? {
        try decode(text, into: &decoder, purpose: .entries(shard: shard))?.manifest
    }

    /// As `decode(_:into:shard:)`, for `purpose` `.entries` or `.nothing`. With `.nothing`, the
    /// manifest has no entries and the second element says how to stream them, unless `files`
    /// was not a plain sequence (an alias to one, say): then its entries are decoded whole,
    /// into the manifest, and it is nil.
    static func decode(
        _ text: Text, into decoder: inout ManifestDecoder, purpose: EntryListDecoder.Purpose
    ) throws(ManifestError) -> (manifest: Manifest, streaming: Streaming?)? {
        guard var document = try read(text, decoder: decoder, context: nil, purpose: purpose) else {
            throw ManifestError(ManifestDiagnostic(
                location: SourceLocation(file: decoder.file, line: 1, column: 1), key: nil,
                message: "the manifest is empty; it needs at least `version: 1` and a `files:` list"))
        }
        let shard: ShardSelection? = if case .entries(let shard) = purpose { shard } else { nil }
        guard let top = decoder.decodeTopLevel(document.root) else { return nil }
        guard let files = top.files else { return decoder.manifest(top, entries: []).map { ($0, nil) } }
        guard var list = document.files.take() else {
            // Not a sequence, or an alias to one: decoded whole, as the tree is.
            let list = decoder.entryList(files, context: top.entryContext, shard: shard)
            return decoder.manifest(top, entries: list.entries, shard: shard, totals: list.totals).map { ($0, nil) }
        }
        if list.context != top.entryContext {
            // Dropped before the second reading, which would otherwise hold two lists of entries.
            list = EntryListDecoder(decoder: decoder.fresh, context: top.entryContext)
            list = try reread(text, decoder: decoder, context: top.entryContext, purpose: purpose, as: document)
        }
        let suspects = list.takeSuspects()
        if !suspects.isEmpty {
            // Its problems are the first reading's again: they are not recorded twice.
            let second = try reread(text, decoder: decoder, context: top.entryContext, purpose: .claims(suspects: suspects), as: document)
            list.settle(second.claims)
        }
        let entries = list.finish(files: files)
        decoder.append(list.decoder)
        guard let manifest = decoder.manifest(top, entries: entries, shard: shard, totals: list.totals) else { return nil }
        guard case .nothing = purpose else { return (manifest, nil) }
        return (manifest, Streaming(
            context: top.entryContext, skipped: list.skipped, count: list.decodedCount - list.skipped.count, checksum: document.checksum,
            insecure: list.insecure))
    }

    /// The list of `files` read again from `text`, which must be what `first` was read from:
    /// the same text gives the same reading, so a file that reads otherwise, or fails to read,
    /// or whose checksum differs, changed in between.
    static func reread(
        _ text: Text, decoder: ManifestDecoder, context: EntryContext, purpose: EntryListDecoder.Purpose, as first: Document
    ) throws(ManifestError) -> EntryListDecoder {
        let again: Document?
        do {
            again = try read(text, decoder: decoder, context: context, purpose: purpose)
        } catch {
            throw .changedWhileRead(decoder.file)
        }
        guard let again, let files = again.files, again.checksum == first.checksum else { throw .changedWhileRead(decoder.file) }
        return files
    }

    /// Reads the document in `text`, decoding the entries of `files` as they come.
    ///
    /// - Parameter context: What to decode the entries in; nil to take it from the top-level keys
    ///   that come before `files`.
    /// - Returns: nil when the text holds no document (it is empty, or only comments).
    ///   - purpose: What the list of entries keeps.
    static func read(
        _ text: Text, decoder: ManifestDecoder, context: EntryContext?, purpose: EntryListDecoder.Purpose = .entries(shard: nil)
    ) throws(ManifestError) -> Document? {
        switch text {
        case .bytes(let bytes):
            if bytes.isEmpty { return nil }
            let result = bytes.withUnsafeBufferPointer { buffer in
                Result { () throws(ManifestError) -> Document? in
                    var reader = try YAMLEventReader(input: buffer, file: decoder.file)
                    return try read(&reader, decoder: decoder, context: context, purpose: purpose)
                }
            }
            return try result.get()
        case .file(let descriptor, let size):
            let input = YAMLFileInput(descriptor: descriptor, size: size, limit: ManifestLoader.maximumFileSize)
            var reader = try YAMLEventReader(input: input, file: decoder.file)
            var document = try read(&reader, decoder: decoder, context: context, purpose: purpose)
            document?.checksum = input.checksum.value
            return document
        }
    }

    private static func read(
        _ reader: inout YAMLEventReader, decoder: ManifestDecoder, context: EntryContext?, purpose: EntryListDecoder.Purpose
    ) throws(ManifestError) -> Document? {
        var walk = Walk(builder: YAMLTreeBuilder(file: decoder.file), decoder: decoder, context: context, purpose: purpose)
        var document: Document?
        do throws(ManifestError) {
            document = try walk.document(&reader)
            document?.largestNodeBuilt = walk.builder.largestNodeBuilt
        } catch {
            // A file that cannot be read is the only problem worth reporting.
            if error.diagnostics.first?.location == nil { throw error }
            // Unsupported tags found before a syntax error or a refusal are reported with it.
            throw ManifestError(diagnostics: walk.builder.problems + error.diagnostics)
        }
        if !walk.builder.problems.isEmpty {
            throw ManifestError(diagnostics: walk.builder.problems)
        }
        return document
    }

    /// One reading of the events.
    private struct Walk {
        var builder: YAMLTreeBuilder
        let decoder: ManifestDecoder
        let context: EntryContext?
        let purpose: EntryListDecoder.Purpose
        /// The events of the entry being read by `plainEntry`, kept from entry to entry.
        var scalars: [YAMLEvent] = []

        mutating func document(_ reader: inout YAMLEventReader) throws(ManifestError) -> Document? {
            guard case .streamStart = try reader.next(), case .documentStart = try reader.next() else {
                return nil
            }
            let first = try reader.next()
            if case .documentEnd = first { return nil }
            let document: Document
            if case .collectionStart(let start, isSequence: false, let isFlow) = first {
                document = try topLevel(start, isFlow: isFlow, &reader)
            } else {
                document = Document(root: try node(startingWith: first, &reader), files: nil)
            }
            try YAMLDocumentParser.finishDocument(&reader, file: decoder.file)
            return document
        }

        /// The top-level mapping, from the event after its start to its end.
        private mutating func topLevel(
            _ start: YAMLEvent.NodeStart, isFlow: Bool, _ reader: inout YAMLEventReader
        ) throws(ManifestError) -> Document {
            try Self.refusing { () throws(YAMLTreeBuilder.Refusal) in
                try builder.openStreamed(start, isSequence: false, isFlow: isFlow)
            }
            var pairs: [YAMLNode.Pair] = []
            var files: EntryListDecoder?
            var filesSeen = false
            while true {
                let event = try reader.next()
                if case .collectionEnd(let end) = event {
                    var root = try Self.refusing { () throws(YAMLTreeBuilder.Refusal) in try builder.closeStreamed(end: end) }
                    root.content = .mapping(pairs)
                    return Document(root: root, files: files)
                }
                let key = try node(startingWith: event, &reader)
                let valueEvent = try reader.next()
                var value: YAMLNode
                // The first `files` key is the one decoded; a later one is a duplicate.
                if !filesSeen, case .scalar("files", _) = key.content {
                    filesSeen = true
                    if case .collectionStart(let listStart, isSequence: true, let listIsFlow) = valueEvent {
                        let root = YAMLNode(.mapping(pairs), line: start.start.line, column: start.start.column)
                        var list = EntryListDecoder(
                            decoder: decoder.fresh, context: context ?? provisionalContext(pairs, root), purpose: purpose)
                        value = try entries(listStart, isFlow: listIsFlow, into: &list, &reader)
                        files = list
                    } else {
                        value = try node(startingWith: valueEvent, &reader)
                    }
                } else {
                    value = try node(startingWith: valueEvent, &reader)
                }
                pairs.append(YAMLNode.Pair(key: key, value: value))
            }
        }

        /// The entries of a `files` sequence, each decoded into `list` as soon as it is read: from
        /// the first full batch read while no library is being loaded on, on a thread of its own
        /// while the next are read (`EntryDecodePipeline`).
        ///
        /// - Returns: The stand-in for the sequence.
        private mutating func entries(
            _ start: YAMLEvent.NodeStart, isFlow: Bool, into list: inout EntryListDecoder, _ reader: inout YAMLEventReader
        ) throws(ManifestError) -> YAMLNode {
            try Self.refusing { () throws(YAMLTreeBuilder.Refusal) in
                try builder.openStreamed(start, isSequence: true, isFlow: isFlow)
            }
            // Where the list starts: what comes before it (comments, `defaults`, `hosts`) says
            // nothing of the entries' length.
            let listStart = reader.charactersScanned
            var pipeline: EntryDecodePipeline?
            // On every way out, a syntax error too: the thread ends and the list comes back.
            defer { if let pipeline { list = pipeline.finish() } }
            var read = 0
            while true {
                let event = try reader.next()
                if case .collectionEnd(let end) = event {
                    return try Self.refusing { () throws(YAMLTreeBuilder.Refusal) in try builder.closeStreamed(end: end) }
                }
                let node: YAMLNode
                if case .collectionStart(let entryStart, isSequence: false, let entryIsFlow) = event,
                   entryStart.anchor == nil, entryStart.tag == nil {
                    node = try plainEntry(entryStart, isFlow: entryIsFlow, &reader)
                } else {
                    node = try self.node(startingWith: event, &reader)
                }
                read += 1
                if let pipeline {
                    pipeline.add(node)
                } else {
                    list.add(node)
                    // From the first full batch on, once no library is being loaded: the
                    // thread made during libcurl's load would wait for it, and the reading with it.
                    if read % EntryDecodePipeline.batch == 0, EntryDecodePipeline.applies(to: purpose), !LibraryLoading.inProgress {
                        pipeline = EntryDecodePipeline(list: list)
                    }
                }
                if read == Self.entriesBeforeEstimate {
                    let estimate = Self.estimatedCount(of: read, since: listStart, in: reader)
                    if let pipeline { pipeline.reserveCapacity(estimate) } else { list.reserveCapacity(estimate) }
                }
            }
        }

        /// The entry mapping whose start is `start`: built at once (`YAMLTreeBuilder.plainMapping`)
        /// when it holds only scalars without anchor or tag, as nearly every entry does; else
        /// through the builder, its events so far given to it first.
        private mutating func plainEntry(
            _ start: YAMLEvent.NodeStart, isFlow: Bool, _ reader: inout YAMLEventReader
        ) throws(ManifestError) -> YAMLNode {
            scalars.removeAll(keepingCapacity: true)
            while true {
                let event = try reader.next()
                switch event {
                case .collectionEnd(let end):
                    return try Self.refusing { () throws(YAMLTreeBuilder.Refusal) in
                        try builder.plainMapping(start, isFlow: isFlow, scalars: scalars, end: end)
                    }
                case .scalar(let scalarStart, _, _, _) where scalarStart.anchor == nil && scalarStart.tag == nil:
                    scalars.append(event)
                default:
                    try Self.refusing { () throws(YAMLTreeBuilder.Refusal) in
                        _ = try builder.add(.collectionStart(start, isSequence: false, isFlow: isFlow))
                        for scalar in scalars { _ = try builder.add(scalar) }
                    }
                    return try node(startingWith: event, &reader)
                }
            }
        }

        /// After how many entries the length of the list is estimated: early, so that the list
        /// grows by doubling only through a few small steps (each step frees the last, and the
        /// holes stay in the heap), and late enough for the text of the entries so far to tell
        /// their length (the scanner runs at most a few tokens ahead, `charactersScanned`).
        private static let entriesBeforeEstimate = 1_024

        /// How many entries the list will likely hold, from how much of the text `count` of them
        /// took since the list's start (`listStart`), with a margin: capacity reserved but never
        /// used costs address space, not memory. The text is counted in Unicode scalars, no more
        /// than its bytes, so text that is not ASCII makes the estimate larger, not smaller. No
        /// more than the text could hold: an entry takes at least 16 bytes (`- url: ftp://h/a`).
        private static func estimatedCount(of count: Int, since listStart: Int, in reader: borrowing YAMLEventReader) -> Int {
            let taken = max(reader.charactersScanned - listStart, 1)
            let remaining = max(reader.inputCount - listStart, 1)
            let estimate = Double(count) * Double(remaining) / Double(taken) * 1.25
            return Int(min(estimate, Double(reader.inputCount / 16)))
        }

        /// The context the top-level `pairs` before `files` give. Problems with them are
        /// reported once the whole top level is read, so this reading's are dropped.
        private func provisionalContext(_ pairs: [YAMLNode.Pair], _ root: YAMLNode) -> EntryContext {
            var scratch = decoder.fresh
            return scratch.entryContext(inTopLevel: pairs, at: root)
        }

        /// The complete node whose first event is `event`.
        private mutating func node(startingWith event: YAMLEvent, _ reader: inout YAMLEventReader) throws(ManifestError) -> YAMLNode {
            var event = event
            while true {
                let node = try Self.refusing { () throws(YAMLTreeBuilder.Refusal) in try builder.add(event) }
                if let node { return node }
                event = try reader.next()
            }
        }

        private static func refusing<T>(_ body: () throws(YAMLTreeBuilder.Refusal) -> T) throws(ManifestError) -> T {
            do throws(YAMLTreeBuilder.Refusal) {
                return try body()
            } catch {
                throw ManifestError(error.diagnostic)
            }
        }
    }
}
