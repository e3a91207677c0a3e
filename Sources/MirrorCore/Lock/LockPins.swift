extension ManifestPinWriter {
    /// The pins `mirror lock` writes: each entry's size and digest after a sync (in the
    /// algorithm the sync verified it with: its checksum file's, else SHA-256), hashing a file
    /// whose digest the sync did not report. Nil when an entry failed.
    public static func pins(for manifest: Manifest, after reports: [EntryReport]) -> [String: Pin]? {
        let rootDirectory = RootDirectory(path: manifest.root)
        var pins: [String: Pin] = [:]
        for (entry, report) in zip(manifest.entries, reports) {
            guard !report.failed, let size = report.size else { return nil }
            let paths = manifest.paths(for: entry)
            let digest = report.sha256 ?? (try? rootDirectory.digestOfDestination(paths, entry.digestAlgorithm))
            guard let digest else { return nil }
            pins[entry.dest] = Pin(digest: digest, size: size)
        }
        return pins
    }
}
