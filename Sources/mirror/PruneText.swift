import MirrorCore

/// How a prune is shown: lines for people, an object for `--json`.
enum PruneText {
    /// One line per file deleted and per directory removed (results, on stdout); what was kept
    /// and why (notices); what could not be deleted, or why nothing was (always shown).
    static func report(_ outcome: PruneOutcome, to console: Console) {
        for path in outcome.deleted { console.line("deleted \(TerminalText.escaped(path))") }
        for directory in outcome.removedDirectories { console.line("deleted empty directory \(TerminalText.escaped(directory))/") }
        for kept in outcome.plan.kept { console.notice("mirror: prune: kept \(TerminalText.escaped(kept.path)): \(TerminalText.escaped(kept.reason))") }
        for failure in outcome.failures { console.error("mirror: prune: not deleted \(TerminalText.escaped(failure.path)): \(TerminalText.escaped(failure.reason))") }
        if let refusal = outcome.refusal { console.error("mirror: prune: \(TerminalText.escaped(refusal))") }
    }

    /// `sync --json`'s `prune` member.
    static func json(_ outcome: PruneOutcome) -> JSONValue {
        .object([
            ("deleted", .array(outcome.deleted.map { .string($0) })),
            ("deleted_directories", .array(outcome.removedDirectories.map { .string($0) })),
            ("kept", keptJSON(outcome.plan.kept)),
            ("not_deleted", keptJSON(outcome.failures)),
            ("records_removed", .int(outcome.recordsRemoved)),
            ("refused", .string(outcome.refusal)),
        ])
    }

    static func keptJSON(_ kept: [PrunePlan.Kept]) -> JSONValue {
        .array(kept.map { .object([("path", .string($0.path)), ("reason", .string($0.reason))]) })
    }
}
