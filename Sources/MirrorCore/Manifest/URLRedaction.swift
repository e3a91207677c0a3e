extension RemoteURL {
    /// `text` with any userinfo (`user:password@` or `user@`) replaced by `***@`, so it can be
    /// printed: `https://u:p@h/x` becomes `https://***@h/x`. Only the authority is touched (the
    /// part between `scheme://` and the next `/`, `?` or `#`); paths and queries are left as they
    /// are. Text without `scheme://` is returned unchanged. Works on unexpanded manifest text too:
    /// `https://${TOKEN}@h/x` becomes `https://***@h/x`.
    public static func redactingUserinfo(in text: String) -> String {
        let userinfo = userinfoRange(in: text.utf8)
        guard let userinfo else { return text }
        return text[..<userinfo.lowerBound] + "***" + text[userinfo.upperBound...]
    }

    /// `text`, a URL as the manifest wrote it, without a secret written literally in its
    /// userinfo, for a file that must hold no secret (a report): a literal password goes
    /// (`https://user:pw@h/` becomes `https://user@h/`), and so does a literal user name given
    /// without a password, which may itself be a token (`https://ghp_…@h/` becomes
    /// `https://h/`). Parts written wholly as `${VAR}` references stay as written, and so does
    /// a user name beside a password that is one. `withheld` is true when anything was left out.
    static func withholdingLiteralPassword(in text: String) -> (text: String, withheld: Bool) {
        guard let userinfo = userinfoRange(in: text.utf8) else { return (text, false) }
        func onlyReferences(_ part: Substring) -> Bool {
            let expansion = VariableExpansion(expanding: String(part), environment: [:])
            return expansion.text.isEmpty && !expansion.referenced.isEmpty
        }
        let colon = text[userinfo].firstIndex(of: ":")
        let user = text[userinfo.lowerBound..<(colon ?? userinfo.upperBound)]
        let password = colon.map { text[text.index(after: $0)..<userinfo.upperBound] } ?? ""
        if !password.isEmpty {
            if onlyReferences(password) { return (text, false) }
            return (String(text[..<colon!] + text[userinfo.upperBound...]), true)
        }
        if user.isEmpty || onlyReferences(user) { return (text, false) }
        // The whole userinfo and its "@" (the range ends at the "@").
        return (String(text[..<userinfo.lowerBound] + text[userinfo.upperBound...].dropFirst()), true)
    }

    /// The userinfo of the URL `text`: from the start of the authority up to its last `@`.
    private static func userinfoRange(in text: String.UTF8View) -> Range<String.Index>? {
        // The scheme is what comes before the first "://", and it may hold none of "/?#@" (a
        // "://" after a path or query character is not the one that starts the authority). So
        // the first of those four characters in the text must be the first "/" of that "://".
        guard let slash = text.firstIndex(where: { $0.endsAuthority || $0 == .atSign }),
              text[slash] == .slash, slash > text.startIndex
        else { return nil }
        let colon = text.index(before: slash)
        let secondSlash = text.index(after: slash)
        guard text[colon] == .colon, colon > text.startIndex,
              secondSlash < text.endIndex, text[secondSlash] == .slash
        else { return nil }

        let authorityStart = text.index(after: secondSlash)
        let authorityEnd = text[authorityStart...].firstIndex(where: \.endsAuthority) ?? text.endIndex
        guard let at = text[authorityStart..<authorityEnd].lastIndex(of: .atSign) else { return nil }
        return authorityStart..<at
    }
}
