import FoundationEssentials

/// Readers for single values. Each returns nil after recording a diagnostic when the value is
/// unusable.
extension ManifestDecoder {
    /// A non-empty scalar, read as text whatever it looks like (`dest: 2024` is the name "2024").
    mutating func text(_ node: YAMLNode, key: String, expected: String) -> String? {
        guard let text = node.text else {
            report("expected \(expected), found \(node.summary)", at: node, key: key)
            return nil
        }
        guard !text.isEmpty else {
            report("expected \(expected), found an empty string", at: node, key: key)
            return nil
        }
        return text
    }

    /// A plain YAML integer in `range`. Quoted numbers are refused: the manifest spells types
    /// out, so `"5"` is a string.
    mutating func integer(_ node: YAMLNode, key: String, in range: ClosedRange<Int>, expected: String) -> Int? {
        guard let text = node.plainText, text.isWrittenLikeAnInteger else {
            report(typeMismatch(expected: expected, found: node), at: node, key: key)
            return nil
        }
        guard let number = Int(text) else {
            report("expected \(expected), found `\(text)`", at: node, key: key)
            return nil
        }
        guard range.contains(number) else {
            report("expected \(expected), found \(number)", at: node, key: key)
            return nil
        }
        return number
    }

    /// A non-negative plain integer number of bytes, or with `allowUnits` a size such as `5MiB`.
    mutating func byteCount(_ node: YAMLNode, key: String, allowUnits: Bool) -> Int64? {
        if allowUnits {
            guard let text = node.text else {
                report("expected a size like 1048576, 10KiB, 5MiB, 2GiB or 1GB, found \(node.summary)", at: node, key: key)
                return nil
            }
            do {
                return try ByteCountSyntax.parse(text)
            } catch {
                report(error, at: node, key: key)
                return nil
            }
        }
        let expected = "a size in bytes (an integer of 0 or more)"
        guard let text = node.plainText, text.isWrittenLikeAnInteger else {
            report(typeMismatch(expected: expected, found: node), at: node, key: key)
            return nil
        }
        guard let bytes = Int64(text) else {
            report("expected \(expected), found `\(text)`", at: node, key: key)
            return nil
        }
        guard bytes >= 0 else {
            report("expected \(expected), found \(bytes)", at: node, key: key)
            return nil
        }
        return bytes
    }

    /// A `segment_min`: a size of at least 1 MiB (units allowed), or `off` (`Int64.max`).
    mutating func segmentMin(_ node: YAMLNode, key: String) -> Int64? {
        if node.plainText == "off" { return .max }
        guard let bytes = byteCount(node, key: key, allowUnits: true) else { return nil }
        guard bytes >= SegmentMinimum.floor else {
            report("expected a size of at least 1MiB or `off`, found \(bytes) bytes: smaller files gain nothing from more connections", at: node, key: key)
            return nil
        }
        return bytes
    }

    /// A `rate_limit`: a rate, `off`, or a timetable (see `RateLimitSyntax`).
    mutating func rateLimit(_ node: YAMLNode, key: String) -> RateLimit? {
        guard let text = node.text, !text.isEmpty else {
            report("expected a rate like 5MiB, `off` or a timetable like \"08:00,512KiB 19:00,off\", found \(node.summary)", at: node, key: key)
            return nil
        }
        do {
            return try RateLimitSyntax.parse(text)
        } catch {
            report(error, at: node, key: key)
            return nil
        }
    }

    /// `true` or `false`, unquoted. YAML 1.1's `yes`/`no`/`on`/`off` are refused so that no
    /// value means something other than it reads.
    mutating func boolean(_ node: YAMLNode, key: String) -> Bool? {
        switch node.plainText {
        case "true": return true
        case "false": return false
        default:
            var message = "expected true or false, found \(node.summary)"
            if let text = node.text?.lowercased() {
                if ["yes", "on", "y", "true"].contains(text) { message += "; write `true`" }
                if ["no", "off", "n", "false"].contains(text) { message += "; write `false`" }
            }
            report(message, at: node, key: key)
            return nil
        }
    }

