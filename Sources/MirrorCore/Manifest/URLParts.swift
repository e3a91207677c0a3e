import FoundationEssentials

/// The parts of a URL that the manifest's checks and defaults read, as `URLComponents` gives
/// them (percent-decoded user and password, the path still percent-encoded).
///
/// Most manifest URLs are plain: `scheme://host[:port]/path` in a few ASCII characters. Those
/// are split here in one pass over the bytes; building `URLComponents` for each of them cost
/// about 8,700 instructions an entry as a manifest loads. Anything else (userinfo, an IP
/// literal, a query, a fragment, a `%`, a character outside the few taken here) goes through
/// `URLComponents`, which stays the one judge of what is valid: the plain form is a subset of
/// what it accepts, and `URLPartsTests` holds the two readings to each other.
struct URLParts: Equatable {
    var scheme: String?
    var host: String?
    var port: Int?
    var user: String?
    var password: String?
    var percentEncodedPath: String

    init(scheme: String?, host: String?, port: Int? = nil, user: String? = nil, password: String? = nil, percentEncodedPath: String) {
        self.scheme = scheme
        self.host = host
        self.port = port
        self.user = user
        self.password = password
        self.percentEncodedPath = percentEncodedPath
    }

    init(_ components: URLComponents) {
        self.init(
            scheme: components.scheme, host: components.host, port: components.port, user: components.user,
            password: components.password, percentEncodedPath: components.percentEncodedPath)
    }

    /// The parts of `text`, or nil when it is not a valid URL (`URLComponents` refuses it).
    init?(parsing text: String) {
        if let plain = Self.plain(text) {
            self = plain
        } else if let components = URLComponents(string: text, encodingInvalidCharacters: false) {
            self.init(components)
        } else {
            return nil
        }
    }

    /// The parts of `text` when it is a plain URL, nil for any other text (valid or not):
    /// `scheme://host[:port]path`, where the scheme is a letter then letters, digits, `+`, `-`
    /// or `.`; the host one or more letters, digits, `-`, `.`, `_` or `~`; the port one to five
    /// digits; the path empty or starting with `/`, of unreserved characters, sub-delimiters,
    /// `:`, `@` and `/`.
    static func plain(_ text: String) -> URLParts? {
        var text = text
        return text.withUTF8 { bytes -> URLParts? in
            let count = bytes.count
            guard count > 0, bytes[0].isASCIILetter else { return nil }
            var index = 1
            while index < count, bytes[index].isSchemeCharacter { index += 1 }
            let schemeEnd = index
            guard index + 2 < count, bytes[index] == .colon, bytes[index + 1] == .slash, bytes[index + 2] == .slash else {
                return nil
            }
            index += 3
            let hostStart = index
            while index < count, bytes[index].isPlainHostCharacter { index += 1 }
            let hostEnd = index
            guard hostEnd > hostStart else { return nil }
            var port: Int?
            if index < count, bytes[index] == .colon {
                index += 1
                let portStart = index
                var value = 0
                while index < count, index - portStart < 5, bytes[index].isASCIIDigit {
                    value = value * 10 + Int(bytes[index] - UInt8(ascii: "0"))
                    index += 1
                }
                guard index > portStart else { return nil }
                port = value
            }
            let pathStart = index
            guard index == count || bytes[index] == .slash else { return nil }
            while index < count, bytes[index].isPlainPathCharacter { index += 1 }
            guard index == count else { return nil }
            func string(_ range: Range<Int>) -> String {
                String(decoding: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self)
            }
            return URLParts(
                scheme: string(0..<schemeEnd), host: string(hostStart..<hostEnd), port: port,
                percentEncodedPath: string(pathStart..<count))
        }
    }
}

private extension UInt8 {
    var isASCIILetter: Bool { (self | 0x20) >= UInt8(ascii: "a") && (self | 0x20) <= UInt8(ascii: "z") }
    var isASCIIDigit: Bool { self >= UInt8(ascii: "0") && self <= UInt8(ascii: "9") }

    /// What may follow a scheme's first letter.
    var isSchemeCharacter: Bool {
        isASCIILetter || isASCIIDigit || self == UInt8(ascii: "+") || self == UInt8(ascii: "-") || self == UInt8(ascii: ".")
    }

    /// RFC 3986's unreserved characters: what a plain host is made of.
    var isPlainHostCharacter: Bool {
        isASCIILetter || isASCIIDigit || self == UInt8(ascii: "-") || self == UInt8(ascii: ".")
            || self == UInt8(ascii: "_") || self == UInt8(ascii: "~")
    }

    /// An unreserved character, a sub-delimiter, `:`, `@` or `/`: RFC 3986's `pchar` and the
    /// path's separator, without percent-encoding.
    var isPlainPathCharacter: Bool {
        if isPlainHostCharacter { return true }
        switch self {
        case UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("),
             UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"),
             UInt8(ascii: "="), UInt8(ascii: ":"), UInt8(ascii: "@"), UInt8(ascii: "/"):
            return true
        default:
            return false
        }
    }
}
