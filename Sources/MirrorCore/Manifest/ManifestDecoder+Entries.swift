import FoundationEssentials

/// `files:` and its entries.
extension ManifestDecoder {
    /// An entry that decoded cleanly, with where its dest came from for conflict messages.
    struct DecodedEntry {
        var entry: Entry
        /// Where the `dest` value is, or the `url` value when dest was derived from it.
        var destLocation: SourceLocation
        /// Whether dest was derived from the url.
        var destIsFromURL: Bool

        /// The key a conflict over this entry's dest is reported at; `index` is the entry's in `files`.
        func destKey(index: Int) -> String {
            "files[\(index)]." + (destIsFromURL ? "url" : "dest")
        }
    }

    /// The entries of the `files` node, duplicates removed; conflicts between them are reported.
    mutating func decodeEntries(_ node: YAMLNode, context: EntryContext) -> [Entry] {
        entryList(node, context: context, shard: nil).entries
    }

    /// The entries of the `files` node (of `shard` only, when given), duplicates removed, and
    /// the totals of every shard; conflicts between them are reported.
    mutating func entryList(
        _ node: YAMLNode, context: EntryContext, shard: ShardSelection?
    ) -> (entries: [Entry], totals: [ShardTotals]) {
        guard case .sequence(let items) = node.content else {
            report("expected a sequence of entries (each `- url: …`), found \(node.summary)", at: node, key: "files")
            return ([], [])
        }
        var list = EntryListDecoder(decoder: fresh, context: context, purpose: .entries(shard: shard))
        for item in items {
            list.add(item)
        }
        let suspects = list.takeSuspects()
        if !suspects.isEmpty {
            var second = EntryListDecoder(decoder: fresh, context: context, purpose: .claims(suspects: suspects))
            for item in items {
                second.add(item)
            }
            list.settle(second.claims)
        }
        let entries = list.finish(files: node)
        append(list.decoder)
        return (entries, list.totals)
    }

