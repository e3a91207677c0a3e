extension RemoteURL {
    /// `text` with any userinfo (`user:password@` or `user@`) replaced by `***@`, so it can be
    /// printed: `https://u:p@h/x` becomes `https://***@h/x`. Only the authority is touched (the
    /// part between `scheme://` and the next `/`, `?` or `#`); paths and queries are left as they
    /// are. Text without `scheme://` is returned unchanged. Works on unexpanded manifest text too:
    /// `https://${TOKEN}@h/x` becomes `https://***@h/x`.
    public static func redactingUserinfo(in text: String) -> String {
        // The scheme is what comes before the first "://", and it may hold none of "/?#@" (a
        // "://" after a path or query character is not the one that starts the authority). So
        // the first of those four characters in the text must be the first "/" of that "://".
        guard let slash = text.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" || $0 == "@" }),
              text[slash] == "/", slash > text.startIndex
        else { return text }
        let colon = text.index(before: slash)
        let secondSlash = text.index(after: slash)
        guard text[colon] == ":", colon > text.startIndex,
              secondSlash < text.endIndex, text[secondSlash] == "/"
        else { return text }

        let authorityStart = text.index(after: secondSlash)
        let authorityEnd = text[authorityStart...].firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? text.endIndex
        guard let at = text[authorityStart..<authorityEnd].lastIndex(of: "@") else { return text }
        return text[..<authorityStart] + "***" + text[at...]
    }
}
