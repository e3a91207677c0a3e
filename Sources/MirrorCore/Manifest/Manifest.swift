/// A parsed, validated manifest (format version 1): what to fetch and where it belongs.
///
/// Every value here has been checked: URLs have an allowed scheme, destinations are relative
/// paths inside `root`, `${VAR}` references are expanded. Build one with `ManifestLoader`.
public struct Manifest: Sendable, Equatable {
    /// The manifest file as it was named on the command line.
    public var path: String
    public var version: Int
    /// Absolute directory that every `dest` is relative to.
    public var root: String
    /// `state_dir` (or `--state-dir`): the absolute directory that holds the run lock and the
    /// state stores instead of `ROOT/.mirror`; nil: `ROOT/.mirror`.
    public var stateDirectory: String?
    /// `cache`: the absolute directory of the blob cache a `sync` places pinned files from and
    /// fills with what it downloads (`BlobCache`); nil: none. `--cache`, `--no-cache` and
    /// `MIRROR_CACHE` decide over it on the command line.
    public var cache: String?
    /// `cache_place`: how files are placed from the cache. `hardlink` links `DEST` to the blob
    /// (both read-only, one file shared by every root that has it) and puts downloads in the
    /// same way; default `copy`: a reflink where the file system can, else a copy.
    public var cachePlacement = BlobCache.Mode.copy
    /// `cache_max_size` and `cache_max_age`: after a `sync`, the cache's least recently used
    /// blobs are evicted down to them (none: the cache is not bounded by this manifest).
    public var cacheLimits = BlobCache.Limits()
    /// Simultaneous transfers (`concurrency`, or `-j` on the command line).
    public var concurrency: Int
    public var connectivity: ConnectivitySettings
    /// `allow_file: true` at the top level permits `file://` URLs.
    public var allowFile: Bool
    /// `prune: true` at the top level: `sync` deletes what mirror wrote and this manifest no
    /// longer lists, as `--prune` does.
    public var prune = false
    /// `rate_limit` at the top level: all transfers of the run together.
    public var rateLimit: RateLimit?
    /// `hosts:`: limits and headers for the requests to particular hosts.
    public var hosts = HostRules()
    /// `rewrite:` after the site's `MIRROR_REWRITE` rules. Applied to each entry as it is
    /// decoded (`Entry.rewrite(by:)`); kept for the checksum files, fetched through them too.
    public var rewrites = RewriteRules()
    /// The shard this manifest was narrowed to (`--shard K/N`: `ManifestLoader.load(…, shard:)`
    /// or `selecting(_:by:)`); nil: every entry. Chooses the run lock and the state store in the
    /// state directory.
    public var shard: ShardSelection?
    /// How `shard` was chosen (`--shard-by`): shards of one run must all use the same.
    public var shardBalance = ShardBalance.hash
    /// With `shard`: how many entries and pinned bytes each shard of the manifest holds, in
    /// shard order, counted before the other shards' entries were dropped.
    public var shardTotals: [ShardTotals] = []
    /// One entry per distinct `dest`; entries repeated with the same url and dest appear once.
    public var entries: [Entry]
    /// SHA-256 of the manifest's bytes as they were loaded (lowercase hex): a report names the
    /// version of the manifest its run read. Nil unless the load was asked for it
    /// (`ManifestLoader.load(…, hashingContent: true)`): only a report names it, and hashing
    /// cost every run's start 3 to 6 million instructions before its first request.
    public var contentSHA256: String?
    /// Where relative paths were resolved from: the manifest's own directory (`root`,
    /// `ca_file`) and the working directory (`--root`, the CA variables). `mirror lock` reloads
    /// its pinned text from the same places.
    var manifestDirectory = "/"
    var currentDirectory = "/"

    public init(
        path: String, version: Int, root: String, concurrency: Int,
        connectivity: ConnectivitySettings, allowFile: Bool, entries: [Entry]
    ) {
        self.path = path
        self.version = version
        self.root = root
        self.concurrency = concurrency
        self.connectivity = connectivity
        self.allowFile = allowFile
        self.entries = entries
    }
}

