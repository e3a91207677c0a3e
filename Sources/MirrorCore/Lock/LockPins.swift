extension ManifestPinWriter {
    /// The pins `mirror lock` writes: each entry's size and sha256 after a sync, hashing a
    /// file whose hash the sync did not report. Nil when an entry failed.
    public static func pins(for manifest: Manifest, after reports: [EntryReport]) -> [String: Pin]? {
        let rootDirectory = RootDirectory(path: manifest.root)
        var pins: [String: Pin] = [:]
        for (entry, report) in zip(manifest.entries, reports) {
            guard !report.failed, let size = report.size else { return nil }
            let paths = manifest.paths(for: entry)
            let sha256 = report.sha256 ?? (try? rootDirectory.sha256OfDestination(paths))
            guard let sha256 else { return nil }
            pins[entry.dest] = Pin(sha256: sha256, size: size)
        }
        return pins
    }
}
