/// A byte of UTF-8 as the manifest's checks of URLs and paths read it.
///
/// Every delimiter they look for (`/ ? # @ : $ {`) is ASCII, and an ASCII byte never occurs
/// inside a longer UTF-8 sequence, so searching the bytes finds exactly the delimiters that the
/// kernel and URL parsers see. Searching Characters would not: a `/` followed by a combining
/// mark is one Character, so `../\u{301}x` would look like a single harmless name while the
/// kernel reads `..` and `/`. (It is also far faster.)
protocol TextUnit: Equatable {
    static var colon: Self { get }
    static var slash: Self { get }
    static var questionMark: Self { get }
    static var numberSign: Self { get }
    static var atSign: Self { get }
    static var dollarSign: Self { get }
    static var openingBrace: Self { get }
}

extension TextUnit {
    /// `/`, `?` or `#`: what ends a URL's authority.
    var endsAuthority: Bool {
        self == .slash || self == .questionMark || self == .numberSign
    }
}

extension UInt8: TextUnit {
    static var colon: UInt8 { UInt8(ascii: ":") }
    static var slash: UInt8 { UInt8(ascii: "/") }
    static var questionMark: UInt8 { UInt8(ascii: "?") }
    static var numberSign: UInt8 { UInt8(ascii: "#") }
    static var atSign: UInt8 { UInt8(ascii: "@") }
    static var dollarSign: UInt8 { UInt8(ascii: "$") }
    static var openingBrace: UInt8 { UInt8(ascii: "{") }
}

extension StringProtocol {
    /// Whether every character is ASCII.
    var isASCII: Bool {
        utf8.allSatisfy { $0 < 0x80 }
    }

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
    /// Whether the text ends with the byte `/`.
    var endsWithSlash: Bool { utf8.last == .slash }
}

extension String {
    /// Where the last byte `/` is.
    var lastSlash: Index? {
        utf8.lastIndex(of: .slash)
    }

    /// What follows the last `/` (perhaps nothing), or the whole text when it has no `/`.
    var afterLastSlash: Substring {
        lastSlash.map { self[utf8.index(after: $0)...] } ?? self[...]
    }
}