/// `connectivity:` — how `mirror` checks for a network before it retries.
public struct ConnectivitySettings: Sendable, Equatable {
    /// Host to probe instead of each entry's own host.
    public var probe: RemoteURL?
    /// How long to wait for the network before giving up.
    public var wait: Duration

    public static let defaultWait: Duration = .seconds(300)

    public init(probe: RemoteURL? = nil, wait: Duration = ConnectivitySettings.defaultWait) {
        self.probe = probe
        self.wait = wait
    }
}

/// Per-transfer settings: the manifest's `defaults:`, overridden key by key by an entry.
///
/// The values are shared between copies until one of them is changed: most entries take their
/// settings from `defaults` unchanged, and a manifest of many entries would otherwise hold a
/// copy of every setting for each (120 bytes an entry).
public struct TransferSettings: Sendable, Equatable {
    /// The settings themselves; see the properties of the same names.
    private struct Values: Equatable {
        var retries: Int
        var timeout: Duration
        var headers: [HTTPHeader]
        var insecure: Bool
        var ftpTLS: FTPTLS
        var maxSize: Int64?
        var minSpeed: Int64?
        var minSpeedTime: Duration = TransferSettings.defaultMinSpeedTime
        var certificateAuthorities = CertificateAuthorities()
        var rateLimit: RateLimit?
        var ownHeaderNames: [String] = []
        var checksums: RemoteURL?
        var segmentMin: Int64 = TransferSettings.defaultSegmentMin
    }

    /// Changed only through `values`, which copies it first unless this is its only holder.
    private final class Storage: @unchecked Sendable {
        var values: Values

        init(_ values: Values) {
            self.values = values
        }
    }

    private var storage: Storage

    private var values: Values {
        get { storage.values }
        _modify {
            if !isKnownUniquelyReferenced(&storage) {
                storage = Storage(storage.values)
            }
            yield &storage.values
        }
    }

    /// Further attempts after the first one fails with a retryable error.
    public var retries: Int {
        get { values.retries }
        set { values.retries = newValue }
    }
    /// Longest a connection attempt may take, and longest a transfer may go without receiving
    /// a byte, before the attempt is abandoned.
    public var timeout: Duration {
        get { values.timeout }
        set { values.timeout = newValue }
    }
    /// Extra request headers, in manifest order. Values may hold secrets: never print them.
    public var headers: [HTTPHeader] {
        get { values.headers }
        set { values.headers = newValue }
    }
    /// `insecure: true` turns TLS certificate verification off for this entry.
    public var insecure: Bool {
        get { values.insecure }
        set { values.insecure = newValue }
    }
    /// `ftp_tls`: whether `ftp://` URLs ask for TLS (explicit FTPS).
    public var ftpTLS: FTPTLS {
        get { values.ftpTLS }
        set { values.ftpTLS = newValue }
    }
    /// A body that grows past this many bytes is stopped.
    public var maxSize: Int64? {
        get { values.maxSize }
        set { values.maxSize = newValue }
    }
    /// The stall guard: a transfer averaging fewer bytes per second than this over any
    /// `minSpeedTime` window is abandoned (and retried). Nil: off.
    public var minSpeed: Int64? {
        get { values.minSpeed }
        set { values.minSpeed = newValue }
    }
    public var minSpeedTime: Duration {
        get { values.minSpeedTime }
        set { values.minSpeedTime = newValue }
    }
    /// The CAs TLS connections trust: `ca_file`, else the environment's `CURL_CA_BUNDLE`,
    /// `SSL_CERT_FILE` and `SSL_CERT_DIR`, else libcurl's own.
    public var certificateAuthorities: CertificateAuthorities {
        get { values.certificateAuthorities }
        set { values.certificateAuthorities = newValue }
    }

    /// The entry's own `rate_limit`: this entry's transfers, whatever else limits them.
    public var rateLimit: RateLimit? {
        get { values.rateLimit }
        set { values.rateLimit = newValue }
    }
    /// The lowercased names of the headers the entry sets itself (not from `defaults`): a
    /// host's header of the same name gives way to them.
    var ownHeaderNames: [String] {
        get { values.ownHeaderNames }
        set { values.ownHeaderNames = newValue }
    }

