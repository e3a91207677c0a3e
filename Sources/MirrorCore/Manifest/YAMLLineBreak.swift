/// The line breaks libyaml counts lines by (YAML 1.1), found in UTF-8 bytes: CR LF, LF, CR,
/// NEL (U+0085), LS (U+2028) and PS (U+2029).
///
/// Anything that turns libyaml's lines, columns or character offsets back into places in the
/// text must break lines exactly here, or it drifts from what libyaml reported: a comment
/// holding U+2028 is two lines to libyaml.
enum YAMLLineBreak {
    /// The UTF-8 byte order mark. libyaml skips it before counting anything.
    static let byteOrderMark: [UInt8] = [0xEF, 0xBB, 0xBF]

    /// The length in bytes of the line break that starts at `index`, or nil when none does.
    static func length<Bytes: RandomAccessCollection<UInt8>>(in bytes: Bytes, at index: Bytes.Index) -> Int? {
        guard index < bytes.endIndex else { return nil }
        func byte(_ offset: Int) -> UInt8? {
            let position = bytes.index(index, offsetBy: offset, limitedBy: bytes.endIndex) ?? bytes.endIndex
            return position < bytes.endIndex ? bytes[position] : nil
        }
        switch bytes[index] {
        case UInt8(ascii: "\r"): return byte(1) == UInt8(ascii: "\n") ? 2 : 1
        case UInt8(ascii: "\n"): return 1
        case 0xC2: return byte(1) == 0x85 ? 2 : nil
        case 0xE2: return byte(1) == 0x80 && (byte(2) == 0xA8 || byte(2) == 0xA9) ? 3 : nil
        default: return nil
        }
    }

    /// Whether the break at `index` is one that every editor also ends a line
    /// at (CR LF, LF or CR), rather than one only YAML 1.1 counts (NEL, LS, PS).
    static func isCommon<Bytes: RandomAccessCollection<UInt8>>(in bytes: Bytes, at index: Bytes.Index) -> Bool {
        bytes[index] == UInt8(ascii: "\r") || bytes[index] == UInt8(ascii: "\n")
    }

    /// Whether `byte` starts a character in UTF-8, rather than continuing one.
    static func startsCharacter(_ byte: UInt8) -> Bool {
        byte & 0b1100_0000 != 0b1000_0000
    }
}
