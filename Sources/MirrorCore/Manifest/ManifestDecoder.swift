import FoundationEssentials

/// Turns the YAML nodes of a manifest into a `Manifest`, checking every value on the way: the
/// top level, then each entry on its own (`ManifestStream` hands them over as libyaml reads them).
///
/// The decoder does not stop at the first problem: it records each one in `diagnostics` and
/// carries on with whatever does not depend on the broken value.
struct ManifestDecoder {
    /// The manifest's name in messages.
    let file: String
    let environment: [String: String]
    let rootResolution: RootResolution
    /// Where the logins of URLs come from; nil when there is no netrc file.
    let netrc: Netrc?
    private(set) var diagnostics: [ManifestDiagnostic] = []
    /// Each checksum file's URL the rewrite rules were checked against, and whether it passed:
    /// `defaults` names one for every entry, which is checked (and a problem said) once.
    var checkedChecksumRewrites: [String: Bool] = [:]
    /// The CA bundles this load has checked (`fresh` shares them).
    let certificateChecks: CertificateChecks
    /// The rules of the file `MIRROR_REWRITE` names, read before the manifest's.
    let siteRewrites: [RewriteRule]

    init(
        file: String, environment: [String: String], rootResolution: RootResolution, netrc: Netrc? = nil,
        certificateChecks: CertificateChecks = CertificateChecks(), siteRewrites: [RewriteRule] = []
    ) {
        self.file = file
        self.environment = environment
        self.rootResolution = rootResolution
        self.netrc = netrc
        self.certificateChecks = certificateChecks
        self.siteRewrites = siteRewrites
    }

    /// Where a relative `root` (or `state_dir`) is resolved, and what replaces it.
    struct RootResolution {
        /// Absolute directory a relative `root` in the manifest is relative to.
        var manifestDirectory: String
        /// The command line's `--root`, if given: replaces the manifest's `root`.
        var override: String?
        /// Absolute directory a relative override is relative to.
        var currentDirectory: String
        /// The command line's `--state-dir`, if given: replaces the manifest's `state_dir`.
        var stateDirectoryOverride: String? = nil
    }

    /// The top level of a manifest, decoded but for its entries.
    struct TopLevel {
        var root: String?
        /// `state_dir` (or `--state-dir`), absolute; nil when neither names one.
        var stateDirectory: String?
        /// `cache`, absolute; nil when the manifest names none.
        var cache: String?
        var cachePlacement: BlobCache.Mode
        var cacheLimits: BlobCache.Limits
        var concurrency: Int
        var connectivity: ConnectivitySettings
        var allowFile: Bool
        var prune: Bool
        var rateLimit: RateLimit?
        var hosts: HostRules
        /// What the entries are decoded in.
        var entryContext: EntryContext
        /// The `files` value; nil when it is missing (which was reported).
        var files: YAMLNode?
    }

    /// The manifest the whole document tree `root` describes, or nil when a problem was
    /// recorded in `diagnostics`. Loading streams the document instead (`ManifestStream`); this
    /// is what the stream must agree with.
    mutating func decodeManifest(_ root: YAMLNode) -> Manifest? {
        guard let top = decodeTopLevel(root) else { return nil }
        let entries = top.files.map { decodeEntries($0, context: top.entryContext) } ?? []
        return manifest(top, entries: entries)
    }

