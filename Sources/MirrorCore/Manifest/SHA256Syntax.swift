/// A SHA-256 pin: exactly 64 hexadecimal digits, either case.
enum SHA256Syntax {
    static let digitCount = 64

    /// The digest in lowercase, or why `text` is not one.
    static func parse(_ text: String) throws(ValueProblem) -> String {
        let characters = Array(text)
        guard characters.count == digitCount else {
            throw ValueProblem("expected \(digitCount) hexadecimal digits, found \(characters.count) characters")
        }
        if let bad = characters.firstIndex(where: { !$0.isHexDigit || !$0.isASCII }) {
            throw ValueProblem("expected \(digitCount) hexadecimal digits, found `\(characters[bad])` at position \(bad + 1), which is not a hexadecimal digit")
        }
        return text.lowercased()
    }
}
