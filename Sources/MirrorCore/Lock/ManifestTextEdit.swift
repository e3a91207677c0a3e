/// A change to a manifest's text, placed by libyaml's character offsets (`YAMLNode.characterRange`).
///
/// The offsets are turned into byte offsets by counting Unicode scalars exactly as libyaml
/// does, so no line model of its own can drift from libyaml's: a NEL, LS or PS in a comment or
/// a lone CR moves nothing.
enum ManifestTextEdit {
    /// Replaces the text of a value. Blanks and line breaks at the end of the range (where a
    /// block scalar ends) are kept; an empty range (a null value) gets a space before the text.
    case replace(Range<Int>, with: String)
    /// Adds lines, each indented by `indentation` spaces, after the line on which content ending
    /// at `afterContentEndingAt` ends (past any comment). They end with that line's own line
    /// break (CR LF, LF or CR); when it has none of those, with the file's first such break,
    /// or LF in a file without one.
    case insertLines([String], indentation: Int, afterContentEndingAt: Int)

    /// `bytes` with `edits` made. Edits must not overlap.
    static func apply(_ edits: [ManifestTextEdit], to bytes: [UInt8]) -> [UInt8] {
        var offsets: [Int] = []
        for edit in edits {
            switch edit {
            case .replace(let range, _): offsets += [range.lowerBound, range.upperBound]
            case .insertLines(_, _, let offset): offsets.append(offset)
            }
        }
        let byteOffset = byteOffsets(of: offsets, in: bytes)
        var splices: [(range: Range<Int>, bytes: [UInt8])] = []
        for edit in edits {
            switch edit {
            case .replace(let range, let text):
                let start = byteOffset[range.lowerBound]!
                let end = max(start, contentEnd(before: byteOffset[range.upperBound]!, in: bytes))
                splices.append((start..<end, Array(((start == end ? " " : "") + text).utf8)))
            case .insertLines(let lines, let indentation, let offset):
                let place = lineEnd(after: contentEnd(before: byteOffset[offset]!, in: bytes), in: bytes)
                let lineBreak = place.lineBreak ?? firstCommonLineBreak(in: bytes)
                var inserted = place.needsLineBreakFirst ? lineBreak : []
                for line in lines {
                    inserted += Array(repeating: UInt8(ascii: " "), count: indentation) + Array(line.utf8) + lineBreak
                }
                splices.append((place.offset..<place.offset, inserted))
            }
        }

        var result: [UInt8] = []
        result.reserveCapacity(bytes.count + splices.reduce(0) { $0 + $1.bytes.count })
        var copied = 0
        for splice in splices.sorted(by: { ($0.range.lowerBound, $0.range.upperBound) < ($1.range.lowerBound, $1.range.upperBound) }) {
            precondition(splice.range.lowerBound >= copied, "overlapping edits of the manifest text")
            result += bytes[copied..<splice.range.lowerBound]
            result += splice.bytes
            copied = splice.range.upperBound
        }
        result += bytes[copied...]
        return result
    }

    /// The byte offset of each character offset, in one pass over the text. libyaml counts
    /// from after a UTF-8 byte order mark, and counts each Unicode scalar (CR LF as two).
    private static func byteOffsets(of characterOffsets: [Int], in bytes: [UInt8]) -> [Int: Int] {
        var wanted = characterOffsets.sorted()[...]
        var found: [Int: Int] = [:]
        var character = 0
        var index = bytes.starts(with: YAMLLineBreak.byteOrderMark) ? YAMLLineBreak.byteOrderMark.count : 0
        while let next = wanted.first {
            while index < bytes.count, !YAMLLineBreak.startsCharacter(bytes[index]) { index += 1 }
            if next == character || index == bytes.count {
                found[next] = index
                wanted.removeFirst()
                continue
            }
            character += 1
            index += 1
        }
        return found
    }

    /// Where the content before `offset` ends: back over blanks and line breaks.
    private static func contentEnd(before offset: Int, in bytes: [UInt8]) -> Int {
        var end = offset
        while end > 0 {
            let last = bytes[end - 1]
            if last == UInt8(ascii: " ") || last == UInt8(ascii: "\t") || last == UInt8(ascii: "\n") || last == UInt8(ascii: "\r") {
                end -= 1
            } else if end >= 2, YAMLLineBreak.length(in: bytes, at: end - 2) == 2, bytes[end - 2] == 0xC2 {
                end -= 2  // NEL
            } else if end >= 3, YAMLLineBreak.length(in: bytes, at: end - 3) == 3 {
                end -= 3  // LS, PS
            } else {
                break
            }
        }
        return end
    }

    /// Where new lines go after content ending at `offset`: past the rest of its line (blanks
    /// and a comment) and the line break every editor sees (CR LF, LF, CR). A NEL, LS or PS
    /// followed only by blanks or a comment is passed over too, so the new lines do not look
    /// like part of a comment in an editor that does not break lines there; one followed by
    /// more YAML is where the line ends.
    private static func lineEnd(after offset: Int, in bytes: [UInt8]) -> (offset: Int, lineBreak: [UInt8]?, needsLineBreakFirst: Bool) {
        var index = offset
        var afterYAMLOnlyBreak: Int?
        while true {
            while index < bytes.count, bytes[index] == UInt8(ascii: " ") || bytes[index] == UInt8(ascii: "\t") { index += 1 }
            if index < bytes.count, bytes[index] == UInt8(ascii: "#") {
                while index < bytes.count, YAMLLineBreak.length(in: bytes, at: index) == nil { index += 1 }
            }
            guard index < bytes.count else {
                return (bytes.count, nil, true)
            }
            guard let length = YAMLLineBreak.length(in: bytes, at: index) else {
                return (afterYAMLOnlyBreak ?? index, nil, afterYAMLOnlyBreak == nil)
            }
            if YAMLLineBreak.isCommon(in: bytes, at: index) {
                return (index + length, Array(bytes[index..<index + length]), false)
            }
            index += length
            afterYAMLOnlyBreak = afterYAMLOnlyBreak ?? index
        }
    }

    private static func firstCommonLineBreak(in bytes: [UInt8]) -> [UInt8] {
        guard let index = bytes.firstIndex(where: { $0 == UInt8(ascii: "\r") || $0 == UInt8(ascii: "\n") }) else {
            return Array("\n".utf8)
        }
        return Array(bytes[index..<index + YAMLLineBreak.length(in: bytes, at: index)!])
    }
}