    /// Everything of the top-level mapping `root` but the entries of `files`, or nil when it is
    /// not a mapping or names a version other than 1 (recorded in `diagnostics`): then nothing
    /// else of the manifest is worth a message.
    mutating func decodeTopLevel(_ root: YAMLNode) -> TopLevel? {
        guard case .mapping(let pairs) = root.content else {
            report("expected a mapping at the top level, starting with `version: 1`; found \(root.summary)", at: root, key: nil)
            return nil
        }
        // A later version may use keys this one does not know; complaining about those would
        // only hide the real problem.
        if let version = pairs.first(where: { $0.key.text == "version" })?.value,
           let number = version.plainText.flatMap({ Int($0) }), number != 1 {
            report("unsupported manifest version \(number); this mirror reads version 1", at: version, key: "version")
            return nil
        }

        let top = checkedMapping(root, path: "", section: .topLevel)
        if let version = top?["version"] {
            _ = integer(version, key: "version", in: 1...1, expected: "the integer 1")
        } else {
            report("missing required key `version`; add `version: 1` at the top", at: root, key: nil)
        }

        let allowFile = top?["allow_file"].flatMap { boolean($0, key: "allow_file") } ?? false
        let prune = top?["prune"].flatMap { boolean($0, key: "prune") } ?? false
        let rootDirectory: String?
        switch decodeDirectory(top?["root"], key: "root", override: rootResolution.override, flag: "--root") {
        case .invalid: rootDirectory = nil
        case .unset: rootDirectory = LexicalPath.absolute(".", relativeTo: rootResolution.manifestDirectory)
        case .set(let path): rootDirectory = path
        }
        var stateDirectory: String?
        switch decodeDirectory(top?["state_dir"], key: "state_dir", override: rootResolution.stateDirectoryOverride, flag: "--state-dir") {
        case .invalid, .unset: break
        case .set(let path): stateDirectory = path
        }
        if let stateDirectory, let rootDirectory, LexicalPath.isWithin(stateDirectory, rootDirectory) {
            let message = "state_dir \(stateDirectory) is the root \(rootDirectory) or inside it: a web server that serves the root would serve the state store too, and a dest could overwrite it; choose a directory outside the root"
            if let node = top?["state_dir"], rootResolution.stateDirectoryOverride == nil {
                report(message, at: node, key: "state_dir")
            } else {
                diagnostics.append(ManifestDiagnostic(location: nil, key: rootResolution.stateDirectoryOverride == nil ? "root" : "--state-dir", message: message))
            }
        }
        var cache: String?
        if case .set(let path) = decodeDirectory(top?["cache"], key: "cache", override: nil, flag: "--cache") { cache = path }
        if let cache, let rootDirectory, LexicalPath.isWithin(cache, rootDirectory), let node = top?["cache"] {
            report("cache \(cache) is the root \(rootDirectory) or inside it: a dest could overwrite a blob, and a web server that serves the root would serve the cache; choose a directory outside the root", at: node, key: "cache")
        }
        var cachePlacement = BlobCache.Mode.copy
        if let node = top?["cache_place"] {
            switch node.plainText {
            case "copy": cachePlacement = .copy
            case "hardlink": cachePlacement = .hardlink
            default: report("expected `copy` or `hardlink`; found \(node.summary)", at: node, key: "cache_place")
            }
        }
        var cacheLimits = BlobCache.Limits()
        if let node = top?["cache_max_size"] { cacheLimits.maxSize = byteCount(node, key: "cache_max_size", allowUnits: true) }
        if let node = top?["cache_max_age"] { cacheLimits.maxAge = duration(node, key: "cache_max_age") }
        let concurrency = top?["concurrency"].flatMap {
            integer($0, key: "concurrency", in: 1...64, expected: "an integer from 1 to 64")
        } ?? 4
        let defaults = top?["defaults"].flatMap { decodeTransferOverrides($0, path: "defaults") }
        var connectivity = top?["connectivity"].flatMap { decodeConnectivity($0) } ?? ConnectivitySettings()
        let rateLimit = top?["rate_limit"].flatMap { self.rateLimit($0, key: "rate_limit") }
        let hosts = top?["hosts"].flatMap { decodeHosts($0) } ?? HostRules()
        var environmentSettings = settingsFromEnvironment()
        if let node = top?["segment_min"], let value = segmentMin(node, key: "segment_min") { environmentSettings.segmentMin = value }
        let baseSettings = defaults?.applied(to: environmentSettings) ?? environmentSettings
        let rewrites = rewriteRules(top, allowFile: allowFile)
        if let probe = connectivity.probe, rewrites.forbids(probe.string) {
            // A host an `only` rule keeps the run away from is no probe: its first replacement
            // is, else none (each source's own host is checked).
            connectivity.probe = rewrites.candidates(for: [probe])?.first?.url
        }

        let files = top?["files"]
        if files == nil, top != nil {
            report("missing required key `files`; list the files to mirror under `files:`", at: root, key: nil)
        }
        return TopLevel(
            root: rootDirectory, stateDirectory: stateDirectory, cache: cache, cachePlacement: cachePlacement, cacheLimits: cacheLimits, concurrency: concurrency, connectivity: connectivity, allowFile: allowFile, prune: prune,
            rateLimit: rateLimit, hosts: hosts, entryContext: EntryContext(defaults: baseSettings, allowFile: allowFile, rewrites: rewrites), files: files)
    }