    /// The headers of a request to a host whose `hosts:` rule has `hostHeaders`: `defaults`',
    /// then the host's, then the entry's own, a later one replacing an earlier one of the same
    /// name (in its place).
    func headers(toHostWith hostHeaders: [HTTPHeader]) -> [HTTPHeader] {
        var merged = headers
        HeaderRules.merge(hostHeaders.lazy.filter { !ownHeaderNames.contains($0.name.lowercased()) }, over: &merged)
        return merged
    }

    /// `checksums`: the checksum file (SHA256SUMS, SHA512SUMS, BSD form) that pins the entry
    /// when the manifest gives no `sha256`/`sha512` of its own.
    public var checksums: RemoteURL? {
        get { values.checksums }
        set { values.checksums = newValue }
    }

    /// `segment_min`: a file at least this large, from a server that offers ranges of one
    /// named version, is fetched over several connections at once (see `SegmentedDownload`);
    /// `Int64.max` (`off`): never.
    public var segmentMin: Int64 {
        get { values.segmentMin }
        set { values.segmentMin = newValue }
    }

    public static let defaultSegmentMin: Int64 = 64 << 20
    public static let defaultRetries = 5
    public static let defaultTimeout: Duration = .seconds(30)
    public static let defaultMinSpeedTime: Duration = .seconds(30)

    public init(
        retries: Int = TransferSettings.defaultRetries,
        timeout: Duration = TransferSettings.defaultTimeout,
        headers: [HTTPHeader] = [],
        insecure: Bool = false,
        maxSize: Int64? = nil,
        ftpTLS: FTPTLS = .no
    ) {
        storage = Storage(Values(
            retries: retries, timeout: timeout, headers: headers, insecure: insecure, ftpTLS: ftpTLS, maxSize: maxSize))
    }

    public static func == (lhs: TransferSettings, rhs: TransferSettings) -> Bool {
        lhs.storage === rhs.storage || lhs.values == rhs.values
    }
}

/// A request header from the manifest. The value is kept out of `description`.
public struct HTTPHeader: Sendable, Equatable, CustomStringConvertible {
    public var name: String
    /// The value with `${VAR}` references expanded. May hold secrets: use only for requests.
    public var value: String
    /// The value as the manifest wrote it (`${VAR}` unexpanded), for writing a manifest back;
    /// never printed.
    public var written: String

    /// - Parameter written: the manifest's text of the value; `value` when nil.
    public init(name: String, value: String, written: String? = nil) {
        self.name = name
        self.value = value
        self.written = written ?? value
    }

    public var description: String { "\(name): <redacted>" }
}

/// One file to mirror.
///
/// A run holds every entry of its manifest (or shard) for its whole length, so the fields most
/// entries leave unset (mirrors, pins, the checksum file's name, repeats) are kept together
/// behind one reference that is nil when all are unset (`Extras`), as are a URL's rare parts
/// (`RemoteURL`): an entry is 80 bytes in place, not 184.
public struct Entry: Sendable, Equatable {
    public var url: RemoteURL
    /// Path relative to the manifest's root, normalised (no `.`, no empty components).
    public var dest: String
    public var settings: TransferSettings
    /// Where the entry's mapping starts in the manifest.
    public var location: SourceLocation
    private var extras: Extras?

    /// Fallback URLs for the same file, tried in order.
    public var mirrors: [RemoteURL] {
        get { extras?.fields.mirrors ?? [] }
        set { if newValue != mirrors { change { $0.mirrors = newValue } } }
    }

    /// The pinned digest in lowercase hex: SHA-256 (64 digits, `sha256:`) or SHA-512 (128
    /// digits, `sha512:`). Set from the entry's checksum file (`checksums:`) when the manifest
    /// pins none itself; see `ChecksumPins`.
    public var digest: String? {
        get { extras?.fields.digest }
        set { if newValue != digest { change { $0.digest = newValue } } }
    }

