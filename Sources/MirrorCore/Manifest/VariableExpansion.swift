/// `${NAME}` references in manifest text, replaced by environment variables.
///
/// `NAME` is `[A-Za-z_][A-Za-z0-9_]*`. `$$` stands for one literal `$`. A `$NAME` without braces
/// is not expanded; it is listed in `unbraced`, for the manifest to refuse (it is almost always
/// a `${NAME}` with its braces forgotten). Any other `$`, including a `${` that does not form a
/// reference, is kept as it is.
struct VariableExpansion: Equatable {
    /// The text with every set variable substituted. May hold secrets.
    var text: String
    /// Names referenced, in order of first appearance.
    var referenced: [String]
    /// Names referenced but absent from the environment, in order of first appearance. An empty
    /// value counts as set.
    var unset: [String]
    /// Names referenced and set to the empty string, in order of first appearance: harmless in a
    /// header, but in a path the text around them becomes another path (`${R}/data` is `/data`).
    var empty: [String] = []
    /// Names written as `$NAME`, without braces, in order of first appearance.
    var unbraced: [String] = []

    init(text: String, referenced: [String], unset: [String], unbraced: [String] = [], empty: [String] = []) {
        self.text = text
        self.referenced = referenced
        self.unset = unset
        self.unbraced = unbraced
        self.empty = empty
    }

    init(expanding source: String, environment: [String: String]) {
        // Most values hold no `$` at all, and so nothing to expand or unescape.
        guard source.containsByte(.dollarSign) else {
            self.init(text: source, referenced: [], unset: [])
            return
        }
        var output = String.UnicodeScalarView()
        var referenced: [String] = []
        var unset: [String] = []
        var unbraced: [String] = []
        var empty: [String] = []
        let scalars = source.unicodeScalars
        var index = scalars.startIndex
        while index < scalars.endIndex {
            let scalar = scalars[index]
            let next = scalars.index(after: index)
            guard scalar == "$", next < scalars.endIndex else {
                output.append(scalar)
                index = next
                continue
            }
            if scalars[next] == "$" {
                output.append("$")
                index = scalars.index(after: next)
                continue
            }
            if scalars[next] == "{", let (name, end) = Self.reference(in: scalars, openingBraceAt: next) {
                let firstReference = !referenced.contains(name)
                if firstReference { referenced.append(name) }
                if let value = environment[name] {
                    if value.isEmpty, firstReference { empty.append(name) }
                    output.append(contentsOf: value.unicodeScalars)
                } else if !unset.contains(name) {
                    unset.append(name)
                }
                index = end
                continue
            }
            if Self.isNameStart(scalars[next]) {
                var end = scalars.index(after: next)
                while end < scalars.endIndex, Self.isNameContinuation(scalars[end]) { end = scalars.index(after: end) }
                let name = String(scalars[next..<end])
                if !unbraced.contains(name) { unbraced.append(name) }
            }
            output.append(scalar)
            index = next
        }
        self.init(text: String(output), referenced: referenced, unset: unset, unbraced: unbraced, empty: empty)
    }

    /// The name of the `${NAME}` whose `{` is at `brace`, and the index just past its `}`.
    private static func reference(
        in scalars: String.UnicodeScalarView, openingBraceAt brace: String.UnicodeScalarView.Index
    ) -> (String, String.UnicodeScalarView.Index)? {
        let nameStart = scalars.index(after: brace)
        guard nameStart < scalars.endIndex, isNameStart(scalars[nameStart]) else { return nil }
        var cursor = scalars.index(after: nameStart)
        while cursor < scalars.endIndex, isNameContinuation(scalars[cursor]) {
            cursor = scalars.index(after: cursor)
        }
        guard cursor < scalars.endIndex, scalars[cursor] == "}" else { return nil }
        return (String(scalars[nameStart..<cursor]), scalars.index(after: cursor))
    }

    private static func isNameStart(_ scalar: Unicode.Scalar) -> Bool {
        scalar == "_" || ("A"..."Z").contains(scalar) || ("a"..."z").contains(scalar)
    }

    private static func isNameContinuation(_ scalar: Unicode.Scalar) -> Bool {
        isNameStart(scalar) || ("0"..."9").contains(scalar)
    }
}