    /// The entry context the top-level mapping `pairs` (the start of one) give, as
    /// `decodeTopLevel` would find it, for decoding entries before the rest of the top level has
    /// been read. Problems are recorded in `diagnostics` as they would be there.
    mutating func entryContext(inTopLevel pairs: [YAMLNode.Pair], at root: YAMLNode) -> EntryContext {
        var node = root
        node.content = .mapping(pairs)
        let top = checkedMapping(node, path: "", section: .topLevel)
        let allowFile = top?["allow_file"].flatMap { boolean($0, key: "allow_file") } ?? false
        let defaults = top?["defaults"].flatMap { decodeTransferOverrides($0, path: "defaults") }
        var environmentSettings = settingsFromEnvironment()
        if let node = top?["segment_min"], let value = segmentMin(node, key: "segment_min") { environmentSettings.segmentMin = value }
        return EntryContext(
            defaults: defaults?.applied(to: environmentSettings) ?? environmentSettings, allowFile: allowFile,
            rewrites: rewriteRules(top, allowFile: allowFile))
    }

    /// The site's rules, then those of the top level's `rewrite`.
    private mutating func rewriteRules(_ top: CheckedMapping?, allowFile: Bool) -> RewriteRules {
        let own = top?["rewrite"].map { decodeRewriteRules($0, key: "rewrite", allowFile: allowFile) } ?? []
        return RewriteRules(siteRewrites + own)
    }

    /// The manifest of `top` and its entries, or nil when any problem was recorded.
    ///
    /// - Parameters:
    ///   - shard: The shard `entries` were chosen for, by the hash of their dest.
    ///   - totals: Every shard's totals, with `shard`.
    func manifest(_ top: TopLevel, entries: [Entry], shard: ShardSelection? = nil, totals: [ShardTotals] = []) -> Manifest? {
        guard diagnostics.isEmpty, let rootDirectory = top.root else { return nil }
        var manifest = Manifest(
            path: file, version: 1, root: rootDirectory, concurrency: top.concurrency,
            connectivity: top.connectivity, allowFile: top.allowFile, entries: entries)
        if let shard {
            manifest.shard = shard
            manifest.shardBalance = .hash
            manifest.shardTotals = totals
        }
        manifest.prune = top.prune
        manifest.stateDirectory = top.stateDirectory
        manifest.cache = top.cache
        manifest.cachePlacement = top.cachePlacement
        manifest.cacheLimits = top.cacheLimits
        manifest.rateLimit = top.rateLimit
        manifest.hosts = top.hosts
        manifest.rewrites = top.entryContext.rewrites
        manifest.manifestDirectory = rootResolution.manifestDirectory
        manifest.currentDirectory = rootResolution.currentDirectory
        return manifest
    }

    /// A decoder for the same manifest with no diagnostics yet.
    var fresh: ManifestDecoder {
        ManifestDecoder(file: file, environment: environment, rootResolution: rootResolution, netrc: netrc, certificateChecks: certificateChecks, siteRewrites: siteRewrites)
    }

    /// What a directory-valued top-level key comes to.
    enum DirectoryKey {
        /// Neither the manifest nor the command line names one.
        case unset
        /// An absolute path.
        case set(String)
        /// A problem was recorded.
        case invalid
    }