    /// The entry `node` at `index` of `files`, or nil when a problem was recorded.
    mutating func decodeEntry(_ node: YAMLNode, index: Int, context: EntryContext) -> DecodedEntry? {
        let path = "files[\(index)]"
        if case .scalar = node.content, !node.isNull {
            report("expected an entry mapping, found a single value; write each entry as `- url: …`", at: node, key: path)
            return nil
        }
        guard let mapping = checkedMapping(
            node, path: path, section: .entry, expected: "an entry mapping with at least `url:`"
        ) else { return nil }
        let countBefore = diagnostics.count
        let allowFile = context.allowFile

        var url: CheckedURL?
        let urlNode = mapping["url"]
        let urlKey = mapping.path(of: "url")
        if let urlNode {
            url = remoteURL(urlNode, key: urlKey, role: .download(allowFile: allowFile))
        } else {
            report("missing required key `url`", at: node, key: path)
        }

        var mirrors: [RemoteURL] = []
        if let mirrorsNode = mapping["mirrors"] {
            if case .sequence(let items) = mirrorsNode.content {
                for (index, item) in items.enumerated() {
                    let key = mapping.path(of: "mirrors") + "[\(index)]"
                    if let mirror = remoteURL(item, key: key, role: .download(allowFile: allowFile)) {
                        mirrors.append(mirror.remote)
                    }
                }
            } else {
                report("expected a sequence of URLs, like `mirrors: [https://…]`, found \(mirrorsNode.summary)",
                       at: mirrorsNode, key: mapping.path(of: "mirrors"))
            }
        }

        var dest: String?
        var destNode = node
        var destIsFromURL = false
        if let node = mapping["dest"] {
            destNode = node
            let destKey = mapping.path(of: "dest")
            if let text = text(node, key: destKey, expected: "a path relative to root"), destHasNoVariable(text, at: node, key: destKey) {
                do {
                    dest = try DestinationPath.normalised(text)
                } catch {
                    report(error, at: node, key: destKey)
                }
            }
        } else if let url, let urlNode {
            destNode = urlNode
            destIsFromURL = true
            dest = defaultDest(from: url.components, display: url.display, at: urlNode, key: urlKey)
        }

        var pin: String?
        let pinned = DigestAlgorithm.allCases.filter { mapping.contains($0.key) }
        if pinned.count > 1, let second = pinned.last, let node = mapping[second.key] {
            report("an entry pins one digest: `sha256` or `sha512`, not both; keep one", at: node, key: mapping.path(of: second.key))
        } else if let algorithm = pinned.first, let node = mapping[algorithm.key] {
            pin = digest(node, algorithm, key: mapping.path(of: algorithm.key))
        }
        var checksumName: String?
        if let node = mapping["checksum_name"] {
            checksumName = text(node, key: mapping.path(of: "checksum_name"), expected: "the file's name as its checksum file lists it")
        }
        var size: Int64?
        if let node = mapping["size"] {
            size = byteCount(node, key: mapping.path(of: "size"), allowUnits: false)
        }
        let overrides = transferOverrides(in: mapping)
        var settings = overrides.applied(to: context.defaults)
        if let headers = overrides.headers, !headers.isEmpty {
            settings.ownHeaderNames = headers.map { $0.name.lowercased() }
        }
        if let node = mapping["rate_limit"] {
            settings.rateLimit = rateLimit(node, key: mapping.path(of: "rate_limit"))
        }
        if let size, let maxSize = settings.maxSize, size > maxSize, let sizeNode = mapping["size"] {
            report("size \(size) is larger than max_size \(maxSize), so the download would always be stopped; raise max_size or fix size",
                   at: sizeNode, key: mapping.path(of: "size"))
        }

        guard diagnostics.count == countBefore, let url, let dest else { return nil }
        // A checksum file does not list itself: mirrored beside the files it pins, it is
        // downloaded as any unpinned file.
        let isItsOwnChecksumFile = settings.checksums?.string == url.remote.string
        if isItsOwnChecksumFile { settings.checksums = nil }
        if checksumName != nil, settings.checksums == nil, let node = mapping["checksum_name"] {
            let why = isItsOwnChecksumFile
                ? "the entry is that checksum file itself (its url is the `checksums` URL), which pins nothing"
                : "the entry has no `checksums` (here or in defaults)"
            report("`checksum_name` names the entry in its checksum file, but \(why)", at: node, key: mapping.path(of: "checksum_name"))
            return nil
        }
        var entry = Entry(
            url: url.remote, mirrors: mirrors, dest: dest, digest: pin, size: size,
            settings: settings, location: location(of: node))
        entry.checksumName = checksumName
        if !context.rewrites.isEmpty, !rewrite(&entry, by: context.rewrites, at: urlNode ?? node, key: urlKey, allowFile: allowFile) {
            return nil
        }
        return DecodedEntry(entry: entry, destLocation: location(of: destNode), destIsFromURL: destIsFromURL)
    }

