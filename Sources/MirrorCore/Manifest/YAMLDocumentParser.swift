/// Reads the YAML text of a manifest with libyaml's event parser into a `YAMLNode` tree of the
/// whole document. Only `mirror lock` needs that tree, to place its edits
/// (`ManifestPinWriter`); loading a manifest streams it instead (`ManifestStream`), under the
/// same limits and with the same checks, defined here.
///
/// Untrusted structure is bounded while libyaml parses: aliases are expanded, so a document
/// whose aliases add more than `maximumNodeCount` nodes (an "alias bomb"), one nested more
/// than `maximumDepth` levels, or one whose alias refers to a node containing it, is refused at
/// the event that crosses the line. libyaml has scanned at most a bounded stretch of text past
/// that point, so a refusal costs time in proportion to the text before it, however deep the
/// rest goes.
enum YAMLDocumentParser {
    /// Nodes that aliases may add, counted as expanded. Nodes written out are bounded only by
    /// the text (`ManifestLoader.maximumFileSize`): memory follows the entries kept, not them.
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
            Result { () throws(ManifestError) -> YAMLNode? in
                var reader = try YAMLEventReader(input: buffer, file: file)
                return try parse(&reader, file: file)
            }
        }
        return try result.get()
    }

    /// Reads one document's events from `reader`, stopping at the first refusal.
    static func parse(_ reader: inout YAMLEventReader, file: String) throws(ManifestError) -> YAMLNode? {
        var builder = YAMLTreeBuilder(file: file)
        let root: YAMLNode?
        do throws(ManifestError) {
            root = try readDocument(&reader, into: &builder, file: file)
        } catch {
            // Unsupported tags found before a syntax error or a refusal are reported with it.
            throw ManifestError(diagnostics: builder.problems + error.diagnostics)
        }
        if !builder.problems.isEmpty {
            throw ManifestError(diagnostics: builder.problems)
        }
        return root
    }

    private static func readDocument(
        _ reader: inout YAMLEventReader, into builder: inout YAMLTreeBuilder, file: String
    ) throws(ManifestError) -> YAMLNode? {
        guard case .streamStart = try reader.next(), case .documentStart = try reader.next() else {
            return nil
        }
        var root: YAMLNode?
        while root == nil {
            let event = try reader.next()
            if case .documentEnd = event { return nil }
            do throws(YAMLTreeBuilder.Refusal) {
                root = try builder.add(event)
            } catch {
                throw ManifestError(error.diagnostic)
            }
        }
        try finishDocument(&reader, file: file)
        return root
    }

    /// Reads the end of a document whose root is complete, and refuses a second document, which
    /// would otherwise be ignored silently.
    static func finishDocument(_ reader: inout YAMLEventReader, file: String) throws(ManifestError) {
        _ = try reader.next()  // the document's end
        if case .documentStart = try reader.next(), let mark = try reader.next().nodeStart {
            throw ManifestError(ManifestDiagnostic(
                location: SourceLocation(file: file, line: mark.line, column: mark.column), key: nil,
                message: "a second YAML document starts here; a manifest is a single document"))
        }
    }
}

extension YAMLEvent {
    /// Where a node event's node starts; nil for other events.
    var nodeStart: YAMLMark? {
        switch self {
        case .scalar(let start, _, _, _), .collectionStart(let start, _, _): return start.start
        case .alias(_, let start, _): return start
        default: return nil
        }
    }
}
