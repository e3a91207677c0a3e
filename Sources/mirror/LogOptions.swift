import ArgumentParser

/// How `sync` writes its lines for logs: `--log-format` and `--log-timestamps`.
struct LogOptions: ParsableArguments {
    enum Format: String, ExpressibleByArgument, CaseIterable {
        /// Lines for people, as on a terminal.
        case text
        /// One JSON object per line on stderr, for journald and log shippers.
        case json

        // What swift-argument-parser would derive (the raw values, no descriptions), spelled
        // out: its own go through a key path and generic interpolation, whose first use makes
        // the Swift runtime look up types and conformances on every command line's parse.
        static var allValueStrings: [String] { allCases.map { $0.rawValue } }
        static var allValueDescriptions: [String: String] { [:] }
        var defaultValueDescription: String { rawValue }
    }

    @Option(name: .long, help: ArgumentHelp(
        "text, or json: one JSON object per event on stderr (entry started, retrying, waiting for a host, fallback, finished, failed), each with an RFC 3339 UTC time; stdout then carries only the --json report.",
        valueName: "format"))
    var logFormat: Format = .text

    @Flag(name: .long, help: "Begin every text line with its RFC 3339 UTC time (2026-01-31T08:00:00.000Z), for logs kept without journald.")
    var logTimestamps = false

    func validate() throws {
        if logTimestamps && logFormat == .json {
            throw ValidationError("--log-timestamps is for --log-format text; every JSON line has its \"time\" already")
        }
    }

    var style: Console.LogStyle {
        switch logFormat {
        case .text: .text(timestamps: logTimestamps)
        case .json: .json
        }
    }
}
