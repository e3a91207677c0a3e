import FoundationEssentials

/// Pins entries from their checksum files (`checksums:`), each file fetched once per run
/// however many entries name it. An entry that pins its own `sha256`/`sha512` keeps that pin
/// and does not need its checksum file; a file no entry needs is not fetched.
///
/// Used on the engine's thread only.
final class ChecksumPins: @unchecked Sendable {
    /// By index in the manifest, each entry that needed its checksum file: pinned from it, or
    /// why it cannot be. The others run as they are (and are not copied: a manifest of a
    /// million entries would take a copy of every one).
    typealias Resolution = [Int: Result<Entry, TransferFailure>]

    private let fetcher: Fetcher
    private let retryPolicy: RetryPolicy
    /// Checksum files fetched at once: the run's `concurrency`.
    private let width: Int
    private var fetches: [ChecksumFileFetch] = []
    private var cancelled = false

    /// The manifest's `rewrite:` rules: a checksum file is fetched from its rewrites first (or
    /// only), as the files it pins are.
    private let rewrites: RewriteRules

    init(fetcher: Fetcher, retryPolicy: RetryPolicy, width: Int, rewrites: RewriteRules = RewriteRules()) {
        self.fetcher = fetcher
        self.retryPolicy = retryPolicy
        self.width = max(1, width)
        self.rewrites = rewrites
    }

    /// Whether an entry takes its pin from its checksum file.
    static func needsChecksumFile(_ entry: Entry) -> Bool {
        entry.digest == nil && entry.settings.checksums != nil
    }

    /// Fetches every checksum file the entries need, `width` at a time, and pins each entry
    /// from its own; `completion` runs on the engine's thread, with a result for each entry that needed a checksum file. Runs
    /// `completion` at once when no entry needs a checksum file.
    func resolve(_ entries: [Entry], completion: @escaping (Resolution) -> Void) {
        // In manifest order, each URL once, with the settings of the first entry naming it.
        var sources: [(url: RemoteURL, settings: TransferSettings)] = []
        var named = Set<String>()
        for entry in entries where Self.needsChecksumFile(entry) {
            let url = entry.settings.checksums!
            if named.insert(url.string).inserted { sources.append((url, entry.settings)) }
        }
        guard !sources.isEmpty else { return completion([:]) }
        var lists: [String: Result<ChecksumList, TransferFailure>] = [:]
        var next = 0
        func startNext() {
            let source = sources[next]
            next += 1
            func store(_ result: Result<ChecksumList, TransferFailure>) {
                lists[source.url.string] = result
                if next < sources.count { return startNext() }
                guard lists.count == sources.count else { return }
                var resolution: Resolution = [:]
                for (index, entry) in entries.enumerated() where Self.needsChecksumFile(entry) {
                    resolution[index] = Self.pinned(entry, lists: lists)
                }
                completion(resolution)
            }
            let candidates = rewrites.candidates(for: [source.url]) ?? [RewriteRules.Candidate(url: source.url)]
            guard !candidates.isEmpty else {
                // Every URL of it is one an `only` rule forbids (a manifest the decoder refuses).
                return store(.failure(.checksumFileUnusable(url: source.url.display, reason: "an `only: true` rewrite rule forbids every URL of it")))
            }
            fetchList(candidates[...], settings: source.settings, completion: store)
        }
        while next < min(width, sources.count) { startNext() }
    }

    /// Fetches one checksum file from the first of `candidates` that serves it (a failure
    /// but an interruption moves to the next), and hands on the last one's result.
    private func fetchList(
        _ candidates: ArraySlice<RewriteRules.Candidate>, settings: TransferSettings,
        completion: @escaping (Result<ChecksumList, TransferFailure>) -> Void
    ) {
        let candidate = candidates.first!
        var sent = settings
        if let rewritten = candidate.rewritten {
            // Checksum files go without a host's settings (see mirror-manifest(5)).
            sent.headers = rewritten.headers(entry: settings.headers, host: [])
        }
        let fetch = ChecksumFileFetch(url: candidate.url, settings: sent, fetcher: fetcher, retryPolicy: retryPolicy)
        fetches.append(fetch)
        fetch.start { [self] result in
            if case .failure(let failure) = result, failure != .cancelled, !cancelled, candidates.count > 1 {
                return fetchList(candidates.dropFirst(), settings: settings, completion: completion)
            }
            completion(result)
        }
        if cancelled { fetch.cancel() }
    }

    /// Stops the fetches in progress: the entries that need them fail as interrupted.
    func cancel() {
        cancelled = true
        for fetch in fetches { fetch.cancel() }
    }

    /// `entry` with the digest its checksum file lists for it, or why there is none.
    static func pinned(_ entry: Entry, lists: [String: Result<ChecksumList, TransferFailure>]) -> Result<Entry, TransferFailure> {
        guard needsChecksumFile(entry), let url = entry.settings.checksums, let list = lists[url.string] else { return .success(entry) }
        switch list {
        case .failure(let failure):
            return .failure(failure)
        case .success(let list):
            guard let name = lookupName(of: entry) else {
                return .failure(.checksumFileUnusable(url: url.display, reason: "cannot be searched: the entry's url has no file name; set checksum_name"))
            }
            guard let digest = list.digest(for: name) else { return .failure(.checksumNotListed(url: url.display, name: name)) }
            var pinned = entry
            pinned.digest = digest
            return .success(pinned)
        }
    }

    /// The name an entry goes by in its checksum file: `checksum_name`, else the last segment
    /// of its url's path, percent-decoded.
    static func lookupName(of entry: Entry) -> String? {
        if let name = entry.checksumName { return name }
        guard let components = URLComponents(string: entry.manifestURL.string) else { return nil }
        return try? URLRules.fileName(fromPercentEncodedPath: components.percentEncodedPath)
    }
}
