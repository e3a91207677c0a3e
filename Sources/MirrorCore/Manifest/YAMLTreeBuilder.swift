/// Builds `YAMLNode`s from libyaml's events, and bounds untrusted structure as the events
/// arrive rather than after the whole text is parsed: a node deeper than
/// `YAMLDocumentParser.maximumDepth`, aliases that would add more than
/// `YAMLDocumentParser.maximumNodeCount` nodes once expanded (an "alias bomb"), or an alias to a
/// node containing it stops the build at that event.
///
/// Fed a whole document, it builds the document's tree (`YAMLDocumentParser`). Fed through
/// `openStreamed`/`closeStreamed` for the collections a reader walks itself, it builds only the
/// nodes inside them, one child at a time (`ManifestStream`): the limits, anchors and aliases
/// still count across the whole document.
struct YAMLTreeBuilder {
    struct Refusal: Error {
        var diagnostic: ManifestDiagnostic
    }

    /// A sequence or mapping whose end event has not arrived yet.
    private struct OpenCollection {
        var start: YAMLEvent.NodeStart
        var isSequence: Bool
        var isFlow: Bool
        var items: [YAMLNode] = []
        var pairs: [YAMLNode.Pair] = []
        var pendingKey: YAMLNode?
        /// Nodes in the collection so far, itself included, aliases counted as expanded.
        var nodeCount = 1
        /// Levels of nodes below it so far.
        var height = 0
    }

    /// A collection opened with `openStreamed`: its children are returned, not kept.
    private struct StreamedCollection {
        var start: YAMLEvent.NodeStart
        var isSequence: Bool
        var isFlow: Bool
        var nodeCount = 1
        var height = 0
    }

    /// A node an anchor names; `node` is nil while its collection is still open.
    private struct Anchored {
        var node: YAMLNode?
        var nodeCount: Int
        var height: Int
        var start: YAMLMark
    }

    let file: String
    /// Outermost first; always around every `open` collection.
    private var streamed: [StreamedCollection] = []
    private var open: [OpenCollection] = []
    private var anchors: [String: Anchored] = [:]
    /// Nodes that aliases have added so far. Nodes written out in the text are not counted:
    /// the text's size bounds them, and a reader that streams them does not keep them.
    private var expandedNodeCount = 0
    /// Problems that do not stop the build.
    private(set) var problems: [ManifestDiagnostic] = []
    /// The most nodes (aliases counted as expanded) in one node `add` has returned: the whole
    /// document when it builds the tree, one entry when a reader streams the list around it.
    private(set) var largestNodeBuilt = 0
    /// The nodes in the last node no collection being built took.
    private var completedNodeCount = 0

    init(file: String) {
        self.file = file
    }

    /// Collections open around the next node.
    private var depth: Int { streamed.count + open.count }

    /// Takes the next node event of the document.
    ///
    /// - Returns: A complete node that no collection being built holds: the document's root, or a
    ///   child (key, value or item) of the innermost streamed collection. Nil until then.
    mutating func add(_ event: YAMLEvent) throws(Refusal) -> YAMLNode? {
        guard let node = try take(event) else { return nil }
        largestNodeBuilt = max(largestNodeBuilt, completedNodeCount)
        return node
    }

    private mutating func take(_ event: YAMLEvent) throws(Refusal) -> YAMLNode? {
        switch event {
        case .scalar(let start, let text, let isPlain, let end):
            try begin(start)
            var node = YAMLNode(.scalar(text, isPlain: isPlain), line: start.start.line, column: start.start.column,
                                endLine: end.line, endColumn: end.column)
            node.characterRange = start.start.characterOffset..<end.characterOffset
            return try finish(node, properties: start, isCollection: false, nodeCount: 1, height: 0)

        case .collectionStart(let start, let isSequence, let isFlow):
            try begin(start)
            if let anchor = start.anchor {
                try register(anchor, Anchored(node: nil, nodeCount: 0, height: 0, start: start.start))
            }
            open.append(OpenCollection(start: start, isSequence: isSequence, isFlow: isFlow))
            return nil

        case .collectionEnd(let end):
            guard let collection = open.popLast() else { return nil }
            let start = collection.start.start
            var node = YAMLNode(
                collection.isSequence ? .sequence(collection.items) : .mapping(collection.pairs),
                line: start.line, column: start.column, endLine: end.line, endColumn: end.column,
                isFlow: collection.isFlow)
            node.characterRange = start.characterOffset..<end.characterOffset
            return try finish(node, properties: collection.start, isCollection: true,
                              nodeCount: collection.nodeCount, height: collection.height)

        case .alias(let name, let start, let end):
            guard let anchored = anchors[name] else {
                throw refusal(at: start, "invalid YAML: found undefined alias")
            }
            guard var node = anchored.node else {
                // The anchor names a collection still open around this alias. The anchored
                // node is reported: that is where the loop can be broken.
                throw refusal(at: anchored.start, "this node contains an alias to itself, which would make the manifest infinite")
            }
            try count(anchored.nodeCount, at: start)
            if depth + anchored.height > YAMLDocumentParser.maximumDepth {
                throw tooDeep(at: start)
            }
            node.alias = YAMLAliasSite(name: name, line: start.line, column: start.column,
                                       characterRange: start.characterOffset..<end.characterOffset)
            return attach(node, nodeCount: anchored.nodeCount, height: anchored.height)

        case .streamStart, .streamEnd, .documentStart, .documentEnd:
            return nil
        }
    }