    /// A directory-valued top-level key (`root`, `state_dir`): `${VAR}`s and a leading `~`
    /// expanded as in a shell, then made absolute against the manifest's directory; the command
    /// line's `override` (`flag`), relative to the current directory, replaces it.
    private mutating func decodeDirectory(_ node: YAMLNode?, key: String, override: String?, flag: String) -> DirectoryKey {
        var fromManifest: String?
        if let node {
            // One reader for every key that names a local path: `${VAR}`s (none empty) and a
            // leading `~` expanded as in a shell, not taken as directory names.
            guard let path = localPath(node, key: key, expected: "a directory path") else { return .invalid }
            fromManifest = path
        }
        if let override {
            // An empty override is most likely an unset shell variable; taking it as the current
            // directory would scatter files wherever the job happened to start.
            guard !override.isEmpty else {
                diagnostics.append(ManifestDiagnostic(
                    location: nil, key: flag, message: "the \(key == "root" ? "root" : "state directory") given on the command line is empty; give a directory"))
                return .invalid
            }
            return .set(LexicalPath.absolute(override, relativeTo: rootResolution.currentDirectory))
        }
        return fromManifest.map { .set(LexicalPath.absolute($0, relativeTo: rootResolution.manifestDirectory)) } ?? .unset
    }

    private mutating func decodeConnectivity(_ node: YAMLNode) -> ConnectivitySettings? {
        guard let mapping = checkedMapping(node, path: "connectivity", section: .connectivity) else { return nil }
        var settings = ConnectivitySettings()
        if let probe = mapping["probe"] {
            settings.probe = remoteURL(probe, key: "connectivity.probe", role: .probe)?.remote
        }
        if let wait = mapping["wait"], let duration = duration(wait, key: "connectivity.wait") {
            settings.wait = duration
        }
        return settings
    }

    /// `hosts:`, a mapping of `host[:port]` to that host's settings.
    private mutating func decodeHosts(_ node: YAMLNode) -> HostRules? {
        guard let mapping = checkedMapping(node, path: "hosts", section: nil, expected: "a mapping of hosts (`example.org:` or `example.org:8443:`) to their settings") else {
            return nil
        }
        var rules: [HostRule] = []
        var lineOfKey: [String: Int] = [:]
        for pair in mapping.pairs {
            let (name, nameNode, value) = (pair.key, pair.keyNode, pair.value)
            let path = "hosts.\(name)"
            let pattern: (key: String, host: String, port: Int?)
            do {
                pattern = try HostPatternSyntax.parse(name)
            } catch {
                report(error, at: nameNode, key: path)
                continue
            }
            if let line = lineOfKey[pattern.key] {
                report("host `\(pattern.key)` is already set at line \(line); host names do not depend on case", at: nameNode, key: path)
                continue
            }
            lineOfKey[pattern.key] = nameNode.line
            guard let settings = checkedMapping(value, path: path, section: .host, expected: "a mapping of the host's settings (concurrency, rate_limit, headers)") else {
                continue
            }
            var rule = HostRule(key: pattern.key, host: pattern.host, port: pattern.port)
            if let node = settings["concurrency"] {
                rule.concurrency = integer(node, key: settings.path(of: "concurrency"), in: 1...64, expected: "an integer from 1 to 64")
            }
            if let node = settings["rate_limit"] {
                rule.rateLimit = rateLimit(node, key: settings.path(of: "rate_limit"))
            }
            if let node = settings["headers"] {
                rule.headers = headers(node, key: settings.path(of: "headers")) ?? []
            }
            rules.append(rule)
        }
        return HostRules(rules)
    }

