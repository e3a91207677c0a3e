import Glibc

/// What `--help` lays out itself rather than leave to the argument parser, and the width it
/// is laid out for.
///
/// The parser wraps a command's discussion as plain text, at the first space that fits: an
/// indented table in it (the EXIT STATUS codes) lost its indentation on every wrapped line, and
/// a line break written into the source fell wherever the width put it. The table is laid out
/// here for the width the help is printed at, each line short enough that the parser leaves it
/// as it is.
enum HelpText {
    /// The width `--help` is laid out for: `COLUMNS`, else the width of the terminal on stdout
    /// (where the help goes), else 80. Never below `narrowest`: the parser cannot lay out its
    /// option list in fewer columns.
    static func columns() -> Int {
        if let columns = Terminal.columnsVariable() { return max(columns, narrowest) }
        var size = winsize()
        if ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 {
            return max(Int(size.ws_col), narrowest)
        }
        return 80
    }

    /// The narrowest help laid out: the parser indents an option's text by 26 columns.
    static let narrowest = 40

    /// The indentation of a list's terms; the text starts two columns after the widest.
    private static let termColumn = 2

    /// `rows` as an indented list, term and text: every line begins with a term or continues
    /// the text above it, under that text. Lines are at most `width - 1` columns (the most the
    /// parser's own wrapping leaves on a line, so it breaks none of these again); a single word
    /// longer than that stays whole.
    static func list(_ rows: [(term: String, text: String)], width: Int) -> String {
        let textColumn = termColumn + (rows.map(\.term.count).max() ?? 0) + 2
        let room = max(1, width - 1 - textColumn)
        var lines: [String] = []
        for row in rows {
            let lead = String(repeating: " ", count: termColumn) + row.term
            let pad = String(repeating: " ", count: textColumn)
            for (index, line) in wrapped(row.text, to: room).enumerated() {
                lines.append((index == 0 ? lead + String(repeating: " ", count: textColumn - lead.count) : pad) + line)
            }
        }
        return lines.joined(separator: "\n")
    }

    /// `text`'s words in lines of at most `width` characters; a longer word has a line of its own.
    static func wrapped(_ text: String, to width: Int) -> [String] {
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ") {
            if line.isEmpty {
                line = String(word)
            } else if line.count + 1 + word.count <= width {
                line += " " + word
            } else {
                lines.append(line)
                line = String(word)
            }
        }
        if !line.isEmpty || lines.isEmpty { lines.append(line) }
        return lines
    }

    /// The EXIT STATUS section of `mirror --help`, for `width` columns.
    static func exitStatus(width: Int) -> String {
        "EXIT STATUS\n" + list(ExitStatus.allCases.map { (String($0.rawValue), $0.meaning) }, width: width)
    }
}
