/// A digest pin: exactly 64 (`sha256`) or 128 (`sha512`) hexadecimal digits, either case.
enum DigestSyntax {
    /// The digest in lowercase, or why `text` is not one of `algorithm`.
    static func parse(_ text: String, _ algorithm: DigestAlgorithm) throws(ValueProblem) -> String {
        let digitCount = algorithm.hexLength
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

    static func isASCIIHexDigit(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"), UInt8(ascii: "A")...UInt8(ascii: "F"):
            true
        default:
            false
        }
    }
}