    /// The settings the environment changes: the CAs of `CURL_CA_BUNDLE`, `SSL_CERT_FILE` and
    /// `SSL_CERT_DIR`, each checked now so that a wrong one stops the run before any transfer.
    private mutating func settingsFromEnvironment() -> TransferSettings {
        var settings = TransferSettings()
        var variables = CertificateAuthorities.variables(in: environment)
        for index in variables.indices {
            // libcurl would read a relative one from the current directory; say which file that is.
            let path = LexicalPath.absolute(variables[index].value, relativeTo: rootResolution.currentDirectory)
            variables[index].value = path
            do {
                if variables[index].isDirectory {
                    try CertificateFileCheck.checkDirectory(path)
                } else {
                    try certificateChecks.checkBundle(path)
                }
            } catch {
                diagnostics.append(ManifestDiagnostic(
                    location: nil, key: variables[index].name,
                    message: "\(error.message) (the environment variable names it; fix it or unset it)"))
            }
        }
        settings.certificateAuthorities = CertificateAuthorities(variables)
        return settings
    }

    /// The keys shared by `defaults` and entries.
    mutating func decodeTransferOverrides(_ node: YAMLNode, path: String) -> TransferOverrides? {
        guard let mapping = checkedMapping(node, path: path, section: .defaults) else { return nil }
        return transferOverrides(in: mapping)
    }

    mutating func transferOverrides(in mapping: CheckedMapping) -> TransferOverrides {
        var overrides = TransferOverrides()
        // Most entries set none of these keys: eleven lookups saved.
        guard mapping.mayHaveTransferKeys else { return overrides }
        if let node = mapping["retries"] {
            overrides.retries = integer(node, key: mapping.path(of: "retries"), in: 0...100, expected: "an integer from 0 to 100")
        }
        if let node = mapping["timeout"] {
            overrides.timeout = duration(node, key: mapping.path(of: "timeout"))
        }
        if let node = mapping["headers"] {
            overrides.headers = headers(node, key: mapping.path(of: "headers"))
        }
        if let node = mapping["insecure"] {
            overrides.insecure = boolean(node, key: mapping.path(of: "insecure"))
        }
        if let node = mapping["ftp_tls"] {
            overrides.ftpTLS = ftpTLS(node, key: mapping.path(of: "ftp_tls"))
        }
        if let node = mapping["max_size"] {
            overrides.maxSize = byteCount(node, key: mapping.path(of: "max_size"), allowUnits: true)
        }
        if let node = mapping["min_speed"] {
            overrides.minSpeed = byteCount(node, key: mapping.path(of: "min_speed"), allowUnits: true)
        }
        if let node = mapping["segment_min"] {
            overrides.segmentMin = segmentMin(node, key: mapping.path(of: "segment_min"))
        }
        if let node = mapping["min_speed_time"] {
            overrides.minSpeedTime = duration(node, key: mapping.path(of: "min_speed_time"))
        }
        if let node = mapping["ca_file"] {
            overrides.caFile = certificateBundle(node, key: mapping.path(of: "ca_file"))
        }
        if let node = mapping["checksums"] {
            if node.text == "none" {
                overrides.checksums = .noFile
            } else if let url = remoteURL(node, key: mapping.path(of: "checksums"), role: .checksums)?.remote {
                overrides.checksums = .file(url)
            }
        }
        return overrides
    }

    // MARK: Reporting

    func location(of node: YAMLNode) -> SourceLocation {
        SourceLocation(file: file, line: node.line, column: node.column)
    }

    mutating func report(_ message: String, at node: YAMLNode, key: String?) {
        report(message, at: location(of: node), key: key)
    }

    mutating func report(_ message: String, at location: SourceLocation, key: String?) {
        diagnostics.append(ManifestDiagnostic(location: location, key: key, message: message))
    }

    /// Takes the problems another decoder of the same manifest recorded, after this one's.
    mutating func append(_ other: ManifestDecoder) {
        diagnostics += other.diagnostics
    }

    mutating func report(_ problem: ValueProblem, at node: YAMLNode, key: String?) {
        report(problem.message, at: node, key: key)
    }
}

