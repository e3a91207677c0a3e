/// A node of a parsed YAML document, built from libyaml's events. Aliases are expanded into
/// copies of the node they name.
struct YAMLNode: Sendable {
    enum Content: Sendable {
        /// `isPlain` is false for quoted and block scalars: those are always strings, never
        /// numbers, booleans or null.
        case scalar(String, isPlain: Bool)
        case sequence([YAMLNode])
        case mapping([Pair])
    }

    struct Pair: Sendable {
        var key: YAMLNode
        var value: YAMLNode
    }

    var content: Content
    /// The positions below, as 32-bit numbers: a line, column or character offset past
    /// 2,147,483,647 (only in a manifest of more than 2 GiB) is clamped to it. A node is copied at every step from
    /// its event to its entry, and its size is most of what such a copy costs.
    private var positions: Positions
    /// A flow collection (`{…}`, `[…]`) or a flow scalar, as opposed to block style.
    var isFlow: Bool
    /// Whether the node carries an anchor (`&name`) that aliases may refer to.
    var hasAnchor = false
    /// Where an alias put this copy, kept apart: few nodes have one.
    private var aliasSite: AliasSiteBox?

    private struct Positions {
        var line: Int32
        var column: Int32
        var endLine: Int32
        var endColumn: Int32
        var characterStart: Int32 = 0
        var characterEnd: Int32 = 0
    }

    private final class AliasSiteBox: Sendable {
        let site: YAMLAliasSite
        init(_ site: YAMLAliasSite) { self.site = site }
    }

    /// Where the node starts, counting from 1.
    var line: Int {
        get { Int(positions.line) }
        set { positions.line = Int32(clamping: newValue) }
    }
    var column: Int {
        get { Int(positions.column) }
        set { positions.column = Int32(clamping: newValue) }
    }
    /// Where the node ends (the position just past it), counting from 1; columns count
    /// Unicode scalars, as libyaml does.
    var endLine: Int {
        get { Int(positions.endLine) }
        set { positions.endLine = Int32(clamping: newValue) }
    }
    var endColumn: Int {
        get { Int(positions.endColumn) }
        set { positions.endColumn = Int32(clamping: newValue) }
    }
    /// Where the node's text is, counted as libyaml's marks count: in Unicode scalars (a CRLF
    /// is two) from the start of the text, after any byte order mark. It includes the node's
    /// anchor and tag; a block collection ends where the next token starts.
    var characterRange: Range<Int> {
        get { Int(positions.characterStart)..<Int(positions.characterEnd) }
        set {
            // Past 2^31 characters (a manifest streamed, never one `mirror lock` edits, which
            // holds at most 64 MiB) the offsets are clamped rather than trap.
            positions.characterStart = Int32(clamping: newValue.lowerBound)
            positions.characterEnd = Int32(clamping: newValue.upperBound)
        }
    }
    /// Set when an alias (`*name`) put this copy here; the node's own positions are those of
    /// the anchored node.
    var alias: YAMLAliasSite? {
        get { aliasSite?.site }
        set { aliasSite = newValue.map(AliasSiteBox.init) }
    }

    init(_ content: Content, line: Int, column: Int, endLine: Int? = nil, endColumn: Int? = nil, isFlow: Bool = false) {
        self.content = content
        positions = Positions(line: Int32(clamping: line), column: Int32(clamping: column),
                              endLine: Int32(clamping: endLine ?? line), endColumn: Int32(clamping: endColumn ?? column))
        self.isFlow = isFlow
    }

    /// The text of a scalar that is not null; nil for null, sequences and mappings.
    var text: String? {
        guard case .scalar(let text, _) = content, !isNull else { return nil }
        return text
    }

    /// The text of a plain (unquoted) scalar that is not null.
    var plainText: String? {
        guard case .scalar(let text, isPlain: true) = content, !isNull else { return nil }
        return text
    }

    /// YAML's null: an empty plain value, `~` or `null`.
    var isNull: Bool {
        // Compared only when short enough to be one of them: the comparisons cost some 500
        // instructions, and every value is asked.
        guard case .scalar(let text, isPlain: true) = content, text.utf8.count <= 4 else { return false }
        switch text {
        case "", "~", "null", "Null", "NULL": return true
        default: return false
        }
    }

    var isQuotedScalar: Bool {
        if case .scalar(_, isPlain: false) = content { return true }
        return false
    }

    /// What the node is, for "found …" in messages: `` `1.5` ``, `the quoted string "5"`,
    /// `a mapping`. Long scalars are shortened.
    var summary: String {
        switch content {
        case .sequence: return "a sequence"
        case .mapping: return "a mapping"
        case .scalar(let text, let isPlain):
            if isNull { return "an empty value" }
            let shown = text.count > 40 ? String(text.prefix(40)) + "…" : text
            return isPlain ? "`\(shown)`" : "the quoted string \"\(shown)\""
        }
    }
}

/// Where an alias (`*name`) stands in the text.
struct YAMLAliasSite: Sendable {
    var name: String
    var line: Int
    var column: Int
    /// As `YAMLNode.characterRange` counts.
    var characterRange: Range<Int>
}