    /// Applies the `rewrite:` rules to `entry` (`Entry.rewrite(by:)`); false, with a problem
    /// reported at `node`, when what they make cannot be fetched: no URL left, a file URL the
    /// manifest does not allow, a query's `${VAR}` sent to another host; the same for its
    /// checksum file.
    private mutating func rewrite(_ entry: inout Entry, by rules: RewriteRules, at node: YAMLNode, key: String, allowFile: Bool) -> Bool {
        let countBefore = diagnostics.count
        func sendsQueryVariable(_ source: RemoteURL) {
            guard rules.sendsQueryVariable(of: source) else { return }
            report("a rewrite rule sends `\(source.display)` to another host, with the value of a ${VAR} in its query: a value written for its own host (a token, a signature) does not go to another; put it in a header (which stays with its host) or rewrite to the same host",
                   at: node, key: key)
        }
        for source in [entry.url] + entry.mirrors { sendsQueryVariable(source) }
        if !entry.rewrite(by: rules) {
            report("every URL of this entry (its url and mirrors) is covered by an `only: true` rewrite rule, and no rule leads it anywhere else: there is nowhere to fetch it from",
                   at: node, key: key)
        } else if !allowFile, entry.isRewritten, let local = ([entry.url] + entry.mirrors).first(where: { RemoteProbe.scheme(of: $0.string) == "file" }) {
            report("a rewrite rule makes this entry's source the file URL `\(local.display)`; file URLs are refused unless the manifest sets `allow_file: true` at the top level",
                   at: node, key: key)
        }
        if let checksums = entry.settings.checksums {
            if let passed = checkedChecksumRewrites[checksums.string] {
                // Said at the first entry that names it; this one fails with it, unsaid.
                return passed && diagnostics.count == countBefore
            }
            let beforeChecksums = diagnostics.count
            sendsQueryVariable(checksums)
            if let candidates = rules.candidates(for: [checksums]) {
                if candidates.isEmpty {
                    report("its checksum file `\(checksums.display)` (and every entry's that names it) is covered by an `only: true` rewrite rule that leads it nowhere else",
                           at: node, key: key)
                } else if !allowFile, let local = candidates.first(where: { RemoteProbe.scheme(of: $0.url.string) == "file" }) {
                    report("a rewrite rule makes its checksum file (and every entry's that names it) the file URL `\(local.url.display)`; file URLs are refused unless the manifest sets `allow_file: true` at the top level",
                           at: node, key: key)
                }
            }
            checkedChecksumRewrites[checksums.string] = diagnostics.count == beforeChecksums
        }
        return diagnostics.count == countBefore
    }

    /// The last segment of the URL's path, when it makes a usable dest.
    private mutating func defaultDest(from components: URLParts, display: String, at node: YAMLNode, key: String) -> String? {
        // A name that came out of a ${VAR} would print the variable's value everywhere the
        // dest appears (output, JSON, the state store): ask for an explicit dest instead.
        if Self.fileNameHasVariable(display) {
            report("the file name at the end of url comes from a ${VAR}, whose value must not be printed; set dest", at: node, key: key)
            return nil
        }
        let name: String
        do {
            name = try URLRules.fileName(fromPercentEncodedPath: components.percentEncodedPath)
        } catch {
            report(error, at: node, key: key)
            return nil
        }
        do {
            return try DestinationPath.normalised(name)
        } catch {
            report("the file name taken from url cannot be a dest: \(error.message); set dest", at: node, key: key)
        }
        return nil
    }

    /// False after a diagnostic for each `${NAME}` in a `dest`. A dest is not expanded: it is
    /// printed in output, reports and the state store, where no variable's value may appear.
    /// Taken as written, though, `${NAME}` would become a directory of that name (or, were it
    /// expanded to nothing, another path), so it is refused, naming the variable.
    private mutating func destHasNoVariable(_ text: String, at node: YAMLNode, key: String) -> Bool {
        guard text.containsByte(.dollarSign) else { return true }
        let references = VariableExpansion(expanding: text, environment: [:]).referenced
        for name in references {
            report("dest does not expand ${\(name)}: a dest is printed in output, reports and the state store, where a variable's value must not appear; write the path itself",
                   at: node, key: key)
        }
        return references.isEmpty
    }

    /// Whether the last segment of the path of `url` (the text before any `?` or `#`) holds a
    /// `${`.
    /// Searched on the bytes in place: through `String.UTF8View` and `zip` it cost about 4,000
    /// instructions an entry.
    private static func fileNameHasVariable(_ url: String) -> Bool {
        var url = url
        return url.withUTF8 { url in
            // `url` passed URLRules.check, so it starts with its scheme, not with `?` or `#`.
            // The path ends at the query or the fragment, whichever comes first.
            let path = url.firstIndex { $0 == .questionMark || $0 == UInt8(ascii: "#") }.map { url[..<$0] } ?? url[...]
            let fileName = path.lastIndex(of: .slash).map { path[($0 + 1)...] } ?? path
            var index = fileName.startIndex
            while index + 1 < fileName.endIndex {
                if fileName[index] == .dollarSign, fileName[index + 1] == .openingBrace { return true }
                index += 1
            }
            return false
        }
    }
}
