import Glibc

/// The cache's index: what `mirror` knows of each blob beyond its name.
///
/// - `sha512/ab/<sha512>` holds the SHA-256 of the bytes whose SHA-512 is its name: a fact
///   about content, true whichever file holds those bytes, written whenever both digests of
///   one file were computed (a fill, `cache add`, `cache verify`). A `sha512` pin reaches its
///   blob through it.
/// - `index/ab/<sha256>` is the blob's row: its digests and the stat (size, inode, mtime,
///   ctime) it had when its bytes were last hashed (or copied in from bytes that were), written
///   once those bytes are durable. While
///   the blob's stat is the row's, its bytes are trusted to be its name without hashing them
///   again; a blob whose stat changed (written through, replaced, restored from a backup) is
///   hashed at its next placement, and its row made anew when it passes. A row is written only
///   for a file whose bytes this process hashed, so it never vouches for a blob that another
///   process put there, and only after `fdatasync`: a crash that lost the bytes but kept the
///   size (ext4's `data=writeback`) must not leave a row vouching for them. A fill (not
///   fsync'd) writes none: the blob's first placement hashes it and writes it.
///
/// One small file per fact, each written to `tmp/` and renamed into place: nothing is locked,
/// so the index works wherever the blobs do (NFS and cluster file systems, where SQLite's
/// locks and its WAL's shared memory do not), and two writers of one row write the same facts.
/// No fsync: a row a crash left empty or short does not parse, and is no row.
extension BlobCache {
    /// A blob's row of the index.
    struct IndexRow: Sendable, Equatable {
        var sha256: String
        var sha512: String?
        /// The blob as it was when its bytes were hashed and synced; nil: not vouched for (a
        /// fill's row, which knows the digests only).
        var file: FileState?

        struct FileState: Sendable, Equatable {
            var size: Int64
            var inode: UInt64
            var modified: Timestamp
            var changed: Timestamp

            init(size: Int64, inode: UInt64, modified: Timestamp, changed: Timestamp) {
                self.size = size
                self.inode = inode
                self.modified = modified
                self.changed = changed
            }

            /// What `info` says of the file: its size, inode, mtime and ctime.
            init(_ info: stat) {
                self.init(
                    size: Int64(info.st_size), inode: UInt64(info.st_ino),
                    modified: Timestamp(seconds: Int64(info.st_mtim.tv_sec), nanoseconds: Int64(info.st_mtim.tv_nsec)),
                    changed: Timestamp(seconds: Int64(info.st_ctim.tv_sec), nanoseconds: Int64(info.st_ctim.tv_nsec)))
            }
        }

        struct Timestamp: Sendable, Equatable {
            var seconds: Int64
            var nanoseconds: Int64
        }

        init(sha256: String, sha512: String?, stat info: stat?) {
            self.sha256 = sha256
            self.sha512 = sha512
            file = info.map(FileState.init)
        }

        /// Whether `info` is the file the row was written for, unchanged since: its size, inode,
        /// mtime and ctime (which no one can set back: a write, a `chmod`, a rename over it
        /// each move it on).
        func describes(_ info: stat) -> Bool {
            file == FileState(info)
        }

        static let header = "mirror-blob-index 1"

        var text: String {
            var lines = [Self.header, "sha256 \(sha256)"]
            if let sha512 { lines.append("sha512 \(sha512)") }
            if let file {
                lines += ["size \(file.size)", "inode \(file.inode)", "mtime \(file.modified.seconds).\(file.modified.nanoseconds)",
                          "ctime \(file.changed.seconds).\(file.changed.nanoseconds)"]
            }
            lines.append("end")
            return lines.joined(separator: "\n") + "\n"
        }

        /// The row `text` holds; nil for anything that is not a whole row (a short or empty
        /// file a crash left, another version's).
        init?(text: String) {
            let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
            guard lines.first == Substring(Self.header), lines.count >= 2, lines[lines.count - 2] == "end", lines.last == "" else { return nil }
            var fields: [Substring: Substring] = [:]
            for line in lines.dropFirst().dropLast(2) {
                guard let space = line.firstIndex(of: " ") else { return nil }
                fields[line[..<space]] = line[line.index(after: space)...]
            }
            func timestamp(_ key: Substring) -> Timestamp? {
                guard let value = fields[key], let dot = value.firstIndex(of: "."),
                      let seconds = Int64(value[..<dot]), let nanoseconds = Int64(value[value.index(after: dot)...]) else { return nil }
                return Timestamp(seconds: seconds, nanoseconds: nanoseconds)
            }
            guard let sha256 = fields["sha256"].map(String.init), BlobCache.isDigest(sha256, .sha256) else { return nil }
            let sha512 = fields["sha512"].map(String.init)
            if let sha512, !BlobCache.isDigest(sha512, .sha512) { return nil }
            self.sha256 = sha256
            self.sha512 = sha512
            // The file's state whole, or not at all.
            let stateKeys: [Substring] = ["size", "inode", "mtime", "ctime"]
            let present = stateKeys.filter { fields[$0] != nil }.count
            if present == 0 {
                file = nil
                return
            }
            guard present == stateKeys.count, let size = fields["size"].flatMap({ Int64($0) }), let inode = fields["inode"].flatMap({ UInt64($0) }),
                  let modified = timestamp("mtime"), let changed = timestamp("ctime")
            else { return nil }
            file = FileState(size: size, inode: inode, modified: modified, changed: changed)
        }
    }

