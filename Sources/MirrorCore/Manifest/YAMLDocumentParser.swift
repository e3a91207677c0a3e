import CYAML

/// Reads the YAML text of a manifest with libyaml and copies it into a `YAMLNode` tree.
///
/// The copy is where untrusted structure is bounded: aliases are expanded, so a document whose
/// aliases multiply out to more than `maximumNodeCount` nodes (an "alias bomb"), one nested more
/// than `maximumDepth` levels, or one whose alias refers to a node containing it, is refused.
enum YAMLDocumentParser {
    static let maximumNodeCount = 1_000_000
    static let maximumDepth = 64

    /// Parses the first and only YAML document in `bytes`.
    ///
    /// - Returns: The document's root node, or `nil` when the text holds no document at all
    ///   (it is empty, or only comments and blank lines).
    /// - Throws: `ManifestError` naming `file` for a YAML syntax error, a second document, an
    ///   unsupported tag, or a document past the limits above.
    static func parse(_ bytes: [UInt8], file: String) throws(ManifestError) -> YAMLNode? {
        if bytes.isEmpty { return nil }
        let result = bytes.withUnsafeBufferPointer { buffer in
            parse(buffer, file: file)
        }
        return try result.get()
    }

    private static func parse(
        _ buffer: UnsafeBufferPointer<UInt8>, file: String
    ) -> Result<YAMLNode?, ManifestError> {
        var parser = yaml_parser_t()
        guard yaml_parser_initialize(&parser) != 0 else {
            return .failure(ManifestError(ManifestDiagnostic(
                location: SourceLocation(file: file, line: 1, column: 1), key: nil,
                message: "cannot start the YAML parser (out of memory)")))
        }
        defer { yaml_parser_delete(&parser) }
        yaml_parser_set_input_string(&parser, buffer.baseAddress, buffer.count)

        var document = yaml_document_t()
        defer { yaml_document_delete(&document) }
        guard yaml_parser_load(&parser, &document) != 0 else {
            return .failure(ManifestError(syntaxError(parser, buffer: buffer, file: file)))
        }
        guard let root = yaml_document_get_root_node(&document) else { return .success(nil) }

        // libyaml loads one document per call; a second one would otherwise be ignored silently.
        var following = yaml_document_t()
        defer { yaml_document_delete(&following) }
        guard yaml_parser_load(&parser, &following) != 0 else {
            return .failure(ManifestError(syntaxError(parser, buffer: buffer, file: file)))
        }
        if let extra = yaml_document_get_root_node(&following) {
            return .failure(ManifestError(ManifestDiagnostic(
                location: location(of: extra.pointee.start_mark, file: file), key: nil,
                message: "a second YAML document starts here; a manifest is a single document")))
        }

        return withUnsafeMutablePointer(to: &document) { document in
            var copier = NodeCopier(document: document, file: file)
            do throws(NodeCopier.Refusal) {
                let tree = try copier.copy(root, depth: 0)
                if !copier.problems.isEmpty {
                    return .failure(ManifestError(diagnostics: copier.problems))
                }
                return .success(tree)
            } catch {
                return .failure(ManifestError(diagnostics: copier.problems + [error.diagnostic]))
            }
        }
    }

    private static func location(of mark: yaml_mark_t, file: String) -> SourceLocation {
        SourceLocation(file: file, line: Int(mark.line) + 1, column: Int(mark.column) + 1)
    }

    private static func syntaxError(
        _ parser: yaml_parser_t, buffer: UnsafeBufferPointer<UInt8>, file: String
    ) -> ManifestDiagnostic {
        let problem = parser.problem.map { String(cString: $0) } ?? "unknown error"
        switch parser.error {
        case YAML_MEMORY_ERROR:
            return ManifestDiagnostic(
                location: SourceLocation(file: file, line: 1, column: 1), key: nil,
                message: "out of memory while parsing YAML")
        case YAML_READER_ERROR:
            // The reader reports a byte offset rather than a mark.
            var message = "cannot read the file as YAML text: \(problem)"
            if parser.problem_value >= 0 {
                message += " (byte value \(parser.problem_value))"
            }
            return ManifestDiagnostic(
                location: location(ofByteOffset: parser.problem_offset, in: buffer, file: file),
                key: nil, message: message)
        default:
            var message = "invalid YAML: \(problem)"
            if let context = parser.context.map({ String(cString: $0) }) {
                let mark = parser.context_mark
                message += " (\(context) at line \(mark.line + 1), column \(mark.column + 1))"
            }
            return ManifestDiagnostic(
                location: location(of: parser.problem_mark, file: file), key: nil, message: message)
        }
    }

    private static func location(
        ofByteOffset offset: Int, in buffer: UnsafeBufferPointer<UInt8>, file: String
    ) -> SourceLocation {
        var line = 1
        var column = 1
        for byte in buffer.prefix(offset) {
            if byte == UInt8(ascii: "\n") {
                line += 1
                column = 1
            } else if byte & 0b1100_0000 != 0b1000_0000 {
                // Columns count characters, as libyaml's marks do, not UTF-8 continuation bytes.
                column += 1
            }
        }
        return SourceLocation(file: file, line: line, column: column)
    }
}

/// Copies libyaml's nodes into `YAMLNode`s, counting every node it produces.
private struct NodeCopier {
    struct Refusal: Error {
        var diagnostic: ManifestDiagnostic
    }

    let document: UnsafeMutablePointer<yaml_document_t>
    let file: String
    private var copiedNodes = 0
    /// Indices of the nodes between the root and the node being copied: an alias to one of them
    /// would make the tree infinite. A stack with one index per level, so a few entries long.
    private var enclosing: [Int32] = []
    /// Problems that do not stop the copy.
    private(set) var problems: [ManifestDiagnostic] = []

