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

    public init(size: Int64?, etag: String? = nil, lastModified: String? = nil) {
        self.size = size
        self.etag = etag
        self.lastModified = lastModified
    }
}

extension Entry {
    /// The entry's pins, as the planner takes them.
    public var pins: Pins { Pins(size: size, sha256: sha256) }
}

/// The manifest's pins for an entry.
public struct Pins: Sendable, Equatable {
    public var size: Int64?
    public var sha256: String?

    public init(size: Int64? = nil, sha256: String? = nil) {
        self.size = size
        self.sha256 = sha256
    }
}
