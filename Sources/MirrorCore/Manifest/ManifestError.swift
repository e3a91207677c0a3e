/// Everything wrong with a manifest, in file order. Thrown by `ManifestLoader`.
///
/// The loader keeps going after a problem wherever the rest of the file still makes sense, so one
/// run reports every mistake it can find rather than only the first.
public struct ManifestError: Error, CustomStringConvertible, Sendable {
    public var diagnostics: [ManifestDiagnostic]

    public init(diagnostics: [ManifestDiagnostic]) {
        self.diagnostics = diagnostics
    }

    init(_ diagnostic: ManifestDiagnostic) {
        self.diagnostics = [diagnostic]
    }

    /// One diagnostic per line, without a trailing newline.
    public var description: String {
        diagnostics.map(\.description).joined(separator: "\n")
    }

    /// The manifest file at `path` read a second time was not what the first reading read.
    static func changedWhileRead(_ path: String) -> ManifestError {
        ManifestError(ManifestDiagnostic(
            location: nil, key: nil,
            message: "\(path) changed while it was read: its entries are not the ones checked; run the command again"))
    }
}

/// One problem in a manifest: where it is, which key it concerns, and what to do about it.
///
/// Messages never contain the value of a `${VAR}` or URL userinfo.
public struct ManifestDiagnostic: Sendable, CustomStringConvertible, Equatable {
    /// Where the problem is; `nil` only when the problem is not in the file: it could not be
    /// read at all, or the command line's root override is empty.
    public var location: SourceLocation?
    /// The path to the key concerned, like `files[2].sha256` or `defaults.timeout`. Sequence
    /// indices count from 0. `nil` when the problem is not about one key (a YAML syntax error).
    public var key: String?
    /// What was found and what is expected.
    public var message: String

    public init(location: SourceLocation?, key: String?, message: String) {
        self.location = location
        self.key = key
        self.message = message
    }

    /// `assets.yaml:12:5: files[2].sha256: expected 64 hexadecimal digits, found 63 characters`
    public var description: String {
        var parts: [String] = []
        if let location { parts.append(location.description) }
        if let key, !key.isEmpty { parts.append(key) }
        parts.append(message)
        return parts.joined(separator: ": ")
    }
}

extension [ManifestDiagnostic] {
    /// Sorted by position in the file; diagnostics at the same place keep the order they were found in.
    func inFileOrder() -> [ManifestDiagnostic] {
        enumerated().sorted { a, b in
            let left = (a.element.location?.line ?? 0, a.element.location?.column ?? 0, a.offset)
            let right = (b.element.location?.line ?? 0, b.element.location?.column ?? 0, b.offset)
            return left < right
        }.map(\.element)
    }
}
