/// Text made safe for a terminal, and measured the way a terminal lays it out.
///
/// Servers control some of what `mirror` prints (ETags, reason phrases, redirect targets, file
/// names in URLs). Written raw, an escape sequence among them would move the cursor, retitle
/// the window or rewrite what is on screen; so every line `Console` writes passes through
/// `escaped` first.
enum TerminalText {
    /// `text` with every control character (C0, DEL, C1, and the bidirectional overrides that
    /// reorder what follows them) replaced by a visible `\xHH` or `\u{HHHH}`. Printable text is
    /// unchanged, so escaping twice is the same as escaping once.
    static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var output = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if isControl(scalar) {
                output.append(contentsOf: visible(scalar).unicodeScalars)
            } else {
                output.append(scalar)
            }
        }
        return String(output)
    }

    /// Escapes each line of `text` on its own, keeping the line breaks between them.
    static func escapedLines(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        return text.split(separator: "\n", omittingEmptySubsequences: false).map { escaped(String($0)) }.joined(separator: "\n")
    }

    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F: return true
        // Bidirectional embeddings, overrides and isolates.
        case 0x202A...0x202E, 0x2066...0x2069: return true
        default: return false
        }
    }

    private static func visible(_ scalar: Unicode.Scalar) -> String {
        let hex = String(scalar.value, radix: 16, uppercase: true)
        if scalar.value <= 0xFF {
            return "\\x" + (hex.count < 2 ? "0" : "") + hex
        }
        return "\\u{" + hex + "}"
    }

    /// The columns `text` takes on a terminal: two for East Asian wide and emoji characters,
    /// none for combining marks, one for the rest. `text` must hold no control characters.
    static func columns(_ text: String) -> Int {
        var total = 0
        for character in text {
            total += columns(character)
        }
        return total
    }

    static func columns(_ character: Character) -> Int {
        guard let first = character.unicodeScalars.first else { return 0 }
        if first.value < 0x300 { return 1 }
        if isWide(first) || character.unicodeScalars.contains(where: { $0.properties.isEmojiPresentation }) { return 2 }
        // A combining mark on its own (no base character) takes no column.
        if first.properties.generalCategory == .nonspacingMark || first.properties.generalCategory == .enclosingMark { return 0 }
        return 1
    }

    private static func isWide(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF,
             0xA000...0xA4CF, 0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE30...0xFE4F, 0xFF00...0xFF60,
             0xFFE0...0xFFE6, 0x20000...0x2FFFD, 0x30000...0x3FFFD:
            return true
        default:
            return false
        }
    }

    /// `text` cut to at most `width` columns, keeping its start.
    static func prefix(_ text: String, columns width: Int) -> String {
        var result = ""
        var used = 0
        for character in text {
            let needed = columns(character)
            if used + needed > width { break }
            result.append(character)
            used += needed
        }
        return result
    }

    /// `text` cut to at most `width` columns by dropping its middle: both ends of a path
    /// (the directory it starts in, the file name it ends with) say the most.
    static func middleCut(_ text: String, columns width: Int) -> String {
        guard columns(text) > width else { return text }
        let marker = "..."
        guard width > marker.count + 1 else { return prefix(text, columns: width) }
        let room = width - marker.count
        let head = prefix(text, columns: room / 3)
        var tail: [Character] = []
        var used = columns(head)
        for character in text.reversed() {
            let needed = columns(character)
            if used + needed > room { break }
            tail.append(character)
            used += needed
        }
        return head + marker + String(tail.reversed())
    }
}