    /// The row of the blob of `sha256`, or nil when there is none (or it does not parse).
    func indexRow(sha256: String) -> IndexRow? {
        guard Self.isDigest(sha256, .sha256), let bytes = try? WholeFile.read(path: rowPath(sha256: sha256), limit: 4096) else { return nil }
        guard let row = IndexRow(text: String(decoding: bytes, as: UTF8.self)), row.sha256 == sha256 else { return nil }
        return row
    }

    /// The name (SHA-256) of the blob a pin names: the pin itself for a SHA-256, the one the
    /// index knows for a SHA-512; nil when it knows none.
    func blobName(forPin digest: String) -> String? {
        switch DigestAlgorithm(hexDigest: digest) {
        case .sha256: return Self.isDigest(digest, .sha256) ? digest : nil
        case .sha512:
            guard Self.isDigest(digest, .sha512),
                  let bytes = try? WholeFile.read(path: pointerPath(sha512: digest), limit: 256) else { return nil }
            let name = String(decoding: bytes.prefix { $0 != UInt8(ascii: "\n") }, as: UTF8.self)
            return Self.isDigest(name, .sha256) ? name : nil
        case nil: return nil
        }
    }

    /// Writes `row` (and, when it has a SHA-512, the pointer from it), each by a temporary file
    /// renamed into place. Best effort: an index that cannot be written costs a hash later.
    /// `syncing`: the blob, open; its bytes are made durable first, and no row is written when
    /// they cannot be (a row must never outlive the bytes it vouches for).
    func writeIndex(_ row: IndexRow, syncing blob: Int32? = nil) {
        if let blob, fdatasync(blob) != 0 { return }
        writeSmallFile(rowPath(sha256: row.sha256), folder: "\(path)/index/\(row.sha256.prefix(2))", text: row.text)
        if let sha512 = row.sha512 { writePointer(sha512: sha512, sha256: row.sha256) }
    }

    /// Records that the bytes whose SHA-512 is `sha512` have the SHA-256 `sha256`.
    func writePointer(sha512: String, sha256: String) {
        guard blobName(forPin: sha512) != sha256 else { return }
        writeSmallFile(pointerPath(sha512: sha512), folder: "\(path)/sha512/\(sha512.prefix(2))", text: sha256 + "\n")
    }

    /// Removes the row of the blob of `sha256` (and the pointer its SHA-512 had, when `pointer`):
    /// the blob was quarantined or evicted.
    func removeIndex(sha256: String, pointer: Bool) {
        guard Self.isDigest(sha256, .sha256) else { return }
        if pointer, let sha512 = indexRow(sha256: sha256)?.sha512 { _ = unlink(pointerPath(sha512: sha512)) }
        _ = unlink(rowPath(sha256: sha256))
    }

    private func rowPath(sha256: String) -> String {
        "\(path)/index/\(sha256.prefix(2))/\(sha256)"
    }

    private func pointerPath(sha512: String) -> String {
        "\(path)/sha512/\(sha512.prefix(2))/\(sha512)"
    }

    private func writeSmallFile(_ file: String, folder: String, text: String) {
        guard (try? FileSystem.makeDirectories(folder)) != nil, (try? FileSystem.makeDirectories("\(path)/tmp")) != nil else { return }
        var template = Array("\(path)/tmp/index.XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { return }
        let temporary = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        var bytes = Array(text.utf8)
        let written = bytes.withUnsafeMutableBytes { write(fd, $0.baseAddress, $0.count) }
        _ = fchmod(fd, 0o444)
        close(fd)
        if written != bytes.count || rename(temporary, file) != 0 { _ = unlink(temporary) }
    }

    /// The digests of the first `length` bytes of `fd`, by every algorithm of `algorithms`,
    /// in one reading.
    static func digests(of fd: Int32, length: Int64, path: String, _ algorithms: [DigestAlgorithm]) throws(TransferFailure) -> [DigestAlgorithm: String] {
        let hashers = algorithms.map { DigestHasher($0) }
        try FileSystem.forEachChunk(of: fd, path: path, length: length) { (chunk: UnsafeRawBufferPointer) throws(TransferFailure) in
            for hasher in hashers { hasher.update(chunk) }
        }
        return Dictionary(uniqueKeysWithValues: hashers.map { ($0.algorithm, $0.finalize()) })
    }
}
