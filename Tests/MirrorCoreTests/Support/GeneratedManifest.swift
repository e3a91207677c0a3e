/// A random manifest text for property tests of `mirror lock`: comments holding every line
/// break libyaml knows, CR LF / LF / CR line endings alone or mixed, block and flow entries,
/// entries already pinned (plain or quoted), nested mirrors and headers, repeats and aliases.
/// No `sha256:` or `size:` line carries a comment, so such lines can be told apart by text.
struct GeneratedManifest {
    enum LineEndings: CaseIterable {
        case lf, crlf, cr, mixed
    }

    private(set) var text = ""
    let lineEndings: LineEndings
    /// Whether an entry is one `mirror lock` must refuse: written in flow style, or an alias.
    private(set) var hasUneditableEntry = false

    init(using generator: inout SeededGenerator) {
        lineEndings = LineEndings.allCases.randomElement(using: &generator)!
        let sequenceIndent = [0, 2, 4].randomElement(using: &generator)!
        if Bool.random(using: &generator) { line(comment(&generator), &generator) }
        line("version: 1", &generator)
        if Bool.random(using: &generator) { line("concurrency: \(Int.random(in: 1...8, using: &generator))", &generator) }
        line("files:" + trailingComment(&generator), &generator)

        var urls: [String] = []
        var anchored: String?
        for index in 0..<Int.random(in: 1...5, using: &generator) {
            let pad = String(repeating: " ", count: sequenceIndent)
            let roll = Int.random(in: 0..<20, using: &generator)
            if roll == 0 {
                line(pad + "- {url: http://h/flow\(index).bin}", &generator)
                hasUneditableEntry = true
                continue
            }
            if roll == 1, let name = anchored {
                line(pad + "- *\(name)" + trailingComment(&generator), &generator)
                hasUneditableEntry = true
                continue
            }
            if roll == 2, let earlier = urls.randomElement(using: &generator) {
                line(pad + "- url: \(earlier)" + trailingComment(&generator), &generator)  // a repeat
                continue
            }
            let url = "http://h/f\(index).bin"
            urls.append(url)
            var keys = ["url: \(url)"]
            if Bool.random(using: &generator) { keys.append("retries: \(Int.random(in: 0...9, using: &generator))") }
            if Bool.random(using: &generator) { keys.append(quotedOrPlain("sha256: ", hex(&generator), &generator)) }
            if Bool.random(using: &generator) { keys.append("size: \(Int.random(in: 0...99_999, using: &generator))") }
            if Bool.random(using: &generator) { keys.append("mirrors: [http://m/f\(index).bin]") }
            keys.shuffle(using: &generator)
            let keyIndent = sequenceIndent + 2
            var first = true
            if anchored == nil, Int.random(in: 0..<4, using: &generator) == 0 {
                anchored = "e\(index)"
                line(pad + "- &e\(index)", &generator)
                first = false
            }
            for key in keys {
                let lead = first ? pad + "- " : String(repeating: " ", count: keyIndent)
                first = false
                let isPin = key.hasPrefix("sha256") || key.hasPrefix("size")
                line(lead + key + (isPin ? "" : trailingComment(&generator)), &generator)
                if Int.random(in: 0..<4, using: &generator) == 0 {
                    line(String(repeating: " ", count: Int.random(in: 0...keyIndent, using: &generator)) + comment(&generator), &generator)
                }
                if Int.random(in: 0..<8, using: &generator) == 0 { line("", &generator) }
            }
            switch Int.random(in: 0..<4, using: &generator) {
            case 0:
                line(String(repeating: " ", count: keyIndent) + "headers:" + trailingComment(&generator), &generator)
                line(String(repeating: " ", count: keyIndent + 2) + "X-A: \"1\"" + trailingComment(&generator), &generator)
            case 1:
                line(String(repeating: " ", count: keyIndent) + "dest: d\(index)/f\(index).bin", &generator)
            default:
                break
            }
        }
        if Bool.random(using: &generator) { line(comment(&generator), &generator) }
        if Int.random(in: 0..<4, using: &generator) == 0 {
            text.unicodeScalars.removeLast(text.hasSuffix("\r\n") ? 2 : 1)  // no final line break
        }
    }

    private mutating func line(_ content: String, _ generator: inout SeededGenerator) {
        text += content
        switch lineEndings {
        case .lf: text += "\n"
        case .crlf: text += "\r\n"
        case .cr: text += "\r"
        case .mixed: text += ["\n", "\r\n", "\r"].randomElement(using: &generator)!
        }
    }

    /// A comment; a line break inside it starts a new line to libyaml, so it is followed by
    /// blanks and another comment or by nothing. A lone CR only where lines may end in one.
    private func comment(_ generator: inout SeededGenerator) -> String {
        var breaks = ["\u{2028}", "\u{2029}", "\u{85}"]
        if lineEndings == .cr || lineEndings == .mixed { breaks.append("\r") }
        var comment = "#"
        for _ in 0..<Int.random(in: 0...3, using: &generator) {
            comment += [" note", " é", " url: http://x/", " - y"].randomElement(using: &generator)!
            if Bool.random(using: &generator) {
                comment += breaks.randomElement(using: &generator)!
                if Bool.random(using: &generator) { return comment }
                comment += String(repeating: " ", count: Int.random(in: 0...3, using: &generator)) + "#"
            }
        }
        return comment
    }

    private func trailingComment(_ generator: inout SeededGenerator) -> String {
        Bool.random(using: &generator) ? "  " + comment(&generator) : ""
    }

    private func quotedOrPlain(_ key: String, _ value: String, _ generator: inout SeededGenerator) -> String {
        key + (Bool.random(using: &generator) ? "\"\(value)\"" : value)
    }

    func hex(_ generator: inout SeededGenerator) -> String {
        String((0..<64).map { _ in "0123456789abcdef".randomElement(using: &generator)! })
    }
}