    /// `no`, `try` or `required`; a near miss gets a "did you mean", and a boolean the value it
    /// most likely meant.
    mutating func ftpTLS(_ node: YAMLNode, key: String) -> FTPTLS? {
        if let text = node.text, let value = FTPTLS(rawValue: text) { return value }
        var message = "expected one of \(FTPTLS.choices), found \(node.summary)"
        if let text = node.text?.lowercased() {
            if text == "true" {
                message += "; write `required` (or `try` to allow plain FTP when the server has no TLS)"
            } else if text == "false" {
                message += "; write `no`"
            } else if let suggestion = KeySuggestion.closest(to: text, among: FTPTLS.allCases.map(\.rawValue)) {
                message += "; did you mean `\(suggestion)`?"
            }
        }
        report(message, at: node, key: key)
        return nil
    }

    mutating func duration(_ node: YAMLNode, key: String) -> Duration? {
        guard let text = node.text else {
            report("expected a duration like 500ms, 30s, 5m, 1h or 1m30s, found \(node.summary)", at: node, key: key)
            return nil
        }
        do {
            return try DurationSyntax.parse(text)
        } catch {
            report(error, at: node, key: key)
            return nil
        }
    }

    mutating func digest(_ node: YAMLNode, _ algorithm: DigestAlgorithm, key: String) -> String? {
        guard let text = node.text else {
            report("expected \(algorithm.hexLength) hexadecimal digits, found \(node.summary)", at: node, key: key)
            return nil
        }
        do {
            return try DigestSyntax.parse(text, algorithm)
        } catch {
            report(error, at: node, key: key)
            return nil
        }
    }

    /// A CA bundle's path (see `localPath`) made absolute against the manifest's directory, checked
    /// to be a readable PEM file.
    mutating func certificateBundle(_ node: YAMLNode, key: String) -> String? {
        guard let text = localPath(node, key: key, expected: "the path of a PEM file of CA certificates") else { return nil }
        let path = LexicalPath.absolute(text, relativeTo: rootResolution.manifestDirectory)
        do {
            try certificateChecks.checkBundle(path)
        } catch {
            report(error, at: node, key: key)
            return nil
        }
        return path
    }

    /// The value of a key that names a file or directory on this machine (`root`, `ca_file`),
    /// as a shell would read it: `${VAR}`s expanded (see `expand`), then a leading `~` or `~/`
    /// taken as the home directory (`HomeDirectorySyntax`). Nil after a diagnostic when the text
    /// is empty or holds a NUL, or when a variable it references is set to the empty string:
    /// the text around an empty variable names another place (`${R}` the manifest's own
    /// directory, `${R}/data` the top-level `/data`), and nothing would tell.
    mutating func localPath(_ node: YAMLNode, key: String, expected: String) -> String? {
        guard let text = text(node, key: key, expected: expected) else { return nil }
        guard !text.unicodeScalars.contains("\0") else {
            report("the path contains a NUL character, which no path can hold", at: node, key: key)
            return nil
        }
        guard let expansion = expand(text, at: node, key: key) else { return nil }
        for name in expansion.empty {
            report("environment variable `\(name)` is set but empty (referenced as ${\(name)}), so the path would name another place; set it, or write the path without it",
                   at: node, key: key)
        }
        guard expansion.empty.isEmpty else { return nil }
        do {
            return try HomeDirectorySyntax.expand(expansion.text, home: environment["HOME"])
        } catch {
            report(error, at: node, key: key)
            return nil
        }
    }

