/// An HTTP entity tag (RFC 9110 §8.8.3) and its two comparisons (§8.8.3.2).
///
/// A server may send the same version's tag weak at one moment and strong at the next: Apache
/// marks it `W/"…"` while the file's modification time is less than a second old. Weak
/// comparison, which ignores the `W/`, recognises such a file as unchanged. Only strong
/// comparison promises the same bytes, which is what appending a range needs.
///
/// Tags are compared on their bytes, as the server sent them. Swift's `String` equality is
/// Unicode's canonical equivalence: `"café"` written with a precomposed `é` and with `e` and a
/// combining accent are equal Strings but different tags, and a server that changes one into
/// the other has named a new version.
struct EntityTag: Equatable, Sendable {
    /// Sent with the case-sensitive `W/` prefix.
    var isWeak: Bool
    /// The opaque tag without its quotes. A tag sent unquoted (which RFC 9110 does not allow,
    /// but servers do) is taken whole, so that `"x"` and `x` name the same tag.
    var opaque: Substring

    init(_ text: String) {
        if let (isWeak, opaque) = Self.asciiParts(of: text) {
            self.isWeak = isWeak
            self.opaque = opaque
            return
        }
        var rest = Substring(text).trimmingSpaces
        isWeak = rest.hasPrefix("W/")
        if isWeak { rest = rest.dropFirst(2) }
        if rest.count >= 2, rest.first == "\"", rest.last == "\"" {
            rest = rest.dropFirst().dropLast()
        }
        opaque = rest
    }

    /// The cuts of `init` made on the bytes, for text of tabs and printable ASCII only (where
    /// every byte is one Character, so they fall where `init`'s do); nil for any other text.
    /// Every reply's tag is compared with the record's: Characters cost thousands of
    /// instructions a tag.
    private static func asciiParts(of text: String) -> (isWeak: Bool, opaque: Substring)? {
        var text = text
        guard let (isWeak, start, end) = text.withUTF8({ bytes -> (Bool, Int, Int)? in
            guard bytes.allSatisfy({ $0 == 0x09 || (0x20...0x7E).contains($0) }) else { return nil }
            var start = 0
            var end = bytes.count
            while start < end, bytes[start] == 0x20 || bytes[start] == 0x09 { start += 1 }
            while end > start, bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09 { end -= 1 }
            let isWeak = end - start >= 2 && bytes[start] == UInt8(ascii: "W") && bytes[start + 1] == UInt8(ascii: "/")
            if isWeak { start += 2 }
            if end - start >= 2, bytes[start] == UInt8(ascii: "\""), bytes[end - 1] == UInt8(ascii: "\"") {
                start += 1
                end -= 1
            }
            return (isWeak, start, end)
        }) else { return nil }
        let utf8 = text.utf8
        return (isWeak, text[utf8.index(utf8.startIndex, offsetBy: start)..<utf8.index(utf8.startIndex, offsetBy: end)])
    }

    /// Whether `text` is one entity-tag as RFC 9110 §8.8.3 writes it: `"…"` or `W/"…"`, the
    /// quoted part of visible characters other than `"` (or obs-text). Not `*`, not a list, not
    /// an unquoted token: sent back as `If-None-Match`, such a value would ask another question
    /// (`*` is answered 304 for any version at all).
    static func isSingleTag(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            var start = 0
            if bytes.count >= 2, bytes[0] == UInt8(ascii: "W"), bytes[1] == UInt8(ascii: "/") { start = 2 }
            guard bytes.count - start >= 2, bytes[start] == UInt8(ascii: "\""), bytes[bytes.count - 1] == UInt8(ascii: "\"") else { return false }
            var index = start + 1
            while index < bytes.count - 1 {
                let byte = bytes[index]
                guard byte == 0x21 || (0x23...0x7E).contains(byte) || byte >= 0x80 else { return false }
                index += 1
            }
            return true
        }
    }

    static func == (one: EntityTag, other: EntityTag) -> Bool {
        one.isWeak == other.isWeak && one.hasOpaqueBytes(of: other)
    }

    /// Whether the opaque tags are the same bytes.
    private func hasOpaqueBytes(of other: EntityTag) -> Bool {
        SameBytes.of(opaque, other.opaque)
    }

    /// Weak comparison: the opaque tags are the same bytes, whether either is weak or not.
    static func weaklyMatch(_ first: String, _ second: String) -> Bool {
        // The same bytes are the same opaque tag, weak or not: the reply's tag is most often the
        // record's, and parsing both cost 1,200 instructions.
        SameBytes.of(first, second) || EntityTag(first).hasOpaqueBytes(of: EntityTag(second))
    }

    /// Strong comparison: neither is weak, and the opaque tags are the same bytes.
    static func stronglyMatch(_ first: String, _ second: String) -> Bool {
        let (one, other) = (EntityTag(first), EntityTag(second))
        return !one.isWeak && !other.isWeak && one.hasOpaqueBytes(of: other)
    }
}
