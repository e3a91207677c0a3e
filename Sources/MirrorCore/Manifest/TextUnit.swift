/// A unit of text as the manifest's checks of URLs and paths read it: a `Character`, or a
/// UTF-8 byte.
///
/// Reading Characters is always right but slow. When the text is all ASCII its bytes give the
/// same answers, far faster: each byte is then a Character of its own, except that CR LF is
/// one Character, and CR and LF are never searched for. So a check is written once, for any
/// `TextUnit`, and run on `text.utf8` when `text.isASCII`, else on `text`.
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

extension Character: TextUnit {
    static var colon: Character { ":" }
    static var slash: Character { "/" }
    static var questionMark: Character { "?" }
    static var numberSign: Character { "#" }
    static var atSign: Character { "@" }
    static var dollarSign: Character { "$" }
    static var openingBrace: Character { "{" }
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
    /// Whether every character is ASCII, so the UTF-8 bytes can stand for the Characters.
    var isASCII: Bool {
        utf8.allSatisfy { $0 < 0x80 }
    }

    /// The `/`-separated components, empty ones left out: `split(separator: "/")`.
    var slashSeparatedComponents: [SubSequence] {
        guard isASCII else { return split(separator: "/") }
        return utf8.split(separator: .slash).map { self[$0.startIndex..<$0.endIndex] }
    }
}

extension String {
    /// Where the last `/` is: `lastIndex(of: "/")`.
    var lastSlash: Index? {
        isASCII ? utf8.lastIndex(of: .slash) : lastIndex(of: "/")
    }

    /// What follows the last `/` (perhaps nothing), or the whole text when it has no `/`.
    var afterLastSlash: Substring {
        lastSlash.map { self[index(after: $0)...] } ?? self[...]
    }
}