    /// A mapping of header names to values, with `${VAR}`s in the values expanded.
    mutating func headers(_ node: YAMLNode, key: String) -> [HTTPHeader]? {
        guard let mapping = checkedMapping(node, path: key, section: nil, expected: "a mapping of header names to values") else {
            return nil
        }
        let countBefore = diagnostics.count
        var headers: [HTTPHeader] = []
        var lineOfName: [String: Int] = [:]
        for pair in mapping.pairs {
            let (name, nameNode, valueNode) = (pair.key, pair.keyNode, pair.value)
            let path = mapping.path(of: name)
            do {
                try HeaderRules.checkName(name)
            } catch {
                report(error, at: nameNode, key: path)
                continue
            }
            if let line = lineOfName[name.lowercased()] {
                report("header `\(name)` is already set at line \(line); header names do not depend on case", at: nameNode, key: path)
                continue
            }
            lineOfName[name.lowercased()] = nameNode.line
            guard case .scalar(let raw, _) = valueNode.content, !valueNode.isNull else {
                report("expected a header value (a string; write \"\" for an empty one), found \(valueNode.summary)", at: valueNode, key: path)
                continue
            }
            guard let value = expand(raw, at: valueNode, key: path) else { continue }
            do {
                try HeaderRules.checkValue(raw)
                try HeaderRules.checkValue(value.text, expandedFromVariables: value.referenced)
            } catch {
                report(error, at: valueNode, key: path)
                continue
            }
            headers.append(HTTPHeader(name: name, value: value.text, written: raw))
        }
        return diagnostics.count == countBefore ? headers : nil
    }

    /// `raw` with its `${VAR}`s expanded, or nil after reporting each variable that is not set
    /// and each `$VAR` written without braces (which would reach the server as it stands).
    mutating func expand(_ raw: String, at node: YAMLNode, key: String) -> VariableExpansion? {
        let expansion = VariableExpansion(expanding: raw, environment: environment)
        for name in expansion.unset {
            report("environment variable `\(name)` is not set (referenced as ${\(name)}); set it, or write $$ for a literal $", at: node, key: key)
        }
        for name in expansion.unbraced {
            report("`$\(name)` is not expanded: write `${\(name)}` for the environment variable, or `$$\(name)` for a literal `$\(name)`", at: node, key: key)
        }
        return expansion.unset.isEmpty && expansion.unbraced.isEmpty ? expansion : nil
    }

    /// A URL as `remoteURL` checked it.
    struct CheckedURL {
        var remote: RemoteURL
        var components: URLParts
        /// `remote.display`, made once.
        var display: String
    }

    /// A URL with its `${VAR}`s expanded and its scheme and host checked, and its parts.
    mutating func remoteURL(_ node: YAMLNode, key: String, role: URLRules.Role) -> CheckedURL? {
        guard case .scalar(let raw, _) = node.content, !node.isNull else {
            report("expected a URL, found \(node.summary)", at: node, key: key)
            return nil
        }
        let display = RemoteURL.redactingUserinfo(in: raw)
        guard let expansion = expand(raw, at: node, key: key) else { return nil }
        do {
            let components = try URLRules.check(
                expansion.text, display: display, variables: expansion.referenced, role: role)
            let remote = RemoteURL(string: expansion.text, written: raw, login: netrcLogin(for: components, role: role))
            return CheckedURL(remote: remote, components: components, display: display)
        } catch {
            report(error, at: node, key: key)
            return nil
        }
    }

    /// The netrc login for a download (or checksum file) URL's host, as curl picks it: none
    /// when the URL carries a password of its own, and only the matching password when it names a user.
    private func netrcLogin(for url: URLParts, role: URLRules.Role) -> NetrcLogin? {
        if case .probe = role { return nil }
        guard let netrc, url.scheme?.lowercased() != "file",
              let host = url.host, !host.isEmpty, url.password == nil else { return nil }
        return netrc.login(forHost: host, user: url.user)
    }

    /// "expected …, found …", with a hint when the value is a quoted number.
    func typeMismatch(expected: String, found node: YAMLNode) -> String {
        var message = "expected \(expected), found \(node.summary)"
        if node.isQuotedScalar, let text = node.text, !text.isEmpty,
           text.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == "-") }) {
            message += "; write the number without quotes"
        }
        return message
    }
}

private extension String {
    /// Only ASCII digits, `-` and `+`, the characters of a plain integer. Checked on the bytes:
    /// a character outside ASCII fails either way, and so does CR LF.
    var isWrittenLikeAnInteger: Bool {
        utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "+") }
    }
}
