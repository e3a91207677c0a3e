/// What the state store knows about one destination.
///
/// Two parts, each optional: the version that is complete on disk (its validators, hash, and
/// the local file's identity when it was verified), and the version a `DEST.part` is being
/// downloaded from (the validators recorded when the partial file was started).
public struct StateRecord: Sendable, Equatable {
    public var dest: String
    /// Printable URL (never with secrets).
    public var url: String
    public var complete: CompleteVersion?
    public var partial: RemoteValidators?

    public init(dest: String, url: String, complete: CompleteVersion? = nil, partial: RemoteValidators? = nil) {
        self.dest = dest
        self.url = url
        self.complete = complete
        self.partial = partial
    }
}

/// A remote version, as HTTP validators describe it.
public struct RemoteValidators: Sendable, Equatable {
    public var etag: String?
    public var lastModified: String?
    public var size: Int64?

    /// Equal when the size is equal and each validator is the same bytes (see `sameBytes`).
    public static func == (one: RemoteValidators, other: RemoteValidators) -> Bool {
        one.size == other.size && sameBytes(one.etag, other.etag) && sameBytes(one.lastModified, other.lastModified)
    }

    /// Whether two validators, as recorded or as a server sent them, are the same bytes; both
    /// absent counts as the same. Never `String`'s `==`, which is Unicode's canonical
    /// equivalence: two different bytes sequences a server sent are two different versions.
    static func sameBytes(_ one: String?, _ other: String?) -> Bool {
        switch (one, other) {
        case (nil, nil): true
        case let (one?, other?): SameBytes.of(one, other)
        default: false
        }
    }

    public init(etag: String?, lastModified: String?, size: Int64?) {
        self.etag = etag
        self.lastModified = lastModified
        self.size = size
    }

    init(_ file: RemoteFile) {
        self.init(etag: file.etag, lastModified: file.lastModified, size: file.size)
    }

    /// Whether these name a version at all: an ETag or a Last-Modified. The size alone does not
    /// tell one version of that size from another.
    public var namesVersion: Bool { etag != nil || lastModified != nil }

    /// A strong ETag (a weak one, `W/"…"`, cannot be used with `If-Range`).
    public var strongETag: String? {
        guard let etag, !EntityTag(etag).isWeak else { return nil }
        return etag
    }

    /// The validator to send as `If-Range`: a strong ETag, else Last-Modified.
    public var ifRangeValue: String? { strongETag ?? lastModified }

    /// Whether `other` may describe a different version: a size, ETag or Last-Modified that both
    /// sides know and that differ, or validators that cannot be compared at all (one side has
    /// only an ETag, the other only a Last-Modified: a server that changed how it names
    /// versions says nothing about whether the version changed). ETags are compared weakly
    /// (RFC 9110 §8.8.3.2): `W/"x"` and `"x"` are the same version. Returns the first
    /// difference found, for messages.
    public func difference(from other: RemoteValidators) -> String? {
        let comparable = (etag != nil && other.etag != nil) || (lastModified != nil && other.lastModified != nil)
        let anyNamed = namesVersion || other.namesVersion
        if anyNamed && !comparable {
            return "the server now names its versions by \(other.names) where the record has \(names)"
        }
        if let size, let otherSize = other.size, size != otherSize {
            return "size changed from \(size) to \(otherSize) bytes"
        }
        if let etag, let otherETag = other.etag, !EntityTag.weaklyMatch(etag, otherETag) {
            return "ETag changed from \(etag) to \(otherETag)"
        }
        if let lastModified, let otherDate = other.lastModified, !Self.sameBytes(lastModified, otherDate) {
            return "Last-Modified changed from \(lastModified) to \(otherDate)"
        }
        return nil
    }
}

extension RemoteValidators {
    /// The validators and size, for messages: `ETag "a", Last-Modified Sun, 06 Nov 1994
    /// 08:49:37 GMT, 100 bytes`; what is not known is left out.
    var summary: String {
        var parts: [String] = []
        if let etag { parts.append("ETag \(etag)") }
        if let lastModified { parts.append("Last-Modified \(lastModified)") }
        if let size { parts.append("\(size) bytes") }
        if etag == nil && lastModified == nil { parts.append("no ETag or Last-Modified") }
        return parts.joined(separator: ", ")
    }

    /// Which validators these are, for messages.
    fileprivate var names: String {
        switch (etag != nil, lastModified != nil) {
        case (true, true): return "ETag and Last-Modified"
        case (true, false): return "ETag"
        case (false, true): return "Last-Modified"
        case (false, false): return "nothing"
        }
    }
}

/// The version complete on disk and the local file it was verified as.
public struct CompleteVersion: Sendable, Equatable {
    public var validators: RemoteValidators
    /// The file's digest, lowercase hex, in its entry's algorithm when it was recorded: SHA-256
    /// (64 digits), or SHA-512 (128) for an entry pinned by one. The store's `sha256` column
    /// holds either, told apart by length, so stores written before SHA-512 pins read as they
    /// were; a digest of the other algorithm than an entry's pin vouches for nothing
    /// (`Pins.comparable`).
    public var sha256: String?
    public var local: LocalIdentity

    public init(validators: RemoteValidators, sha256: String?, local: LocalIdentity) {
        self.validators = validators
        self.sha256 = sha256
        self.local = local
    }
}

/// A local file's size, modification time and inode: if any changed, the file was touched
/// since it was verified and what the store says about it no longer holds.
public struct LocalIdentity: Sendable, Equatable {
    public var size: Int64
    public var modifiedNanoseconds: Int64
    public var inode: UInt64

    public init(size: Int64, modifiedNanoseconds: Int64, inode: UInt64) {
        self.size = size
        self.modifiedNanoseconds = modifiedNanoseconds
        self.inode = inode
    }
}
