/// What request headers a manifest may set.
enum HeaderRules {
    /// `headers` over `base`, as the manifest layers them: a header named in both replaces the
    /// one in `base` in its place (taking this spelling of the name, names compared without
    /// regard to case); new names follow in order.
    static func merge(_ headers: some Sequence<HTTPHeader>, over base: inout [HTTPHeader]) {
        for header in headers {
            let name = header.name.lowercased()
            if let index = base.firstIndex(where: { $0.name.lowercased() == name }) {
                base[index] = header
            } else {
                base.append(header)
            }
        }
    }

    /// Headers `mirror` sets itself, by lowercased name, with the reason a manifest may not.
    static let reserved: [String: String] = [
        "range": "mirror sets Range itself to resume partial downloads",
        "if-range": "mirror sets If-Range itself so that a resumed download never mixes two versions of a file",
        "if-none-match": "mirror sets If-None-Match itself to ask for a file only if it is no longer the version on disk",
        "if-modified-since": "mirror sets If-Modified-Since itself to ask for a file only if it is no longer the version on disk",
        "accept-encoding": "mirror sends none and saves the bytes as the server sends them: asking for a compressed reply would store compressed bytes whose size and checksum change with the server's compression",
        "host": "mirror derives Host from each URL, including mirrors and redirects",
        "content-length": "mirror sends no request body",
    ]

    /// Characters RFC 7230 allows in a token, besides letters and digits.
    private static let tokenPunctuation = Set("!#$%&'*+-.^_`|~")

    /// Checks that `name` is an RFC 7230 token and not one of the `reserved` headers.
    static func checkName(_ name: String) throws(ValueProblem) {
        guard !name.isEmpty else {
            throw ValueProblem("header name is empty")
        }
        if let bad = name.firstIndex(where: { !($0.isASCII && ($0.isLetter || $0.isNumber)) && !tokenPunctuation.contains($0) }) {
            let position = name.distance(from: name.startIndex, to: bad) + 1
            throw ValueProblem("header name `\(name)` is not a valid HTTP token: \(describe(name[bad])) at position \(position) is not allowed")
        }
        if let reason = reserved[name.lowercased()] {
            throw ValueProblem("header `\(name)` cannot be set in a manifest: \(reason)")
        }
    }

    /// Checks that a header value is a single line: CR or LF would start a new header (header
    /// injection), and NUL ends the C string libcurl is given.
    static func checkValue(_ value: String, expandedFromVariables variables: [String] = []) throws(ValueProblem) {
        guard value.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) else { return }
        if variables.isEmpty {
            throw ValueProblem("header value contains a line break or NUL; a header value must be a single line")
        }
        let names = variables.map { "${\($0)}" }.joined(separator: ", ")
        throw ValueProblem("header value contains a line break or NUL after expanding \(names); a header value must be a single line")
    }

    private static func describe(_ character: Character) -> String {
        switch character {
        case " ": "a space"
        case "\t": "a tab"
        default: "`\(character)`"
        }
    }
}
