/// Builds the `YAMLNode` tree of one document from libyaml's events, and bounds untrusted
/// structure as the events arrive rather than after the whole text is parsed: a node deeper
/// than `YAMLDocumentParser.maximumDepth`, an alias that would take the tree past
/// `YAMLDocumentParser.maximumNodeCount` nodes once expanded (an "alias bomb"), or an alias to
/// a node containing it stops the build at that event.
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

    /// A node an anchor names; `node` is nil while its collection is still open.
    private struct Anchored {
        var node: YAMLNode?
        var nodeCount: Int
        var height: Int
        var start: YAMLMark
    }

    let file: String
    private var open: [OpenCollection] = []
    private var anchors: [String: Anchored] = [:]
    private var nodeCount = 0
    /// Problems that do not stop the build.
    private(set) var problems: [ManifestDiagnostic] = []

    init(file: String) {
        self.file = file
    }

    /// Takes the next node event of the document.
    ///
    /// - Returns: The document's root once its last event has arrived, nil until then.
    mutating func add(_ event: YAMLEvent) throws(Refusal) -> YAMLNode? {
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
            if open.count + anchored.height > YAMLDocumentParser.maximumDepth {
                throw tooDeep(at: start)
            }
            node.alias = YAMLAliasSite(name: name, line: start.line, column: start.column,
                                       characterRange: start.characterOffset..<end.characterOffset)
            return attach(node, nodeCount: anchored.nodeCount, height: anchored.height)

        case .streamStart, .streamEnd, .documentStart, .documentEnd:
            return nil
        }
    }

    /// Checks a node that starts at the current depth.
    private mutating func begin(_ start: YAMLEvent.NodeStart) throws(Refusal) {
        try count(1, at: start.start)
        if open.count > YAMLDocumentParser.maximumDepth {
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

    /// Adds a complete node to the collection around it; returns it when it is the root.
    private mutating func attach(_ node: YAMLNode, nodeCount: Int, height: Int) -> YAMLNode? {
        guard !open.isEmpty else { return node }
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
        nodeCount += added
        if nodeCount > YAMLDocumentParser.maximumNodeCount {
            throw refusal(at: mark, """
                the document expands to more than \(YAMLDocumentParser.maximumNodeCount) YAML nodes \
                (aliases repeated inside aliases?); a manifest is refused past that size
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
