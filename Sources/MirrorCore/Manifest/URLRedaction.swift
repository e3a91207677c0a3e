extension RemoteURL {
    /// `text` with any userinfo (`user:password@` or `user@`) replaced by `***@`, so it can be
    /// printed: `https://u:p@h/x` becomes `https://***@h/x`. Only the authority is touched (the
    /// part between `scheme://` and the next `/`, `?` or `#`); paths and queries are left as they
    /// are. Text without `scheme://` is returned unchanged. Works on unexpanded manifest text too:
    /// `https://${TOKEN}@h/x` becomes `https://***@h/x`.
    public static func redactingUserinfo(in text: String) -> String {
        let userinfo = userinfoRange(in: text)
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
        guard let userinfo = userinfoRange(in: text) else { return (text, false) }
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
    /// Searched on the bytes in place: through `String.UTF8View`'s indices it cost about 100
    /// instructions a byte, paid for every URL of a manifest as it loads.
    private static func userinfoRange(in text: String) -> Range<String.Index>? {
        var bytes = text
        guard let offsets = bytes.withUTF8(userinfoOffsets) else { return nil }
        let utf8 = text.utf8
        return utf8.index(utf8.startIndex, offsetBy: offsets.lowerBound)..<utf8.index(utf8.startIndex, offsetBy: offsets.upperBound)
    }

    /// `userinfoRange(in:)` as offsets into the URL's UTF-8 bytes.
    private static func userinfoOffsets(in text: UnsafeBufferPointer<UInt8>) -> Range<Int>? {
        // The scheme is what comes before the first "://", and it may hold none of "/?#@" (a
        // "://" after a path or query character is not the one that starts the authority). So
        // the first of those four characters in the text must be the first "/" of that "://".
        guard let slash = text.firstIndex(where: { $0.endsAuthority || $0 == .atSign }),
              text[slash] == .slash, slash > 0
        else { return nil }
        let colon = slash - 1
        let secondSlash = slash + 1
        guard text[colon] == .colon, colon > 0,
              secondSlash < text.count, text[secondSlash] == .slash
        else { return nil }

        let authorityStart = secondSlash + 1
        let authorityEnd = text[authorityStart...].firstIndex(where: \.endsAuthority) ?? text.count
        guard let at = text[authorityStart..<authorityEnd].lastIndex(of: .atSign) else { return nil }
        return authorityStart..<at
    }
}
