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

    private static let space = UInt8(ascii: " ")

    /// `rows` as an indented list, term and text: every line begins with a term or continues
    /// the text above it, under that text. Lines are at most `width - 1` columns (the most the
    /// parser's own wrapping leaves on a line, so it breaks none of these again); a single word
    /// longer than that stays whole.
    ///
    /// Built on UTF-8 bytes, a column per Unicode scalar (the texts are ASCII): the list is
    /// laid out on every start, since the parser's configuration holds it, and Characters,
    /// `split` and `enumerated` there cost the start-up more than the rest of `--version`.
    static func list(_ rows: [(term: String, text: String)], width: Int) -> String {
        var widest = 0
        for row in rows { widest = max(widest, columns(row.term.utf8)) }
        let textColumn = termColumn + widest + 2
        let room = max(1, width - 1 - textColumn)
        var out: [UInt8] = []
        var first = true
        for row in rows {
            let lines = wrapped(Array(row.text.utf8), to: room)
            for index in lines.indices {
                if !first { out.append(UInt8(ascii: "\n")) }
                first = false
                if index == 0 {
                    out.append(contentsOf: repeatElement(space, count: termColumn))
                    out.append(contentsOf: row.term.utf8)
                    out.append(contentsOf: repeatElement(space, count: textColumn - termColumn - columns(row.term.utf8)))
                } else {
                    out.append(contentsOf: repeatElement(space, count: textColumn))
                }
                out.append(contentsOf: lines[index])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `text`'s words (separated by spaces) in lines of at most `width` columns; a longer word
    /// has a line of its own.
    private static func wrapped(_ text: [UInt8], to width: Int) -> [ArraySlice<UInt8>] {
        var lines: [ArraySlice<UInt8>] = []
        var lineStart = -1, lineEnd = -1, lineColumns = 0
        var index = 0
        while index < text.count {
            if text[index] == space {
                index += 1
                continue
            }
            var end = index
            while end < text.count, text[end] != space { end += 1 }
            let wordColumns = columns(text[index..<end])
            if lineStart < 0 {
                lineStart = index
                lineColumns = wordColumns
            } else if lineColumns + 1 + wordColumns <= width {
                lineColumns += 1 + wordColumns
            } else {
                lines.append(text[lineStart..<lineEnd])
                lineStart = index
                lineColumns = wordColumns
            }
            lineEnd = end
            index = end
        }
        if lineStart >= 0 || lines.isEmpty { lines.append(lineStart >= 0 ? text[lineStart..<lineEnd] : []) }
        return lines
    }

    /// The columns `text` takes: one per Unicode scalar (a byte that does not continue one).
    private static func columns(_ text: some Sequence<UInt8>) -> Int {
        var count = 0
        for byte in text where byte & 0xC0 != 0x80 { count += 1 }
        return count
    }

    /// The EXIT STATUS section of `mirror --help`, for `width` columns.
    static func exitStatus(width: Int) -> String {
        var rows: [(term: String, text: String)] = []
        for status in ExitStatus.allCases { rows.append((String(status.rawValue), status.meaning)) }
        return "EXIT STATUS\n" + list(rows, width: width)
    }
}
