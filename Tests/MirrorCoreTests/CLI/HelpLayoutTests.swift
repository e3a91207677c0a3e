import Foundation
import Testing
@testable import mirror

/// `mirror --help` and every command's `--help`, rendered by the built binary at the widths a
/// person's terminal has (`COLUMNS`): every line fits, the EXIT STATUS list keeps its layout, and
/// the help says where the manifest format is described.
struct HelpLayoutTests {
    static let commands: [[String]] = [[], ["plan"], ["sync"], ["verify"], ["lock"], ["report"]]
    static let exitCodes = ExitStatus.allCases.map { String($0.rawValue) }

    static func help(_ command: [String], columns: Int) throws -> String {
        let directory = try TemporaryDirectory(prefix: "mirror-help")
        let result = try MirrorBinary.run(command + ["--help"], in: directory.path, environment: ["COLUMNS": String(columns)])
        try #require(result.status == 0 && result.stderr.isEmpty, "\(result)")
        return result.stdout
    }

    /// No line is wider than the terminal. The one exception the layout allows is a line of a
    /// single word (a path or URL longer than the room left): it cannot be broken anywhere.
    @Test(arguments: [60, 80, 100, 120])
    func everyHelpLineFitsTheTerminal(_ columns: Int) throws {
        for command in Self.commands {
            for line in try Self.help(command, columns: columns).split(separator: "\n", omittingEmptySubsequences: false) {
                let unbreakable = !line.trimmingCharacters(in: .whitespaces).contains(" ")
                #expect(line.count <= columns || unbreakable,
                        "mirror \(command.joined(separator: " ")) --help at \(columns) columns: \(line.count) characters: \(line)")
            }
        }
    }

    /// The USAGE line of each command is short (the parser does not wrap it): no wider than the
    /// narrowest terminal tested.
    @Test func everyUsageLineIsShort() throws {
        for command in Self.commands {
            let usage = try Self.help(command, columns: 80).split(separator: "\n").filter { $0.hasPrefix("USAGE:") }
            #expect(usage.count == 1, "\(command): \(usage)")
            for line in usage {
                #expect(line.count <= 60, "\(line.count) characters: \(line)")
            }
        }
    }

    /// Each line of the EXIT STATUS list begins with a code, or continues the text of the code
    /// above it, indented under that text; every code is there once.
    @Test(arguments: [40, 60, 80, 100, 120, 200])
    func exitStatusLinesStartWithTheirCode(_ columns: Int) throws {
        let text = try Self.help([], columns: columns)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let start = try #require(lines.firstIndex(of: "EXIT STATUS"), "\(text)")
        let section = lines[(start + 1)...].prefix { !$0.isEmpty }
        var codes: [String] = []
        var textColumn: Int?
        for line in section {
            let code = line.drop { $0 == " " }.prefix { $0.isNumber }
            if !code.isEmpty {
                #expect(line.hasPrefix("  \(code) "), "a code line: \(line)")
                codes.append(String(code))
                let column = line.count - line.dropFirst(2 + code.count).drop(while: { $0 == " " }).count
                #expect(textColumn == nil || textColumn == column, "every code's text starts in one column: \(line)")
                textColumn = column
            } else {
                let column = textColumn ?? 0
                #expect(textColumn != nil, "text before any code: \(line)")
                #expect(line.prefix(column).allSatisfy { $0 == " " } && line.dropFirst(column).first != " ",
                        "a continuation sits under its code's text: \(line)")
            }
        }
        #expect(codes == Self.exitCodes, "at \(columns) columns:\n\(section.joined(separator: "\n"))")
    }

    /// Each of the parser's layouts has a minimum; a terminal narrower than that still gets the
    /// whole help (laid out for 40 columns), not a crash or an empty text.
    @Test func aVeryNarrowTerminalStillGetsTheHelp() throws {
        for command in Self.commands {
            let text = try Self.help(command, columns: 12)
            #expect(text.contains("USAGE: mirror"), "\(command): \(text)")
        }
        #expect(try Self.help([], columns: 12).contains("EXIT STATUS\n  0"))
    }

    /// Where the manifest format is described: in `mirror --help`, and beside the manifest
    /// argument of each command that reads one.
    @Test func helpNamesTheManifestManPage() throws {
        for command in Self.commands where command != ["report"] {
            let text = try Self.help(command, columns: 200)
            #expect(text.contains("man 5 mirror-manifest"), "mirror \(command.joined(separator: " ")) --help:\n\(text)")
        }
    }

    /// The list layout itself, at widths down to one column: a word longer than the room is the
    /// only thing a line may hold beyond it.
    @Test(arguments: [1, 10, 20, 33, 80])
    func aListWrapsUnderItsText(_ width: Int) {
        let rows = [("1", "short"), ("130", "a longer text of several words, some-of-them-long, that wraps")]
        let lines = HelpText.list(rows, width: width).split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("  1    short") == true, "\(lines)")
        #expect(lines.filter { $0.hasPrefix("  130  ") }.count == 1, "\(lines)")
        for line in lines {
            #expect(line.count <= max(width - 1, 7) || !line.dropFirst(7).contains(" "), "\(line)")
            #expect(line.hasPrefix("  1 ") || line.hasPrefix("  130 ") || line.hasPrefix("       "), "\(line)")
        }
        let words = lines.map { $0.dropFirst(7) }.joined(separator: " ").split(separator: " ")
        #expect(words == ("short " + rows[1].1).split(separator: " "), "no word lost or split")
    }
}