/// A YAML mapping whose keys have been checked: each is a scalar, appears once, and (for a
/// manifest section) is one the section allows.
struct CheckedMapping {
    var node: YAMLNode
    /// Path of the mapping itself, like `files[0]`; empty at the top level.
    var path: String
    /// The usable pairs, in file order.
    var pairs: [Pair]
    /// When the mapping is a section's: the section, and bit `i` set for `allowedKeys[i]`
    /// when the mapping sets it.
    var section: ManifestSection?
    var keyBits: UInt64 = 0

    /// Whether the mapping may set any of the transfer keys (`ManifestSection.transferKeys`):
    /// false only when its section's keys were checked and it sets none of them.
    var mayHaveTransferKeys: Bool {
        guard let section else { return true }
        return keyBits & section.transferKeyBits != 0
    }

    /// A struct, not a tuple: a tuple's copies went through the runtime's generic witnesses.
    struct Pair {
        var key: String
        var keyNode: YAMLNode
        var value: YAMLNode
    }

    /// The value of `key`, or nil when the mapping does not set it. Looked up in place: through
    /// `first(where:)` each pair (a key and two nodes, a tuple) was copied for every key asked,
    /// some 20 keys an entry.
    subscript(key: String) -> YAMLNode? {
        for index in pairs.indices where pairs[index].key == key {
            return pairs[index].value
        }
        return nil
    }

    /// Whether the mapping sets `key`.
    func contains(_ key: String) -> Bool {
        pairs.indices.contains { pairs[$0].key == key }
    }

    func path(of key: String) -> String {
        path.isEmpty ? key : path + "." + key
    }
}

extension ManifestDecoder {
    /// Mappings of at most this many pairs find repeated keys by searching the keys before.
    static let keysSearchedInPlace = 16

    /// `node` as a mapping with its keys checked, or nil (with a diagnostic) if it is not a
    /// mapping. Keys that are not scalars, repeated or (when `section` is given) not allowed
    /// there are reported and left out of the result.
    mutating func checkedMapping(
        _ node: YAMLNode, path: String, section: ManifestSection?, expected: String = "a mapping"
    ) -> CheckedMapping? {
        guard case .mapping(let pairs) = node.content else {
            report("expected \(expected), found \(node.summary)", at: node, key: path.isEmpty ? nil : path)
            return nil
        }
        var mapping = CheckedMapping(node: node, path: path, pairs: [], section: section)
        mapping.pairs.reserveCapacity(pairs.count)
        // Where each key was first set. A small mapping (every entry) is searched instead: the
        // keys kept, then those refused as unknown. A dictionary cost more than the rest of
        // the checks together.
        let searched = pairs.count <= Self.keysSearchedInPlace
        var firstLines = searched ? [:] : [String: Int](minimumCapacity: pairs.count)
        var unknownKeys: [(key: String, line: Int)] = []
        for pair in pairs {
            guard case .scalar(let key, _) = pair.key.content else {
                report("a mapping key must be a plain name, found \(pair.key.summary)", at: pair.key, key: path.isEmpty ? nil : path)
                continue
            }
            var firstLine: Int?
            if !searched {
                firstLine = firstLines[key]
            } else if let kept = mapping.pairs.indices.first(where: { mapping.pairs[$0].key == key }) {
                firstLine = mapping.pairs[kept].keyNode.line
            } else if let unknown = unknownKeys.indices.first(where: { unknownKeys[$0].key == key }) {
                firstLine = unknownKeys[unknown].line
            }
            if let firstLine {
                report("duplicate key `\(key)`; it is already set at line \(firstLine)", at: pair.key, key: mapping.path(of: key))
                continue
            }
            if !searched { firstLines[key] = pair.key.line }
            if let section {
                guard let bit = section.allowedKeys.firstIndex(of: key) else {
                    if searched { unknownKeys.append((key, pair.key.line)) }
                    report(section.unknownKeyMessage(key), at: pair.key, key: mapping.path(of: key))
                    continue
                }
                mapping.keyBits |= 1 << UInt64(bit)
            }
            mapping.pairs.append(CheckedMapping.Pair(key: key, keyNode: pair.key, value: pair.value))
        }
        return mapping
    }
}
