/// What a VT100-style terminal of a given width shows after receiving some output: enough of
/// one to check that a program redraws its lines in place (CR, LF, cursor up `ESC[nA`, erase
/// `ESC[J` and `ESC[K`, and the automatic wrap of a line wider than the screen). Rows scroll
/// off the top into an unbounded history, as a terminal's scrollback keeps them.
struct TerminalScreen {
    struct Unsupported: Error, CustomStringConvertible {
        var sequence: String
        var description: String { "the terminal model does not know \(sequence)" }
    }

    let columns: Int
    let rows: Int
    private(set) var lines: [[Character]] = [[]]
    private var row = 0
    private var column = 0
    /// The cursor is past the last column: the next character wraps to a new row.
    private var pendingWrap = false

    init(columns: Int, rows: Int = 24) {
        self.columns = columns
        self.rows = rows
    }

    /// The rows with anything on them, trailing blanks removed.
    var text: [String] {
        lines.map { String($0).replacingTrailingSpaces() }.filter { !$0.isEmpty }
    }

    mutating func receive(_ output: String) throws {
        var scalars = Array(output.unicodeScalars)[...]
        while let scalar = scalars.popFirst() {
            switch scalar {
            case "\r":
                column = 0
                pendingWrap = false
            case "\n":
                moveDown()
            case "\u{1B}":
                guard scalars.popFirst() == "[" else { throw Unsupported(sequence: "ESC without [") }
                var parameter = ""
                while let next = scalars.first, next.properties.numericType != nil || next == ";" {
                    parameter.unicodeScalars.append(next)
                    scalars.removeFirst()
                }
                guard let final = scalars.popFirst() else { throw Unsupported(sequence: "a cut escape sequence") }
                try control(final, parameter: parameter)
            default:
                guard scalar.value >= 0x20 && scalar.value != 0x7F else {
                    throw Unsupported(sequence: "control character \(scalar.value)")
                }
                put(Character(scalar))
            }
        }
    }

    private mutating func control(_ final: Unicode.Scalar, parameter: String) throws {
        switch final {
        case "A":
            let count = Int(parameter) ?? 1
            // The cursor stops at the top of the visible screen.
            let top = max(0, lines.count - rows)
            row = max(top, row - count)
            pendingWrap = false
        case "K":
            guard parameter.isEmpty || parameter == "0" else { throw Unsupported(sequence: "ESC[\(parameter)K") }
            if lines[row].count > column { lines[row].removeSubrange(column...) }
        case "J":
            guard parameter.isEmpty || parameter == "0" else { throw Unsupported(sequence: "ESC[\(parameter)J") }
            if lines[row].count > column { lines[row].removeSubrange(column...) }
            lines.removeSubrange((row + 1)...)
        default:
            throw Unsupported(sequence: "ESC[\(parameter)\(final)")
        }
    }

    private mutating func put(_ character: Character) {
        if pendingWrap {
            moveDown()
            column = 0
            pendingWrap = false
        }
        while lines[row].count < column { lines[row].append(" ") }
        if column < lines[row].count {
            lines[row][column] = character
        } else {
            lines[row].append(character)
        }
        column += 1
        if column == columns {
            column = columns - 1
            pendingWrap = true
        }
    }

    private mutating func moveDown() {
        row += 1
        pendingWrap = false
        if row == lines.count { lines.append([]) }
    }
}

private extension String {
    func replacingTrailingSpaces() -> String {
        var text = self
        while text.last == " " { text.removeLast() }
        return text
    }
}