    /// The name to look the entry up by in its checksum file (`checksum_name:`); nil: the last
    /// segment of the url's path, percent-decoded.
    public var checksumName: String? {
        get { extras?.fields.checksumName }
        set { if newValue != checksumName { change { $0.checksumName = newValue } } }
    }

    /// Pinned size in bytes.
    public var size: Int64? {
        get { extras?.fields.size }
        set { if newValue != size { change { $0.size = newValue } } }
    }

    /// Where the same url and dest are listed again (harmless repeats, merged into this entry).
    public var repeatLocations: [SourceLocation] {
        get { extras?.fields.repeatLocations ?? [] }
        set { if newValue != repeatLocations { change { $0.repeatLocations = newValue } } }
    }

    /// The `url` the manifest names, before any `rewrite:` rule: what names the file (the lock
    /// file writes it back; the checksum file's name comes from it). `url` is the first source
    /// the entry is fetched from.
    public var manifestURL: RemoteURL {
        extras?.fields.rewritten?.url ?? url
    }

    /// The `mirrors` the manifest names, before any `rewrite:` rule.
    public var manifestMirrors: [RemoteURL] {
        extras?.fields.rewritten?.mirrors ?? mirrors
    }

    /// Whether a `rewrite:` rule changed the entry's sources.
    public var isRewritten: Bool { extras?.fields.rewritten != nil }

    /// Which headers source `index` (`url`, then `mirrors`) gets, when a rewrite made it. Nil:
    /// the entry's, as for any source.
    func rewrittenHeaders(ofSource index: Int) -> RewriteRules.RewrittenHeaders? {
        guard let headers = extras?.fields.rewritten?.headers, headers.indices.contains(index) else { return nil }
        return headers[index]
    }

    /// Fetches the entry from what `rules` make of its `url` and `mirrors`; the manifest's
    /// are kept as `manifestURL` and `manifestMirrors`. Nothing changes when no rule matches;
    /// false when every URL the rules leave is one they forbid (the entry has no source).
    mutating func rewrite(by rules: RewriteRules) -> Bool {
        guard let candidates = rules.candidates(for: [url] + mirrors) else { return true }
        guard let first = candidates.first else { return false }
        let original = Rewritten(url: url, mirrors: mirrors, headers: candidates.map(\.rewritten))
        url = first.url
        mirrors = candidates.dropFirst().map(\.url)
        change { $0.rewritten = original }
        return true
    }

    /// The algorithm the entry's files are hashed with: its pin's, else SHA-256.
    public var digestAlgorithm: DigestAlgorithm {
        digest.flatMap(DigestAlgorithm.init(hexDigest:)) ?? .sha256
    }

    public init(
        url: RemoteURL, mirrors: [RemoteURL] = [], dest: String, digest: String? = nil,
        size: Int64? = nil, settings: TransferSettings = TransferSettings(),
        location: SourceLocation
    ) {
        self.url = url
        self.dest = dest
        self.settings = settings
        self.location = location
        let extras = Extras.Fields(mirrors: mirrors, digest: digest, size: size)
        self.extras = extras.isEmpty ? nil : Extras(extras)
    }

    /// Changes the extras as a value: in place when this entry holds the only reference (a
    /// repeat appended to `repeatLocations` does not copy the others), else in a new one; none
    /// when every field is unset again.
    private mutating func change(_ edit: (inout Extras.Fields) -> Void) {
        if isKnownUniquelyReferenced(&extras), let unique = extras {
            edit(&unique.fields)
            if unique.fields.isEmpty { extras = nil }
            return
        }
        var fields = extras?.fields ?? Extras.Fields()
        edit(&fields)
        extras = fields.isEmpty ? nil : Extras(fields)
    }

    /// Changed only through `change`, and in place only while one entry holds it: shared, it is
    /// never written, which is what makes it safe to send.
    private final class Extras: @unchecked Sendable, Equatable {
        struct Fields: Equatable {
            var mirrors: [RemoteURL] = []
            var digest: String?
            var checksumName: String?
            var size: Int64?
            var repeatLocations: [SourceLocation] = []
            var rewritten: Rewritten?

