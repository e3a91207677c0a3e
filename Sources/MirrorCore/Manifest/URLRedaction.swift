import FoundationEssentials

extension RemoteURL {
    /// `text` with any userinfo (`user:password@` or `user@`) replaced by `***@`, so it can be
    /// printed: `https://u:p@h/x` becomes `https://***@h/x`. Only the authority is touched (the
    /// part between `scheme://` and the next `/`, `?` or `#`); paths and queries are left as they
    /// are. Text without `scheme://` is returned unchanged. Works on unexpanded manifest text too:
    /// `https://${TOKEN}@h/x` becomes `https://***@h/x`.
    public static func redactingUserinfo(in text: String) -> String {
        guard let separator = text.firstRange(of: "://") else { return text }
        let scheme = text[..<separator.lowerBound]
        // A "://" after a path or query character is not the one that starts the authority.
        guard !scheme.isEmpty, !scheme.contains(where: { "/?#@".contains($0) }) else { return text }
        let authorityStart = separator.upperBound
        let authorityEnd = text[authorityStart...].firstIndex(where: { "/?#".contains($0) }) ?? text.endIndex
        guard let at = text[authorityStart..<authorityEnd].lastIndex(of: "@") else { return text }
        return text[..<authorityStart] + "***" + text[at...]
    }
}
