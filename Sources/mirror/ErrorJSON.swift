import MirrorCore

/// The one object `--json` puts on stdout when a command cannot run at all, so a script that
/// reads stdout always gets a document: `{"error": {"kind": …, "message": …, …}}`.
enum ErrorJSON {
    /// A manifest that cannot be used: every problem, with where it is and which key.
    static func manifest(_ diagnostics: [ManifestDiagnostic]) -> String {
        let problems = diagnostics.map { diagnostic -> JSONValue in
            .object([
                ("file", .string(diagnostic.location?.file)),
                ("line", .int(diagnostic.location.map { Int64($0.line) })),
                ("column", .int(diagnostic.location.map { Int64($0.column) })),
                ("key", .string(diagnostic.key)),
                ("message", .string(diagnostic.message)),
            ])
        }
        return document(kind: "manifest", message: diagnostics.map(\.description).joined(separator: "\n"),
                        extra: [("diagnostics", .array(problems))])
    }

    /// Any other reason the command stopped before its work (the run lock, for one).
    static func document(kind: String, message: String, extra: [(String, JSONValue)] = []) -> String {
        JSONValue.object([("error", .object([("kind", .string(kind)), ("message", .string(message))] + extra))]).text
    }
}
