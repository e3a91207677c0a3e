/// The entries of a netrc file, read as curl reads them.
///
/// The file is a sequence of whitespace-separated tokens: `machine NAME` or `default` starts an
/// entry, `login NAME`, `password WORD` and `account WORD` fill it in, `macdef NAME` defines a
/// macro whose body (ignored) runs from the next line to the first empty line. A line whose
/// first token starts with `#` is a comment. A token may be written in double quotes, with
/// `\"`, `\\`, `\n`, `\r` and `\t` escapes, to hold spaces. Keywords ignore case; other words
/// in keyword position are skipped.
struct Netrc: Sendable, Equatable {
    struct Entry: Sendable, Equatable {
        /// The host the entry is for; nil for `default`, which matches every host.
        var machine: String?
        var login: String?
        var password: String?
    }

    var entries: [Entry]

    /// A netrc that cannot be read as one; `line` counts from 1. The message never holds a token
    /// of the file, which may be a password.
    struct SyntaxError: Error, Equatable {
        var line: Int
        var message: String
    }

    /// The login for `host`, as curl's `--netrc-optional` picks it: from the first entry whose
    /// machine is `host` (ignoring case), else from the `default` entry. When the URL names a
    /// `user`, only entries with that login count and the password is all they give.
    func login(forHost host: String, user: String? = nil) -> NetrcLogin? {
        let lowercasedHost = host.lowercased()
        let candidates = entries.filter { $0.machine?.lowercased() == lowercasedHost } + entries.filter { $0.machine == nil }
        if let user, !user.isEmpty {
            guard let entry = candidates.first(where: { $0.login == user }), let password = entry.password else { return nil }
            return NetrcLogin(user: user, password: password)
        }
        guard let entry = candidates.first, let login = entry.login else { return nil }
        return NetrcLogin(user: login, password: entry.password ?? "")
    }

    static func parse(_ bytes: [UInt8]) throws(SyntaxError) -> Netrc {
        enum Expecting { case keyword, machine, login, password, account, macroName }
        var entries: [Entry] = []
        var expecting = Expecting.keyword
        var expectingSince = (keyword: "", line: 0)
        var inMacro = false
        var lineNumber = 0
        for line in bytes.split(separator: Byte.lineFeed, omittingEmptySubsequences: false) {
            lineNumber += 1
            let line = line.last == Byte.carriageReturn ? line.dropLast() : line
            if inMacro {
                if line.isEmpty { inMacro = false }
                continue
            }
            let tokens = try tokenize(line, lineNumber: lineNumber)
            if let first = tokens.first, !first.quoted, first.text.first == "#" { continue }
            for token in tokens {
                switch expecting {
                case .keyword:
                    switch token.quoted ? "" : token.text.lowercased() {
                    case "machine": expecting = .machine
                    case "default": entries.append(Entry(machine: nil))
                    case "login": expecting = .login
                    case "password": expecting = .password
                    case "account": expecting = .account
                    case "macdef": expecting = .macroName
                    default: break
                    }
                    if expecting != .keyword { expectingSince = (token.text.lowercased(), lineNumber) }
                    continue
                case .machine:
                    entries.append(Entry(machine: token.text))
                case .login:
                    if !entries.isEmpty, entries[entries.count - 1].login == nil { entries[entries.count - 1].login = token.text }
                case .password:
                    if !entries.isEmpty, entries[entries.count - 1].password == nil { entries[entries.count - 1].password = token.text }
                case .account:
                    break
                case .macroName:
                    inMacro = true
                }
                expecting = .keyword
                // The macro's body starts on the next line: the rest of this one is its name's.
                if inMacro { break }
            }
        }
        if expecting != .keyword {
            throw SyntaxError(line: expectingSince.line, message: "`\(expectingSince.keyword)` is not followed by a value")
        }
        return Netrc(entries: entries)
    }

    private struct Token {
        var text: String
        var quoted: Bool
    }

    private static func tokenize(_ line: ArraySlice<UInt8>, lineNumber: Int) throws(SyntaxError) -> [Token] {
        var tokens: [Token] = []
        var index = line.startIndex
        while index != line.endIndex {
            if line[index] == Byte.space || line[index] == Byte.tab {
                index = line.index(after: index)
                continue
            }
            var bytes: [UInt8] = []
            if line[index] == Byte.quotationMark {
                index = line.index(after: index)
                var closed = false
                while index != line.endIndex {
                    let byte = line[index]
                    index = line.index(after: index)
                    if byte == Byte.quotationMark {
                        closed = true
                        break
                    }
                    guard byte == Byte.backslash, index != line.endIndex else {
                        bytes.append(byte)
                        continue
                    }
                    let escaped = line[index]
                    index = line.index(after: index)
                    switch escaped {
                    case UInt8(ascii: "n"): bytes.append(Byte.lineFeed)
                    case UInt8(ascii: "r"): bytes.append(Byte.carriageReturn)
                    case UInt8(ascii: "t"): bytes.append(Byte.tab)
                    default: bytes.append(escaped)
                    }
                }
                guard closed else { throw SyntaxError(line: lineNumber, message: "a quoted token has no closing `\"`") }
                tokens.append(Token(text: String(decoding: bytes, as: UTF8.self), quoted: true))
                continue
            }
            while index != line.endIndex, line[index] != Byte.space, line[index] != Byte.tab {
                bytes.append(line[index])
                index = line.index(after: index)
            }
            tokens.append(Token(text: String(decoding: bytes, as: UTF8.self), quoted: false))
        }
        return tokens
    }
}

/// The bytes a netrc file's syntax turns on.
private enum Byte {
    static let lineFeed = UInt8(ascii: "\n")
    static let carriageReturn = UInt8(ascii: "\r")
    static let space = UInt8(ascii: " ")
    static let tab = UInt8(ascii: "\t")
    static let quotationMark = UInt8(ascii: "\"")
    static let backslash = UInt8(ascii: "\\")
}
