/// What the server says about an entry's file.
public enum RemoteFacts: Sendable, Equatable {
    case available(RemoteFile)
    case unavailable(TransferFailure)
}

/// The remote file's size and validators, from a probe or from a GET's own headers.
public struct RemoteFile: Sendable, Equatable {
    /// Total size in bytes; nil when the server did not say.
    public var size: Int64?
    public var etag: String?
    public var lastModified: String?

    /// Equal when their validators are (`RemoteValidators`' `==`: the same size and bytes),
    /// never by Unicode's looser `String` equality.
    public static func == (one: RemoteFile, other: RemoteFile) -> Bool {
        RemoteValidators(one) == RemoteValidators(other)
    }

    public init(size: Int64?, etag: String? = nil, lastModified: String? = nil) {
        self.size = size
        self.etag = etag
        self.lastModified = lastModified
    }
}

extension Entry {
    /// The entry's pins, as the planner takes them.
    public var pins: Pins { Pins(size: size, digest: digest) }
}

/// The manifest's pins for an entry.
public struct Pins: Sendable, Equatable {
    public var size: Int64?
    /// The pinned digest, lowercase hex; its length names the algorithm (`DigestAlgorithm`).
    public var digest: String?

    public init(size: Int64? = nil, digest: String? = nil) {
        self.size = size
        self.digest = digest
    }

    /// The algorithm `DEST` and downloads are hashed with for these pins.
    public var algorithm: DigestAlgorithm {
        digest.flatMap(DigestAlgorithm.init(hexDigest:)) ?? .sha256
    }

    /// `recorded` (a digest the store kept, or one computed) when it is of this entry's
    /// algorithm; nil when it is of another, which says nothing about these pins.
    func comparable(_ recorded: String?) -> String? {
        guard let recorded, DigestAlgorithm(hexDigest: recorded) == algorithm else { return nil }
        return recorded
    }
}
