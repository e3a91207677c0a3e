import FoundationEssentials

/// Which URLs a manifest may name, and what they are for.
enum URLRules {
    enum Role {
        /// A file's `url` or one of its `mirrors`; `file` URLs only when the manifest allows them.
        case download(allowFile: Bool)
        /// `connectivity.probe`: needs a network host.
        case probe
        /// `checksums`: a checksum file on a network host.
        case checksums
    }

    static let networkSchemes = ["http", "https", "ftp", "ftps"]

    /// Checks `expanded` (a URL with its `${VAR}`s substituted) and returns its parts. Validity is
    /// `URLComponents`' (see `URLParts`).
    ///
    /// - Parameters:
    ///   - display: The redacted manifest text, the only form of the URL a message may quote.
    ///   - variables: The `${VAR}`s that were substituted; when there are any, a message must not
    ///     quote anything that came from them.
    static func check(
        _ expanded: String, display: String, variables: [String], role: Role
    ) throws(ValueProblem) -> URLParts {
        guard !expanded.isEmpty else {
            throw ValueProblem(variables.isEmpty
                ? "expected a URL, found an empty value"
                : "URL is empty after expanding \(variableList(variables))")
        }
        guard let components = URLParts(parsing: expanded) else {
            throw ValueProblem(invalidURLMessage(expanded, display: display, variables: variables))
        }
        guard let scheme = components.scheme?.lowercased(), !scheme.isEmpty else {
            // `//host/path` (a scheme-relative reference) already has the slashes.
            let rest = display.drop(while: { $0 == "/" })
            throw ValueProblem("`\(display)` has no scheme; write it in full, like `https://\(rest)`")
        }
        switch role {
        case .download(let allowFile):
            if scheme == "file" {
                guard allowFile else {
                    throw ValueProblem("file URLs are refused unless the manifest sets `allow_file: true` at the top level")
                }
                if let host = components.host, !host.isEmpty, host.lowercased() != "localhost" {
                    throw ValueProblem("file URL names the host `\(host)`; only local files (file:///path) can be read")
                }
                return components
            }
            guard networkSchemes.contains(scheme) else {
                throw ValueProblem("unsupported scheme `\(scheme)`; mirror downloads http, https, ftp and ftps URLs (and file URLs with `allow_file: true`)")
            }
        case .probe:
            guard networkSchemes.contains(scheme) else {
                throw ValueProblem("unsupported scheme `\(scheme)` for a connectivity probe; use an http, https, ftp or ftps URL of a host that is reachable when the network is up")
            }
        case .checksums:
            guard networkSchemes.contains(scheme) else {
                throw ValueProblem("unsupported scheme `\(scheme)` for a checksum file; use an http, https, ftp or ftps URL")
            }
        }
        guard let host = components.host, !host.isEmpty else {
            throw ValueProblem("`\(scheme)` URL has no host")
        }
        if let port = components.port, !(1...65535).contains(port) {
            throw ValueProblem("port \(port) is out of range; ports go from 1 to 65535")
        }
        return components
    }

    /// The last segment of a URL's path, percent-decoded: the default `dest` of an entry.
    static func fileName(fromPercentEncodedPath path: String) throws(ValueProblem) -> String {
        let segment = path.afterLastSlash
        guard !segment.isEmpty else {
            throw ValueProblem(path.isEmpty || path == "/"
                ? "cannot derive a file name from url (it has no path); set dest"
                : "cannot derive a file name from url (its path ends with `/`); set dest")
        }
        guard let decoded = percentDecoded(segment) else {
            throw ValueProblem("cannot derive a file name from url (its last path segment has invalid percent-encoding); set dest")
        }
        guard !decoded.containsByte(.slash) else {
            throw ValueProblem("cannot derive a file name from url (its last path segment decodes to a name containing `/`); set dest")
        }
        return decoded
    }

    /// `%XX` sequences decoded as UTF-8; nil for a malformed escape or invalid UTF-8.
    static func percentDecoded(_ text: Substring) -> String? {
        guard text.containsByte(UInt8(ascii: "%")) else { return String(text) }
        var bytes: [UInt8] = []
        var input = Array(text.utf8)[...]
        while let byte = input.popFirst() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard input.count >= 2, let high = hexValue(input.removeFirst()), let low = hexValue(input.removeFirst()) else {
                return nil
            }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    private static func invalidURLMessage(_ expanded: String, display: String, variables: [String]) -> String {
        guard variables.isEmpty else {
            return "not a valid URL after expanding \(variableList(variables)); characters such as spaces must be percent-encoded"
        }
        let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:/?#[]@!$&'()*+,;=%")
        if let bad = expanded.first(where: { !allowed.contains($0) }) {
            let shown = switch bad {
            case " ": "a space"
            case "\t": "a tab"
            case "\n", "\r": "a line break"
            default: "`\(bad)`"
            }
            return "`\(display)` is not a valid URL: \(shown) must be percent-encoded"
        }
        return "`\(display)` is not a valid URL"
    }

    private static func variableList(_ variables: [String]) -> String {
        variables.map { "${\($0)}" }.joined(separator: ", ")
    }
}
