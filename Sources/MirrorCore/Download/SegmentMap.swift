/// The one version of a remote file a segmented `.part` belongs to: its URL, total size and
/// validators. Every range request asks for this version only (`If-Match` with its strong
/// ETag, else `If-Unmodified-Since` with its Last-Modified), and every reply must name it.
struct SegmentVersion: Equatable, Sendable {
    var url: String
    var total: Int64
    var etag: String?
    var lastModified: String?

    var validators: RemoteValidators { RemoteValidators(etag: etag, lastModified: lastModified, size: total) }

    /// The precondition each range request carries.
    var precondition: HTTPHeader? {
        if let etag, !EntityTag(etag).isWeak { return HTTPHeader(name: "If-Match", value: etag) }
        if let lastModified { return HTTPHeader(name: "If-Unmodified-Since", value: lastModified) }
        return nil
    }

    /// Whether the partial record `validators` (the version the `.part` was started from)
    /// is this version: the same size, ETag and Last-Modified, each known on both sides.
    func matches(_ validators: RemoteValidators?) -> Bool {
        guard let validators else { return false }
        return validators.size == total && RemoteValidators.sameBytes(validators.etag, etag)
            && RemoteValidators.sameBytes(validators.lastModified, lastModified)
    }
}

/// What the state store keeps of a segmented `.part`: the version it holds and the ranges of
/// it known to be on disk (`fdatasync`'d before they were recorded). The file's size says
/// nothing about what is written (it is allocated to the full size at once): this does.
struct SegmentMap: Equatable, Sendable {
    var version: SegmentVersion
    var durable: [ByteRange]

    /// Bytes from 0 on that are on disk without a gap: how far the `.part` could be resumed
    /// as a plain file.
    var prefix: Int64 { ByteRanges.prefix(of: durable) }
}

extension SegmentMap {
    /// `map`, when it describes the `.part` on disk: there is one, and the store's record of
    /// the version it was started from is the map's. Otherwise the map is stale and the `.part`
    /// (perhaps a sparse file of the full size) holds nothing that can be trusted.
    static func resumable(_ map: SegmentMap, partial: LocalFacts.FileState, record: RemoteValidators?) -> SegmentMap? {
        guard case .file = partial, map.version.matches(record) else { return nil }
        return map
    }
}
