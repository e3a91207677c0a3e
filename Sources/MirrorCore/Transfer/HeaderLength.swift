/// The one reader of the byte counts a reply states: Content-Length, and the positions and
/// total of Content-Range. A value it cannot read is not "no length": `ResponseHead.contradiction`
/// refuses the reply that carries it, as it refuses two different lengths, since libcurl may
/// have framed the body by something else (an overflowing Content-Length makes libcurl read
/// until the connection closes, so a cut body would look whole).
enum HeaderLength {
    /// The largest count read: the largest size a file can have on Linux (`off_t`, 2^63 - 1).
    /// Nothing larger can be stored, so a reply that claims more cannot be describing a file.
    static let maximum = Int64.max

    /// `text` as a count of bytes: decimal digits only (no sign, space, fraction or exponent),
    /// at most `maximum`; nil for anything else, the empty text included.
    static func parse(_ text: Substring) -> Int64? {
        guard !text.isEmpty, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let value = Int64(text) else {
            return nil
        }
        return value
    }
}