    /// The node `add` returns for a mapping whose events were a start without anchor or tag,
    /// then `scalars` (each without anchor or tag, keys and values in turn), then its end:
    /// built from them at once, with the same checks and counts as through `add`, for the
    /// entries of `files`, nearly all of which are such mappings. Only where `add` would return
    /// the node: outside any collection being built.
    mutating func plainMapping(
        _ start: YAMLEvent.NodeStart, isFlow: Bool, scalars: [YAMLEvent], end: YAMLMark
    ) throws(Refusal) -> YAMLNode {
        precondition(open.isEmpty && start.anchor == nil && start.tag == nil && scalars.count % 2 == 0,
                     "a plain mapping has no anchor, no tag and pairs of scalars")
        try begin(start)
        var pairs: [YAMLNode.Pair] = []
        pairs.reserveCapacity(scalars.count / 2)
        var key: YAMLNode?
        for event in scalars {
            guard case .scalar(let scalarStart, let text, let isPlain, let scalarEnd) = event else {
                preconditionFailure("a plain mapping holds scalars only")
            }
            // Its scalars are one level below it, as `begin` would see them.
            if depth + 1 > YAMLDocumentParser.maximumDepth {
                throw tooDeep(at: scalarStart.start)
            }
            var node = YAMLNode(.scalar(text, isPlain: isPlain), line: scalarStart.start.line, column: scalarStart.start.column,
                                endLine: scalarEnd.line, endColumn: scalarEnd.column)
            node.characterRange = scalarStart.start.characterOffset..<scalarEnd.characterOffset
            if let pending = key {
                pairs.append(YAMLNode.Pair(key: pending, value: node))
                key = nil
            } else {
                key = node
            }
        }
        var node = YAMLNode(.mapping(pairs), line: start.start.line, column: start.start.column,
                            endLine: end.line, endColumn: end.column, isFlow: isFlow)
        node.characterRange = start.start.characterOffset..<end.characterOffset
        _ = attach(node, nodeCount: 1 + scalars.count, height: scalars.isEmpty ? 0 : 1)
        largestNodeBuilt = max(largestNodeBuilt, completedNodeCount)
        return node
    }

    /// Opens a collection whose node is not to be built: its children are returned by `add` one
    /// at a time as each completes, and not kept. Limits, tags and its anchor are checked as for
    /// any node. It may only be opened where `add` would return a node, outside any collection
    /// being built.
    mutating func openStreamed(_ start: YAMLEvent.NodeStart, isSequence: Bool, isFlow: Bool) throws(Refusal) {
        precondition(open.isEmpty, "a streamed collection inside one being built")
        try begin(start)
        if let anchor = start.anchor {
            try register(anchor, Anchored(node: nil, nodeCount: 0, height: 0, start: start.start))
        }
        streamed.append(StreamedCollection(start: start, isSequence: isSequence, isFlow: isFlow))
    }

    /// Closes the innermost streamed collection at its end event.
    ///
    /// - Returns: A node that stands for it: its kind, style and positions, but no children. An
    ///   alias to it gets this stand-in (counted as the nodes it stood for), which is all a
    ///   manifest reads of a collection it streams: what it is and where.
    mutating func closeStreamed(end: YAMLMark) throws(Refusal) -> YAMLNode {
        let collection = streamed.removeLast()
        let start = collection.start.start
        var node = YAMLNode(
            collection.isSequence ? .sequence([]) : .mapping([]),
            line: start.line, column: start.column, endLine: end.line, endColumn: end.column,
            isFlow: collection.isFlow)
        node.characterRange = start.characterOffset..<end.characterOffset
        _ = try finish(node, properties: collection.start, isCollection: true,
                       nodeCount: collection.nodeCount, height: collection.height)
        return node
    }

