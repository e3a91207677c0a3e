/// `rewrite:`, in a manifest or in the file `MIRROR_REWRITE` names.
extension ManifestDecoder {
    /// The rules of a `rewrite` sequence: each `from` a URL prefix, `to` one or more
    /// replacements, `only` and `headers` optional.
    mutating func decodeRewriteRules(_ node: YAMLNode, key: String, allowFile: Bool) -> [RewriteRule] {
        guard case .sequence(let items) = node.content else {
            report("expected a sequence of rules, each `- from: https://…` with `to: https://…`, found \(node.summary)", at: node, key: key)
            return []
        }
        var rules: [RewriteRule] = []
        // Keyed by the prefix's bytes: `https://h` and `https://h/` are one prefix.
        var lineOfPrefix: [[UInt8]: Int] = [:]
        for (index, item) in items.enumerated() {
            let path = "\(key)[\(index)]"
            guard let mapping = checkedMapping(item, path: path, section: .rewrite, expected: "a rule mapping with `from` and `to`") else { continue }
            let countBefore = diagnostics.count
            var from: (prefix: URLPrefix, display: String, written: String)?
            if let node = mapping["from"] {
                from = rewritePrefix(node, key: mapping.path(of: "from"), role: .download(allowFile: allowFile))
            } else {
                report("missing required key `from`, the URL prefix the rule replaces", at: item, key: path)
            }
            var targets: [(url: RemoteURL, node: YAMLNode, key: String)] = []
            if let node = mapping["to"] {
                let toKey = mapping.path(of: "to")
                var nodes: [(YAMLNode, String)] = []
                if case .sequence(let list) = node.content {
                    if list.isEmpty { report("expected at least one replacement URL", at: node, key: toKey) }
                    nodes = list.enumerated().map { ($1, "\(toKey)[\($0)]") }
                } else {
                    nodes = [(node, toKey)]
                }
                for (target, targetKey) in nodes {
                    guard let url = remoteURL(target, key: targetKey, role: .download(allowFile: allowFile)) else { continue }
                    if url.remote.string.contains("?") || url.remote.string.contains("#") {
                        report("`to` is a prefix the rest of each URL is appended to: it cannot hold a query (`?`) or fragment (`#`)", at: target, key: targetKey)
                        continue
                    }
                    targets.append((url.remote, target, targetKey))
                }
            } else {
                report("missing required key `to`, the replacement URL prefix (or a list of them)", at: item, key: path)
            }
            let only = mapping["only"].flatMap { boolean($0, key: mapping.path(of: "only")) } ?? false
            let headers = mapping["headers"].flatMap { self.headers($0, key: mapping.path(of: "headers")) } ?? []
            if let from {
                // `from` with no path covers the whole host, as `from` ending with `/` does: its
                // replacements are read as ending with `/` too.
                if from.prefix.pathWasEmpty {
                    targets = targets.map { target in
                        guard !target.url.string.hasSuffix("/") else { return target }
                        return (RemoteURL(string: target.url.string + "/", written: target.url.written + "/", login: target.url.login), target.node, target.key)
                    }
                }
                for target in targets {
                    guard target.url.string.hasSuffix("/") != from.prefix.endsWithSlash else { continue }
                    let (with, without) = from.prefix.endsWithSlash ? ("from", "to") : ("to", "from")
                    report("`\(with)` ends with `/` and `\(without)` does not: the rest of each URL is appended to `to` as it follows `from`, so both end with `/` or neither does",
                           at: target.node, key: target.key)
                }
                if let line = lineOfPrefix[from.prefix.key], let node = mapping["from"] {
                    report("a rule for `\(from.display)` is already set at line \(line); list its replacements in one `to`", at: node, key: mapping.path(of: "from"))
                }
            }
            guard diagnostics.count == countBefore, let from, !targets.isEmpty else { continue }
            lineOfPrefix[from.prefix.key] = mapping["from"]?.line
            rules.append(RewriteRule(
                from: from.prefix, fromDisplay: from.display, fromWritten: from.written, to: targets.map(\.url), only: only, headers: headers,
                location: location(of: item)))
        }
        return rules
    }

    /// A rule's `from`: a URL with no userinfo, query or fragment, split where rules compare.
    private mutating func rewritePrefix(_ node: YAMLNode, key: String, role: URLRules.Role) -> (prefix: URLPrefix, display: String, written: String)? {
        guard let url = remoteURL(node, key: key, role: role) else { return nil }
        let components = url.components
        if components.user != nil || components.password != nil {
            report("`from` names a user: a rule matches URLs whatever login they carry, and a login never goes to a replacement; remove it", at: node, key: key)
            return nil
        }
        if url.remote.string.contains("?") || url.remote.string.contains("#") {
            report("`from` is a prefix of URLs' paths: it cannot hold a query (`?`) or fragment (`#`)", at: node, key: key)
            return nil
        }
        guard let prefix = URLPrefix(url.remote.string) else {
            report("`from` must start with a scheme and `://`, like `https://example.org/`", at: node, key: key)
            return nil
        }
        return (prefix, url.display, url.remote.written)
    }

    /// The rules of the file `MIRROR_REWRITE` names (a site's policy, read before a manifest's
    /// own), or none when it is unset or empty. Problems name that file.
    static func siteRewriteRules(
        environment: [String: String], rootResolution: RootResolution, netrc: Netrc?
    ) -> (rules: [RewriteRule], problems: [ManifestDiagnostic]) {
        guard let path = environment["MIRROR_REWRITE"], !path.isEmpty else { return ([], []) }
        let absolute = LexicalPath.absolute(path, relativeTo: rootResolution.currentDirectory)
        let bytes: [UInt8]
        do {
            bytes = try WholeFile.read(path: absolute, limit: 16 << 20)
        } catch {
            let reason = error == .tooLarge ? "it is larger than 16 MiB" : error.description
            return ([], [ManifestDiagnostic(location: nil, key: "MIRROR_REWRITE", message: "cannot read the rewrite rules `\(path)` that MIRROR_REWRITE names: \(reason)")])
        }
        var decoder = ManifestDecoder(file: path, environment: environment, rootResolution: rootResolution, netrc: netrc)
        let root: YAMLNode?
        do {
            root = try YAMLDocumentParser.parse(bytes, file: path)
        } catch {
            return ([], error.diagnostics)
        }
        guard let root, let top = decoder.checkedMapping(root, path: "", section: .rewriteFile, expected: "a mapping with `rewrite:`") else {
            if root == nil { return ([], [ManifestDiagnostic(location: nil, key: "MIRROR_REWRITE", message: "the rewrite rules `\(path)` that MIRROR_REWRITE names are empty; write `rewrite:` and its rules")]) }
            return ([], decoder.diagnostics)
        }
        guard let node = top["rewrite"] else {
            decoder.report("missing required key `rewrite`, the list of rules", at: root, key: nil)
            return ([], decoder.diagnostics)
        }
        // A site's rules may name file URLs: whether a manifest allows them is its own
        // `allow_file`, checked when a rule rewrites one of its URLs.
        let rules = decoder.decodeRewriteRules(node, key: "rewrite", allowFile: true)
        return (rules, decoder.diagnostics)
    }
}
