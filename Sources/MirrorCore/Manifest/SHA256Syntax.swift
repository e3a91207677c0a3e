/// A SHA-256 pin: exactly 64 hexadecimal digits, either case.
enum SHA256Syntax {
    static let digitCount = 64

    /// The digest in lowercase, or why `text` is not one.
    static func parse(_ text: String) throws(ValueProblem) -> String {
        // A valid pin is 64 ASCII bytes, so it is recognised without splitting it into
        // Characters; only a bad one is looked at closely enough to say what is wrong.
        if text.utf8.count == digitCount, text.utf8.allSatisfy(isASCIIHexDigit) {
            return text.lowercased()
        }
        let characters = Array(text)
        guard characters.count == digitCount else {
            throw ValueProblem("expected \(digitCount) hexadecimal digits, found \(characters.count) characters")
        }
        if let bad = characters.firstIndex(where: { !$0.isHexDigit || !$0.isASCII }) {
            throw ValueProblem("expected \(digitCount) hexadecimal digits, found `\(characters[bad])` at position \(bad + 1), which is not a hexadecimal digit")
        }
        return text.lowercased()
    }

    private static func isASCIIHexDigit(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"), UInt8(ascii: "A")...UInt8(ascii: "F"):
            true
        default:
            false
        }
    }
}
