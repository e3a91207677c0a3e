import Glibc

/// The entries of a manifest too large to hold, read again from its file as they are needed
/// (`ManifestLoader.loadStreaming`). The first reading decoded and checked every entry and
/// kept none; this one hands them on in order, the repeats it dropped left out, so that a
/// command that looks at each entry once (`mirror verify`) holds a batch of them at a time,
/// not the list.
///
/// It reads the file it was opened on, whatever its path names meanwhile (`mirror lock`
/// replaces a manifest by renaming). A file changed in place since the first reading is
/// refused: before the second reading when its size or time of modification changed, after it
/// when its text's checksum or count of entries differ, or it no longer reads.
public final class ManifestEntryStream: @unchecked Sendable {
    /// How many entries `forEach` hands on.
    public let count: Int
    /// Where each entry with `insecure: true` is, and its dest: the warning a held manifest's
    /// entries get from their `settings`.
    public var insecureEntries: [(location: SourceLocation, dest: String)] { streaming.insecure }
    private let descriptor: Int32
    private let identity: FileIdentity
    private let path: String
    // Read only by `forEach`, which runs on one thread at a time.
    private let decoder: ManifestDecoder
    private let streaming: ManifestStream.Streaming

    /// The file's identity, size and time of last modification, as fstat gives them. Not the
    /// time of its last status change: a rename over the manifest's path (as `mirror lock`
    /// makes) changes that of the file replaced, whose text is still the one checked.
    struct FileIdentity: Equatable {
        var device: UInt64
        var inode: UInt64
        var size: Int64
        var modified: timespec

        init?(_ descriptor: Int32) {
            var info = stat()
            guard fstat(descriptor, &info) == 0 else { return nil }
            self.init(info)
        }

        init(_ info: stat) {
            device = UInt64(info.st_dev)
            inode = UInt64(info.st_ino)
            size = Int64(info.st_size)
            modified = info.st_mtim
        }

        static func == (left: FileIdentity, right: FileIdentity) -> Bool {
            left.device == right.device && left.inode == right.inode && left.size == right.size
                && left.modified.tv_sec == right.modified.tv_sec && left.modified.tv_nsec == right.modified.tv_nsec
        }
    }

    /// - Parameter descriptor: The manifest's file, open; the stream reads a duplicate of it.
    init?(descriptor: Int32, identity: FileIdentity, path: String, decoder: ManifestDecoder, streaming: ManifestStream.Streaming) {
        let duplicate = fcntl(descriptor, F_DUPFD_CLOEXEC, 0)
        guard duplicate >= 0 else { return nil }
        self.descriptor = duplicate
        self.identity = identity
        self.path = path
        self.decoder = decoder
        self.streaming = streaming
        count = streaming.count
    }

    deinit {
        close(descriptor)
    }

    /// Calls `body` with each entry, in manifest order.
    ///
    /// - Throws: `ManifestError` when the file changed since the first reading, or cannot be
    ///   read again; `body` may have had some of the entries by then.
    public func forEach(_ body: @escaping (Entry) -> Void) throws(ManifestError) {
        try checkUnchanged()
        var handed = 0
        let document: ManifestStream.Document?
        do {
            document = try ManifestStream.read(
                .file(descriptor: descriptor, size: Int(identity.size)), decoder: decoder.fresh, context: streaming.context,
                purpose: .stream(skipping: streaming.skipped, body: { entry in
                    handed += 1
                    body(entry)
                }))
        } catch {
            // The text read without a problem the first time: read otherwise, it changed.
            throw .changedWhileRead(path)
        }
        try checkUnchanged()
        guard document?.files != nil, handed == count, document?.checksum == streaming.checksum else { throw .changedWhileRead(path) }
    }

    private func checkUnchanged() throws(ManifestError) {
        guard FileIdentity(descriptor) == identity else { throw .changedWhileRead(path) }
    }
}
