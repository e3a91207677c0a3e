/// What decoding an entry depends on besides the entry itself.
struct EntryContext: Equatable {
    /// The settings an entry's own keys override: the environment's, then `defaults`.
    var defaults: TransferSettings
    /// The top level's `allow_file`.
    var allowFile: Bool
    /// The site's `MIRROR_REWRITE` rules, then the manifest's `rewrite:`.
    var rewrites = RewriteRules()
}