    /// Checks a node that starts at the current depth.
    private mutating func begin(_ start: YAMLEvent.NodeStart) throws(Refusal) {
        if depth > YAMLDocumentParser.maximumDepth {
            throw tooDeep(at: start.start)
        }
        checkTag(start)
    }

    /// Records a complete node under its anchor, if it has one, and attaches it. A collection's
    /// anchor was registered at its start, as libyaml's loader does.
    private mutating func finish(
        _ node: YAMLNode, properties: YAMLEvent.NodeStart, isCollection: Bool, nodeCount: Int, height: Int
    ) throws(Refusal) -> YAMLNode? {
        var node = node
        if let anchor = properties.anchor {
            node.hasAnchor = true
            let anchored = Anchored(node: node, nodeCount: nodeCount, height: height, start: properties.start)
            if isCollection {
                anchors[anchor] = anchored
            } else {
                try register(anchor, anchored)
            }
        }
        return attach(node, nodeCount: nodeCount, height: height)
    }

    /// Adds a complete node to the collection around it; returns it when no collection being
    /// built holds it.
    private mutating func attach(_ node: YAMLNode, nodeCount: Int, height: Int) -> YAMLNode? {
        guard !open.isEmpty else {
            completedNodeCount = nodeCount
            if !streamed.isEmpty {
                let last = streamed.count - 1
                streamed[last].nodeCount += nodeCount
                streamed[last].height = max(streamed[last].height, height + 1)
            }
            return node
        }
        let last = open.count - 1
        open[last].nodeCount += nodeCount
        open[last].height = max(open[last].height, height + 1)
        if open[last].isSequence {
            open[last].items.append(node)
        } else if let key = open[last].pendingKey {
            open[last].pairs.append(YAMLNode.Pair(key: key, value: node))
            open[last].pendingKey = nil
        } else {
            open[last].pendingKey = node
        }
        return nil
    }

    /// libyaml's own loader refuses an anchor defined twice, and so does a manifest.
    private mutating func register(_ anchor: String, _ anchored: Anchored) throws(Refusal) {
        if let first = anchors[anchor] {
            throw refusal(at: anchored.start, """
                invalid YAML: second occurrence (found duplicate anchor; first occurrence at \
                line \(first.start.line), column \(first.start.column))
                """)
        }
        anchors[anchor] = anchored
    }

    private mutating func count(_ added: Int, at mark: YAMLMark) throws(Refusal) {
        expandedNodeCount += added
        if expandedNodeCount > YAMLDocumentParser.maximumNodeCount {
            throw refusal(at: mark, """
                the document expands to more than \(YAMLDocumentParser.maximumNodeCount) YAML nodes \
                through its aliases (aliases repeated inside aliases?); a manifest is refused past that size
                """)
        }
    }

    private func tooDeep(at mark: YAMLMark) -> Refusal {
        refusal(at: mark, """
            YAML nested more than \(YAMLDocumentParser.maximumDepth) levels deep; \
            a manifest needs only a few
            """)
    }

    /// YAML's standard tags, the only ones a manifest may carry, as libyaml spells them.
    private static let standardTagPrefix = "tag:yaml.org,2002:"
    private static let allowedTags = ["str", "int", "bool", "null", "float", "seq", "map"].map {
        Array((standardTagPrefix + $0).utf8)
    }

    /// Tags change what a value means (`!env`, `!!binary`); a manifest has no use for any but
    /// YAML's standard ones, so anything else is reported rather than silently read as text.
    private mutating func checkTag(_ start: YAMLEvent.NodeStart) {
        guard let tagBytes = start.tag, !Self.allowedTags.contains(tagBytes) else { return }
        let tag = String(decoding: tagBytes, as: UTF8.self)
        let standard = Self.standardTagPrefix
        let shown = tag.hasPrefix(standard) ? "!!" + tag.dropFirst(standard.count) : tag
        problems.append(ManifestDiagnostic(
            location: SourceLocation(file: file, line: start.start.line, column: start.start.column), key: nil,
            message: "YAML tag `\(shown)` is not supported in a manifest; remove it"))
    }

    private func refusal(at mark: YAMLMark, _ message: String) -> Refusal {
        Refusal(diagnostic: ManifestDiagnostic(
            location: SourceLocation(file: file, line: mark.line, column: mark.column), key: nil, message: message))
    }
}
