/// The check `mirror lock` makes before it writes: the pinned text, loaded again, must be the
/// manifest that was loaded plus the pins, entry by entry (url, mirrors, dest, every setting,
/// repeats) and in every top-level setting. Only where entries stand may differ, since the
/// inserted lines move them.
enum PinnedManifestCheck {
    /// - Throws: `ManifestError` naming the first entry (where it stood before) that would read
    ///   differently, and what about it.
    static func check(
        _ reloaded: Manifest, against manifest: Manifest, pins: [String: ManifestPinWriter.Pin]
    ) throws(ManifestError) {
        func failure(_ location: SourceLocation?, _ what: String) -> ManifestError {
            ManifestError(ManifestDiagnostic(location: location, key: nil, message: """
                mirror lock cannot pin this manifest safely: with the pins written, \(what) would \
                read differently; it was left unchanged
                """))
        }
        var expected = manifest
        expected.path = reloaded.path
        expected.contentSHA256 = reloaded.contentSHA256
        expected.entries = []
        var topLevel = reloaded
        topLevel.entries = []
        if topLevel != expected {
            throw failure(nil, "\(manifest.path)'s top-level settings")
        }
        if reloaded.entries.count != manifest.entries.count {
            throw failure(nil, "\(manifest.path)'s list of entries (\(manifest.entries.count) before, \(reloaded.entries.count) after)")
        }
        for (before, after) in zip(manifest.entries, reloaded.entries) {
            var wanted = before
            if let pin = pins[before.dest] {
                wanted.digest = pin.digest
                wanted.size = pin.size
            }
            wanted.location = after.location
            if wanted.repeatLocations.count == after.repeatLocations.count {
                wanted.repeatLocations = after.repeatLocations
            }
            guard wanted != after else { continue }
            let differing = [
                ("url", wanted.url == after.url), ("mirrors", wanted.mirrors == after.mirrors),
                ("dest", wanted.dest == after.dest), (wanted.digestAlgorithm.key, wanted.digest == after.digest),
                ("size", wanted.size == after.size), ("settings", wanted.settings == after.settings),
                ("repeats", wanted.repeatLocations == after.repeatLocations),
            ].filter { !$0.1 }.map(\.0)
            let what = differing.isEmpty ? "" : " (its \(differing.joined(separator: ", ")))"
            throw failure(before.location, "the entry for `\(before.dest)`\(what)")
        }
    }
}
