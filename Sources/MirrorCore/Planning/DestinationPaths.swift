/// Where an entry's finished file and its partial download live.
///
/// The partial file sits in the same directory as `DEST`, so renaming it into place is atomic.
/// Its name is `NAME.part`, unless that would exceed the file-name limit: then it is a
/// shortened name that stays unique per destination.
///
/// An entry's files are opened by their names in their directory (`relativeDirectory`,
/// `name`, `partialName`); the absolute paths, for messages and the few calls that need
/// them, are made when asked for, not for every entry of a run.
public struct DestinationPaths: Sendable, Equatable {
    /// The root every destination must stay inside.
    public let root: String
    /// The destination relative to the root (the manifest's `dest`).
    public let dest: String
    /// The directory that holds both, relative to the root; empty for the root itself.
    public let relativeDirectory: String
    /// The finished file's name in that directory.
    public let name: String
    /// The partial download's name in that directory.
    public let partialName: String

    /// Absolute path of the finished file.
    public var destination: String { rootPrefix + dest }
    /// Absolute path of the partial download.
    public var partial: String { directoryPrefix + partialName }
    /// Absolute path of the directory that holds both.
    public var directory: String {
        if relativeDirectory.isEmpty {
            // A file right under `/` lives in "/", not in "".
            return root.endsWithSlash && root.utf8.count > 1 ? String(root.dropLast()) : root
        }
        return rootPrefix + relativeDirectory
    }

    private var rootPrefix: String { root.endsWithSlash ? root : root + "/" }
    private var directoryPrefix: String { relativeDirectory.isEmpty ? rootPrefix : rootPrefix + relativeDirectory + "/" }

    /// Longest file name most Linux file systems accept (NAME_MAX).
    static let nameLimit = 255
    static let suffix = ".part"

    public init(root: String, dest: String) {
        self.root = root
        self.dest = dest
        if let slash = dest.lastSlash {
            relativeDirectory = String(dest[..<slash])
            name = String(dest[dest.index(after: slash)...])
        } else {
            relativeDirectory = ""
            name = dest
        }
        partialName = Self.partialName(for: name)
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
