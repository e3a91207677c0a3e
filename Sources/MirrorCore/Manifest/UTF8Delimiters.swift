/// The ASCII delimiters the manifest's checks of URLs and paths look for (`/ ? # @ : $ {`), as
/// UTF-8 bytes, and the searches made with them.
///
/// An ASCII byte never occurs inside a longer UTF-8 sequence, so searching the bytes finds
/// exactly the delimiters that the kernel and URL parsers see. Searching Characters would not:
/// a `/` followed by a combining mark is one Character, so `../\u{301}x` would look like a
/// single harmless name while the kernel reads `..` and `/`. (It is also far faster.)
extension UInt8 {
    static let colon = UInt8(ascii: ":")
    static let slash = UInt8(ascii: "/")
    static let questionMark = UInt8(ascii: "?")
    static let numberSign = UInt8(ascii: "#")
    static let atSign = UInt8(ascii: "@")
    static let dollarSign = UInt8(ascii: "$")
    static let openingBrace = UInt8(ascii: "{")

    /// `/`, `?` or `#`: what ends a URL's authority.
    var endsAuthority: Bool {
        self == .slash || self == .questionMark || self == .numberSign
    }
}

extension StringProtocol {
    /// The components between the bytes `/`, empty ones left out.
    var slashSeparatedComponents: [SubSequence] {
        utf8.split(separator: .slash).map { self[$0.startIndex..<$0.endIndex] }
    }

    /// Whether the text starts with the byte `/`.
    var startsWithSlash: Bool { utf8.first == .slash }
}

extension String {
    /// Whether the text ends with the byte `/`.
    var endsWithSlash: Bool { utf8.last == .slash }
}

extension Substring {
    /// Whether the text holds the ASCII `byte` (see `String.containsByte`).
    func containsByte(_ byte: UInt8) -> Bool {
        var text = self
        return text.withUTF8 { $0.contains(byte) }
    }

    /// Whether the text ends with the byte `/`.
    var endsWithSlash: Bool { utf8.last == .slash }
}

extension String {
    /// Whether the text holds the ASCII `byte`, searched on its UTF-8 in place (through
    /// `String.UTF8View` it costs some 15 instructions a byte).
    func containsByte(_ byte: UInt8) -> Bool {
        var text = self
        return text.withUTF8 { $0.contains(byte) }
    }

    /// Where the last byte `/` is.
    var lastSlash: Index? {
        utf8.lastIndex(of: .slash)
    }

    /// What follows the last `/` (perhaps nothing), or the whole text when it has no `/`.
    var afterLastSlash: Substring {
        lastSlash.map { self[utf8.index(after: $0)...] } ?? self[...]
    }
}
