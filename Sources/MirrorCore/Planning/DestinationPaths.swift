/// Where an entry's finished file and its partial download live.
///
/// The partial file sits in the same directory as `DEST`, so renaming it into place is atomic.
/// Its name is `NAME.part`, unless that would exceed the file-name limit: then it is a
/// shortened name that stays unique per destination.
public struct DestinationPaths: Sendable, Equatable {
    /// Absolute path of the finished file.
    public var destination: String
    /// Absolute path of the partial download.
    public var partial: String
    /// Absolute path of the directory that holds both.
    public var directory: String
    /// The root every destination must stay inside.
    public var root: String
    /// The directory that holds both, relative to the root; empty for the root itself.
    public var relativeDirectory: String
    /// The finished file's name in that directory.
    public var name: String
    /// The partial download's name in that directory.
    public var partialName: String

    /// Longest file name most Linux file systems accept (NAME_MAX).
    static let nameLimit = 255
    static let suffix = ".part"

    public init(root: String, dest: String) {
        self.root = root
        let rootPrefix = root.endsWithSlash ? root : root + "/"
        destination = rootPrefix + dest
        let slash = destination.lastSlash!
        // A file right under `/` lives in "/", not in "".
        directory = slash == destination.startIndex ? "/" : String(destination[..<slash])
        name = String(destination[destination.index(after: slash)...])
        partialName = Self.partialName(for: name)
        partial = String(destination[...slash]) + partialName
        relativeDirectory = dest.lastSlash.map { String(dest[..<$0]) } ?? ""
    }

    static func partialName(for name: String) -> String {
        if name.utf8.count + suffix.utf8.count <= nameLimit { return name + suffix }
        // Keep a recognisable prefix and make it unique with a hash of the full name.
        let tag = "~" + String(fnv1a(name), radix: 16)
        let room = nameLimit - suffix.utf8.count - tag.utf8.count
        var prefix = Substring(name)
        while prefix.utf8.count > room { prefix = prefix.dropLast() }
        return prefix + tag + suffix
    }

    private static func fnv1a(_ text: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return hash
    }
}

extension Manifest {
    /// Where `entry`'s files go under this manifest's root.
    func paths(for entry: Entry) -> DestinationPaths {
        DestinationPaths(root: root, dest: entry.dest)
    }
}
