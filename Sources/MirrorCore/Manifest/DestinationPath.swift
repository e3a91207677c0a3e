/// Where an entry's file goes, relative to the manifest's root.
enum DestinationPath {
    /// The first component of a dest may not be this: `mirror` keeps its state there.
    static let reservedDirectory = ".mirror"
    /// No component of a dest may be this: `--prune` moves files there before it deletes them
    /// (see `PruneTrash`).
    static let reservedTrashDirectory = ".mirror-trash"
    /// Longest file name component Linux file systems accept.
    static let maximumComponentBytes = 255

    /// `text` as a normalised relative path (no `.` components, no repeated `/`), or why it
    /// cannot be a dest: it must be relative, stay inside root, name a file, and keep out of
    /// `.mirror` and of any `.mirror-trash`. Symlinks are not looked at here; `sync` checks those on disk.
    static func normalised(_ text: String) throws(ValueProblem) -> String {
        if isNormalAndAllowed(text) { return text }
        guard !text.isEmpty else {
            throw ValueProblem("expected a path relative to root, found an empty value")
        }
        guard !text.unicodeScalars.contains("\0") else {
            throw ValueProblem("`\(text.replacingNUL)` contains a NUL character, which no file name can hold")
        }
        guard !text.startsWithSlash else {
            let relative = text.drop { $0 == "/" }
            let hint = relative.isEmpty ? "" : ", like `\(relative)`"
            throw ValueProblem("`\(text)` is an absolute path; give a path relative to root\(hint)")
        }
        guard !text.endsWithSlash else {
            throw ValueProblem("`\(text)` ends with `/` and so names a directory; give the file's path, like `\(text)<name>`")
        }
        let components = text.slashSeparatedComponents.filter { $0 != "." }
        guard !components.contains("..") else {
            throw ValueProblem("`\(text)` contains a `..` component; a dest must stay inside root")
        }
        guard !components.isEmpty else {
            throw ValueProblem("`\(text)` does not name a file; give a path relative to root")
        }
        guard components[0] != Substring(reservedDirectory) else {
            throw ValueProblem("`\(text)` is inside `\(reservedDirectory)`, which is reserved for mirror's own state")
        }
        guard !components.contains(Substring(reservedTrashDirectory)) else {
            throw ValueProblem("`\(text)` names `\(reservedTrashDirectory)`, which is reserved for the files `--prune` is deleting")
        }
        if let long = components.first(where: { $0.utf8.count > maximumComponentBytes }) {
            throw ValueProblem("the name `\(long.prefix(20))…` in dest is \(long.utf8.count) bytes long; file names are limited to \(maximumComponentBytes) bytes")
        }
        return components.joined(separator: "/")
    }

    /// Whether `text` is already what `normalised` returns for it and breaks none of its
    /// rules: components between single `/`s, none empty, `.` or `..`, none longer than
    /// `maximumComponentBytes`, no NUL, no `.mirror` first and no `.mirror-trash`. One pass
    /// over the bytes, about a tenth of the checks' cost for a plain dest (every entry pays
    /// it as the manifest loads); any other text goes through the checks, which name the
    /// problem or normalise it.
    private static func isNormalAndAllowed(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            var start = 0
            for end in 0...bytes.count where end == bytes.count || bytes[end] == .slash || bytes[end] == 0 {
                guard end == bytes.count || bytes[end] == .slash else { return false }
                let component = UnsafeBufferPointer(rebasing: bytes[start..<end])
                if component.isEmpty || component.count > maximumComponentBytes {
                    return false
                }
                // Every name refused below starts with a dot: the generic comparisons, four a
                // component, were about 700 instructions an entry.
                if component[0] == UInt8(ascii: "."),
                   component.elementsEqual(".".utf8) || component.elementsEqual("..".utf8)
                    || (start == 0 && component.elementsEqual(reservedDirectory.utf8))
                    || component.elementsEqual(reservedTrashDirectory.utf8) {
                    return false
                }
                start = end + 1
            }
            return true
        }
    }
}

private extension String {
    var replacingNUL: String {
        String(String.UnicodeScalarView(unicodeScalars.map { $0 == "\0" ? "␀" : $0 }))
    }
}
