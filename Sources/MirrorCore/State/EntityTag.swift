/// An HTTP entity tag (RFC 9110 §8.8.3) and its two comparisons (§8.8.3.2).
///
/// A server may send the same version's tag weak at one moment and strong at the next: Apache
/// marks it `W/"…"` while the file's modification time is less than a second old. Weak
/// comparison, which ignores the `W/`, recognises such a file as unchanged. Only strong
/// comparison promises the same bytes, which is what appending a range needs.
struct EntityTag: Equatable, Sendable {
    /// Sent with the case-sensitive `W/` prefix.
    var isWeak: Bool
    /// The opaque tag without its quotes. A tag sent unquoted (which RFC 9110 does not allow,
    /// but servers do) is taken whole, so that `"x"` and `x` name the same tag.
    var opaque: Substring

    init(_ text: String) {
        var rest = Substring(text).trimmingSpaces
        isWeak = rest.hasPrefix("W/")
        if isWeak { rest = rest.dropFirst(2) }
        if rest.count >= 2, rest.first == "\"", rest.last == "\"" {
            rest = rest.dropFirst().dropLast()
        }
        opaque = rest
    }

    /// Weak comparison: the opaque tags are equal, whether either is weak or not.
    static func weaklyMatch(_ first: String, _ second: String) -> Bool {
        EntityTag(first).opaque == EntityTag(second).opaque
    }

    /// Strong comparison: neither is weak, and the opaque tags are equal.
    static func stronglyMatch(_ first: String, _ second: String) -> Bool {
        let (one, other) = (EntityTag(first), EntityTag(second))
        return !one.isWeak && !other.isWeak && one.opaque == other.opaque
    }
}