            var isEmpty: Bool {
                mirrors.isEmpty && digest == nil && checksumName == nil && size == nil && repeatLocations.isEmpty && rewritten == nil
            }
        }

        var fields: Fields

        init(_ fields: Fields) {
            self.fields = fields
        }

        static func == (lhs: Extras, rhs: Extras) -> Bool { lhs === rhs || lhs.fields == rhs.fields }
    }

    /// What the manifest named before `rewrite:` rules made the entry's sources, and the
    /// headers of each source (nil: the entry's).
    struct Rewritten: Equatable {
        var url: RemoteURL
        var mirrors: [RemoteURL]
        var headers: [RewriteRules.RewrittenHeaders?]
    }
}

/// A URL as it goes on the wire, with a form that is safe to print.
public struct RemoteURL: Sendable, Hashable, CustomStringConvertible {
    /// The URL with `${VAR}` references expanded. May hold secrets: use only for requests.
    /// Set only when made: `written` reads it when the two are the same.
    public private(set) var string: String
    /// The URL exactly as the manifest wrote it (`${VAR}` unexpanded). Holds a user name or
    /// password written in it: never print it; it is only for writing a manifest back
    /// (`ManifestWriter.WrittenEntry`).
    public var written: String {
        get { rare?.written ?? string }
        set { setRare(written: newValue, login: login) }
    }
    /// The netrc login for this URL's host, sent with requests to this URL and to redirects
    /// that keep its scheme, host and port. A secret: use only for requests.
    public var login: NetrcLogin? {
        get { rare?.login }
        set { setRare(written: written, login: newValue) }
    }

    /// What most URLs lack, behind one reference: a written form other than `string` (a
    /// `${VAR}` expanded) and a login. Every entry holds a URL: 24 bytes in place, not 40.
    /// Nil exactly when the URL has neither, so that the synthesized equality and hash hold.
    private var rare: Rare?

    /// - Parameter written: the manifest's text of the URL; `string` when nil.
    public init(string: String, written: String? = nil, login: NetrcLogin? = nil) {
        self.string = string
        setRare(written: written ?? string, login: login)
    }

    private mutating func setRare(written: String, login: NetrcLogin?) {
        let differs = written != string
        rare = differs || login != nil ? Rare(written: differs ? written : nil, login: login) : nil
    }

    private final class Rare: Sendable, Hashable {
        /// Nil when the URL was written as it is sent.
        let written: String?
        let login: NetrcLogin?

        init(written: String?, login: NetrcLogin?) {
            self.written = written
            self.login = login
        }

        static func == (lhs: Rare, rhs: Rare) -> Bool { lhs.written == rhs.written && lhs.login == rhs.login }
        func hash(into hasher: inout Hasher) {
            hasher.combine(written)
            hasher.combine(login)
        }
    }

    /// The URL as the manifest wrote it (`${VAR}` unexpanded) with any userinfo replaced by
    /// `***`. Safe for output, logs, JSON and the state store.
    public var display: String { RemoteURL.redactingUserinfo(in: written) }

    public var description: String { display }
}

/// A place in a manifest file; `line` and `column` count from 1.
///
/// Every entry holds one for the whole run: the line and column are kept in 32 bits each (a
/// larger one is clamped), 24 bytes in place, not 32.
public struct SourceLocation: Sendable, Hashable, CustomStringConvertible {
    public var file: String
    public var line: Int {
        get { Int(storedLine) }
        set { storedLine = UInt32(clamping: newValue) }
    }
    public var column: Int {
        get { Int(storedColumn) }
        set { storedColumn = UInt32(clamping: newValue) }
    }
    private var storedLine: UInt32
    private var storedColumn: UInt32

    public init(file: String, line: Int, column: Int) {
        self.file = file
        self.storedLine = UInt32(clamping: line)
        self.storedColumn = UInt32(clamping: column)
    }

    public var description: String { "\(file):\(line):\(column)" }
}