    init(document: UnsafeMutablePointer<yaml_document_t>, file: String) {
        self.document = document
        self.file = file
    }

    mutating func copy(_ node: UnsafeMutablePointer<yaml_node_t>, depth: Int) throws(Refusal) -> YAMLNode {
        let mark = node.pointee.start_mark
        let line = Int(mark.line) + 1
        let column = Int(mark.column) + 1
        let endLine = Int(node.pointee.end_mark.line) + 1
        let endColumn = Int(node.pointee.end_mark.column) + 1

        copiedNodes += 1
        if copiedNodes > YAMLDocumentParser.maximumNodeCount {
            throw refusal(line, column, """
                the document expands to more than \(YAMLDocumentParser.maximumNodeCount) YAML nodes \
                (aliases repeated inside aliases?); a manifest is refused past that size
                """)
        }
        if depth > YAMLDocumentParser.maximumDepth {
            throw refusal(line, column, """
                YAML nested more than \(YAMLDocumentParser.maximumDepth) levels deep; \
                a manifest needs only a few
                """)
        }
        checkTag(node, line: line, column: column)

        switch node.pointee.type {
        case YAML_SCALAR_NODE:
            let scalar = node.pointee.data.scalar
            let bytes = UnsafeBufferPointer(start: scalar.value, count: scalar.length)
            let text = String(decoding: bytes, as: UTF8.self)
            let isPlain = scalar.style == YAML_PLAIN_SCALAR_STYLE
            return YAMLNode(.scalar(text, isPlain: isPlain), line: line, column: column,
                            endLine: endLine, endColumn: endColumn)

        case YAML_SEQUENCE_NODE:
            let items = node.pointee.data.sequence.items
            var children: [YAMLNode] = []
            var item = items.start
            while let current = item, current != items.top {
                children.append(try copyChild(current.pointee, of: node, depth: depth))
                item = current + 1
            }
            return YAMLNode(.sequence(children), line: line, column: column, endLine: endLine, endColumn: endColumn,
                            isFlow: node.pointee.data.sequence.style == YAML_FLOW_SEQUENCE_STYLE)

        case YAML_MAPPING_NODE:
            let pairs = node.pointee.data.mapping.pairs
            var children: [YAMLNode.Pair] = []
            var pair = pairs.start
            while let current = pair, current != pairs.top {
                let key = try copyChild(current.pointee.key, of: node, depth: depth)
                let value = try copyChild(current.pointee.value, of: node, depth: depth)
                children.append(YAMLNode.Pair(key: key, value: value))
                pair = current + 1
            }
            return YAMLNode(.mapping(children), line: line, column: column, endLine: endLine, endColumn: endColumn,
                            isFlow: node.pointee.data.mapping.style == YAML_FLOW_MAPPING_STYLE)

        default:
            return YAMLNode(.scalar("", isPlain: true), line: line, column: column)
        }
    }

    private mutating func copyChild(
        _ index: Int32, of parent: UnsafeMutablePointer<yaml_node_t>, depth: Int
    ) throws(Refusal) -> YAMLNode {
        guard let child = yaml_document_get_node(document, index) else {
            let mark = parent.pointee.start_mark
            throw refusal(Int(mark.line) + 1, Int(mark.column) + 1, "libyaml returned a broken document")
        }
        let parentIndex = Int32(parent - document.pointee.nodes.start) + 1
        enclosing.append(parentIndex)
        defer { enclosing.removeLast() }
        if enclosing.contains(index) {
            // libyaml resolves an alias to the node it names and keeps no trace of the alias
            // itself, so the anchored node is the place that can be reported.
            let mark = child.pointee.start_mark
            throw refusal(Int(mark.line) + 1, Int(mark.column) + 1, """
                this node contains an alias to itself, which would make the manifest infinite
                """)
        }
        return try copy(child, depth: depth + 1)
    }

    /// YAML's standard tags, the only ones a manifest may carry, as libyaml spells them.
    private static let standardTagPrefix = "tag:yaml.org,2002:"
    private static let allowedTags = ["str", "int", "bool", "null", "float", "seq", "map"].map {
        Array((standardTagPrefix + $0).utf8)
    }

    /// Tags change what a value means (`!env`, `!!binary`); a manifest has no use for any but
    /// YAML's standard ones, so anything else is reported rather than silently read as text.
    /// libyaml gives every node a tag, so the allowed ones are recognised by their bytes
    /// before any String is made.
    private mutating func checkTag(_ node: UnsafeMutablePointer<yaml_node_t>, line: Int, column: Int) {
        guard let tagPointer = node.pointee.tag else { return }
        var length = 0
        while tagPointer[length] != 0 { length += 1 }
        let tagBytes = UnsafeBufferPointer(start: tagPointer, count: length)
        if Self.allowedTags.contains(where: { $0.elementsEqual(tagBytes) }) { return }

        let tag = String(decoding: tagBytes, as: UTF8.self)
        let standard = Self.standardTagPrefix
        let shown = tag.hasPrefix(standard) ? "!!" + tag.dropFirst(standard.count) : tag
        problems.append(ManifestDiagnostic(
            location: SourceLocation(file: file, line: line, column: column), key: nil,
            message: "YAML tag `\(shown)` is not supported in a manifest; remove it"))
    }

    private func refusal(_ line: Int, _ column: Int, _ message: String) -> Refusal {
        Refusal(diagnostic: ManifestDiagnostic(
            location: SourceLocation(file: file, line: line, column: column), key: nil, message: message))
    }
}
