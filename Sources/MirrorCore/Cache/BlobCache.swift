import CLinux
import Glibc
import Synchronization

/// A directory of files named by the SHA-256 of their bytes, shared by every root that names it
/// (`cache:` in the manifest, `--cache`, `MIRROR_CACHE`): a pinned entry whose blob is here is
/// placed from it with no request, and every file `sync` downloads and hashed itself goes in.
///
/// Layout, under the cache's directory:
/// - `sha256/ab/abcdef…`: a blob, read-only, under its full digest (the first two hex digits
///   are its folder, so no folder holds more than a 256th of them);
/// - `tmp/`: a filler's own temporary files, each renamed into place once written (a filler that
///   lost the race to another removes its copy): a blob appears only whole, and many processes
///   fill one cache without a lock;
/// - `quarantine/`: blobs whose bytes did not hash to their name, moved aside when found.
///
/// Nothing trusts a blob's name: a placement hashes the bytes it placed and the entry checks them
/// against its pin before they land under `DEST`, so a blob damaged or replaced from outside is
/// a miss (and quarantined), never a wrong file. A blob deleted from outside is a miss.
public final class BlobCache: Sendable {
    /// The cache's directory, absolute.
    public let path: String
    /// How files are placed from it and put into it.
    public let mode: Mode

    public init(path: String, mode: Mode = .copy) {
        self.path = path
        self.mode = mode
    }

    /// `cache_place`.
    public enum Mode: String, Sendable, Equatable {
        /// `DEST` gets its own copy: a reflink where the file system can share extents, else
        /// the kernel's copy, else a copy.
        case copy
        /// `DEST` is another name of the blob (on the cache's file system; elsewhere a copy):
        /// both read-only, one file for every root. Downloads go in the same way.
        case hardlink
    }

    /// The path of the blob of `sha256` (64 lowercase hex digits), or nil for anything else.
    func blobPath(sha256: String) -> String? {
        guard Self.isDigest(sha256) else { return nil }
        return "\(path)/sha256/\(sha256.prefix(2))/\(sha256)"
    }

    /// The size of the blob of `sha256` when the cache holds one as a regular file (of `size`,
    /// when given); nil for a miss. Reads nothing but the blob's metadata.
    func lookup(sha256: String, size: Int64?) -> Int64? {
        guard let blob = blobPath(sha256: sha256) else { return nil }
        var info = stat()
        guard lstat(blob, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        let found = Int64(info.st_size)
        if let size, size != found { return nil }
        return found
    }

    /// The size of the blob a pin (SHA-256, or SHA-512 through the index) names, as `lookup`.
    func lookup(pin digest: String, size: Int64?) -> Int64? {
        blobName(forPin: digest).flatMap { lookup(sha256: $0, size: size) }
    }

    /// Opens the blob of `sha256` for reading; nil when it is gone.
    func open(sha256: String) -> Int32? {
        guard let blob = blobPath(sha256: sha256) else { return nil }
        let fd = Glibc.open(blob, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        return fd < 0 ? nil : fd
    }

    /// Copies `length` bytes of `source` into `destination` (both open, `destination` empty):
    /// a reflink where the file system can share them, else the kernel's copy, else a copy
    /// through this process. `path` names `destination` in errors.
    static func copy(from source: Int32, to destination: Int32, length: Int64, path: String) throws(TransferFailure) {
        if mirror_clone_file(destination, source) == 0 { return }
        if lseek(source, 0, SEEK_SET) == 0, lseek(destination, 0, SEEK_SET) == 0, try kernelCopy(from: source, to: destination, length: length, path: path) {
            return
        }
        // Whatever the kernel's copy managed is written again from the start.
        if ftruncate(destination, 0) != 0 { throw .localIO(path: path, operation: "truncate", errno: errno) }
        var offset: Int64 = 0
        try FileSystem.forEachChunk(of: source, path: path, length: length) { (chunk: UnsafeRawBufferPointer) throws(TransferFailure) in
            try FileSystem.write(chunk, to: destination, at: offset, path: path)
            offset += Int64(chunk.count)
        }
    }

    /// `copy_file_range` to the end; false (nothing thrown) where the kernel cannot copy
    /// between these files, so that the caller copies them itself.
    private static func kernelCopy(from source: Int32, to destination: Int32, length: Int64, path: String) throws(TransferFailure) -> Bool {
        var done: Int64 = 0
        while done < length {
            let copied = mirror_copy_file_range(source, destination, length - done)
            if copied < 0 {
                let code = errno
                if code == EINTR { continue }
                if [EXDEV, EINVAL, ENOSYS, EOPNOTSUPP, EBADF, EPERM].contains(code) { return false }
                throw .localIO(path: path, operation: "copy", errno: code)
            }
            // The blob ended early: it is not the file its size said.
            if copied == 0 { throw .sizeMismatch(expected: length, actual: done) }
            done += copied
        }
        return true
    }

    /// Puts the complete file `source` (of `length` bytes, whose digest `digest` this process
    /// computed as it wrote it) into the cache, named by its SHA-256, and indexes it by both
    /// digests: the one not known is computed now, reading `source` (just written, so from the
    /// page cache). A blob already there is left as it is. Written to a temporary file of its
    /// own and renamed into place, so that no reader ever sees a partial blob and two fillers
    /// of the same blob do not disturb each other. Returns the blob's name, or nil when it was
    /// not put in: the source changed while it was read (or was not the file hashed).
    ///
    /// - Parameter indexing: the blob's bytes are made durable before its name, and its row
    ///   written after (`cache add`): later placements trust it without hashing. A fill does
    ///   not (no fsync of its own): the blob's first placement hashes it and writes the row.
    @discardableResult
    func insert(
        from source: Int32, length: Int64, digest: String, otherDigest: String? = nil,
        linking name: (directory: Int32, name: String)? = nil, indexing: Bool = false
    ) throws(TransferFailure) -> String? {
        guard let known = DigestAlgorithm(hexDigest: digest) else { return nil }
        var sourceInfo = stat()
        guard fstat(source, &sourceInfo) == 0 else { throw .localIO(path: "\(path)/tmp", operation: "inspect the source of", errno: errno) }
        let readingPath = "the file put into \(path)"
        // The name first: a SHA-512's blob needs the SHA-256, hashed now. A SHA-256's SHA-512 is
        // hashed beside the copy, on a thread of its own (both read the page cache): the fill
        // takes the longer of the two, not their sum.
        let sha256: String
        var sha512: String?
        var companion: JoinableThread?
        let hashed = Mutex<Result<String, TransferFailure>?>(nil)
        if known == .sha256 {
            sha256 = digest
            sha512 = otherDigest
        } else {
            sha512 = digest
            if let otherDigest {
                sha256 = otherDigest
            } else {
                sha256 = try Self.digests(of: source, length: length, path: readingPath, [.sha256])[.sha256]!
            }
        }
        guard let blob = blobPath(sha256: sha256) else { return nil }
        if lookup(sha256: sha256, size: length) != nil {
            // Held already: what this fill knows of its SHA-512 goes to the index, and no more
            // is hashed for it (`cache verify` computes what is missing).
            if let sha512 { writePointer(sha512: sha512, sha256: sha256) }
            return sha256
        }
        if sha512 == nil, length < Self.companionThreshold {
            sha512 = try Self.digests(of: source, length: length, path: readingPath, [.sha512])[.sha512]!
        } else if sha512 == nil {
            companion = JoinableThread {
                hashed.withLock { $0 = Result { () throws(TransferFailure) -> String in
                    try Self.digests(of: source, length: length, path: readingPath, [.sha512])[.sha512]!
                } }
            }
        }
        defer { companion?.join() }
        /// The SHA-512, once the thread that hashes it is done; nil when it failed.
        func companionDigest() -> String? {
            guard let companion else { return sha512 }
            companion.join()
            return try? hashed.withLock { $0 }?.get()
        }
        let folder = "\(path)/sha256/\(sha256.prefix(2))"
        try FileSystem.makeDirectories(folder)
        try FileSystem.makeDirectories("\(path)/tmp")
        var template = Array("\(path)/tmp/\(sha256.prefix(16)).XXXXXX".utf8CString)
        let temporary = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard temporary >= 0 else { throw .localIO(path: "\(path)/tmp", operation: "create a file in", errno: errno) }
        _ = fcntl(temporary, F_SETFD, FD_CLOEXEC)
        let temporaryPath = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        var placed = false
        defer {
            close(temporary)
            if !placed { unlink(temporaryPath) }
        }
        // Read-only: a blob is never written again, and a tool that opens it for writing is
        // refused; then the name, and the row of what was put there.
        func publish(_ file: Int32, sha512: String?) throws(TransferFailure) {
            _ = fchmod(file, 0o444)
            if indexing, fdatasync(file) != 0 { throw .localIO(path: temporaryPath, operation: "sync", errno: errno) }
            if rename(temporaryPath, blob) != 0 { throw .localIO(path: blob, operation: "rename into", errno: errno) }
            placed = true
            var info = stat()
            // Without a sync, the row knows the digests but vouches for no file state.
            let synced = indexing && fstat(file, &info) == 0
            writeIndex(IndexRow(sha256: sha256, sha512: sha512, stat: synced ? info : nil))
        }
        /// Whether the source is as it was when it was hashed (its size and mtime), once every
        /// reading of it is over: one written to meanwhile is not the file that was, and goes
        /// nowhere.
        func sourceUnchanged() -> Bool {
            companion?.join()
            var after = stat()
            return fstat(source, &after) == 0 && after.st_size == sourceInfo.st_size
                && after.st_mtim.tv_sec == sourceInfo.st_mtim.tv_sec && after.st_mtim.tv_nsec == sourceInfo.st_mtim.tv_nsec
        }
        func copy(into file: Int32) throws(TransferFailure) {
            try Self.copy(from: source, to: file, length: length, path: temporaryPath)
            guard sourceUnchanged() else { return }
            var other = companionDigest()
            if indexing {
                // A row will vouch for this copy: its own bytes are hashed, not the source's.
                let copied = try Self.digests(of: file, length: length, path: temporaryPath, [.sha256, .sha512])
                guard copied[.sha256] == sha256 else { return }
                other = copied[.sha512]
            }
            try publish(file, sha512: other)
        }
        if mode == .hardlink, let name {
            // The blob is another name of the file: the temporary one is replaced by a link to
            // it, made read-only (the file with it). Linked by name, so the link is checked to
            // be the file that was hashed (not one put under that name since). Across file
            // systems, a copy after all, into the temporary file made anew.
            unlink(temporaryPath)
            if linkat(name.directory, name.name, AT_FDCWD, temporaryPath, 0) == 0 {
                var linked = stat()
                guard sourceUnchanged(), lstat(temporaryPath, &linked) == 0, linked.st_dev == sourceInfo.st_dev,
                      linked.st_ino == sourceInfo.st_ino else {
                    return nil
                }
                try publish(source, sha512: companionDigest())
                return sha256
            }
            let made = Glibc.open(temporaryPath, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            guard made >= 0 else { throw .localIO(path: temporaryPath, operation: "create", errno: errno) }
            defer { close(made) }
            try copy(into: made)
            return placed ? sha256 : nil
        }
        try copy(into: temporary)
        return placed ? sha256 : nil
    }

    /// A fill of a file at least this large hashes the digest its download did not compute
    /// on a thread of its own, beside the copy; a smaller one hashes it first.
    static let companionThreshold: Int64 = 8 << 20

    /// Tries to take the lock of the blob of `sha256` (`DIR/locks/ab/abcdef…`, `flock`): the
    /// descriptor that holds it, `nil` while another holds it. Whoever holds it downloads the
    /// file and fills the blob; the others wait, then find the blob. It only saves duplicate
    /// downloads: nothing relies on it (on a cluster file system where `flock` does nothing,
    /// every process downloads, and each fills the blob with the same bytes). A lock that
    /// cannot be made at all (a read-only cache) counts as held: `-1`, nothing to release.
    func tryLock(sha256: String) -> Int32? {
        guard Self.isDigest(sha256, .sha256) || Self.isDigest(sha256, .sha512) else { return -1 }
        let fd = openLockFile(sha256: sha256)
        guard fd >= 0 else { return -1 }
        if flock(fd, LOCK_EX | LOCK_NB) == 0 { return fd }
        let code = errno
        close(fd)
        return code == EWOULDBLOCK ? nil : -1
    }

    /// Marks the blob of `sha256` used now, for eviction's order: the mtime of its lock file
    /// (`locks/ab/<sha256>`), never the blob's own, which may be a root's `DEST` (hardlinks).
    func touch(sha256: String) {
        guard Self.isDigest(sha256) else { return }
        if utimensat(AT_FDCWD, lockFile(sha256: sha256), nil, 0) == 0 { return }
        let fd = openLockFile(sha256: sha256)
        if fd >= 0 { close(fd) }
    }

    /// Counts a placement of the blob of `sha256`: a byte appended to its lock file, whose size
    /// is then the blob's hits (`O_APPEND`: many processes count into one file), and whose
    /// mtime it moves on as `touch` does.
    func recordHit(sha256: String) {
        guard Self.isDigest(sha256) else { return }
        var fd = Glibc.open(lockFile(sha256: sha256), O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW)
        if fd < 0 {
            let made = openLockFile(sha256: sha256)
            if made >= 0 { close(made) }
            fd = Glibc.open(lockFile(sha256: sha256), O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW)
        }
        guard fd >= 0 else { return touch(sha256: sha256) }
        var mark: UInt8 = 0x2E
        _ = write(fd, &mark, 1)
        close(fd)
    }

    /// How many times the blob was placed (`recordHit`) since it was put in.
    public func hits(of blob: Blob) -> Int {
        var info = stat()
        return stat(lockFile(sha256: blob.sha256), &info) == 0 ? Int(info.st_size) : 0
    }

    /// When the blob was last used: its lock file's mtime, else the blob's (when it was put in).
    public func lastUse(of blob: Blob) -> Int64 {
        var info = stat()
        if stat(lockFile(sha256: blob.sha256), &info) == 0 { return max(Int64(info.st_mtim.tv_sec), blob.modified) }
        return blob.modified
    }

    /// The lock file of the blob of `sha256`, whose mtime is its last use.
    private func lockFile(sha256: String) -> String {
        "\(path)/locks/\(sha256.prefix(2))/\(sha256)"
    }

    /// Opens (making it, and its folder when that is missing) the lock file of the blob of
    /// `sha256`; -1 when it cannot be.
    private func openLockFile(sha256: String) -> Int32 {
        let file = lockFile(sha256: sha256)
        let flags = O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW
        let fd = Glibc.open(file, flags, 0o644)
        guard fd < 0, errno == ENOENT, (try? FileSystem.makeDirectories("\(path)/locks/\(sha256.prefix(2))")) != nil else { return fd }
        return Glibc.open(file, flags, 0o644)
    }

    /// Opens the cache's own lock, `DIR/lock`, which runs hold shared and an eviction
    /// exclusively; -1 when it cannot be made.
    private func openCacheLock() -> Int32 {
        guard (try? FileSystem.makeDirectories(path)) != nil else { return -1 }
        return Glibc.open("\(path)/lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o644)
    }

    /// Holds the cache in use (`DIR/lock`, shared): an eviction waits until no run holds it, so
    /// it never takes a blob from under a placement. The descriptor holds it until closed; -1
    /// when the lock cannot be made (a read-only cache, where nothing is evicted anyway).
    /// `waiting` is called once when an eviction holds the cache and the run must wait for it.
    public func holdInUse(waiting: () -> Void = {}) -> Int32 {
        let fd = openCacheLock()
        guard fd >= 0 else { return -1 }
        if flock(fd, LOCK_SH | LOCK_NB) == 0 { return fd }
        waiting()
        while flock(fd, LOCK_SH) != 0 {
            if errno != EINTR { break }
        }
        return fd
    }

    /// How far an eviction may go: the most bytes the blobs may hold, and the longest a blob may
    /// go unused.
    public struct Limits: Sendable, Equatable {
        public var maxSize: Int64?
        public var maxAge: Duration?

        public init(maxSize: Int64? = nil, maxAge: Duration? = nil) {
            self.maxSize = maxSize
            self.maxAge = maxAge
        }

        public var isEmpty: Bool { maxSize == nil && maxAge == nil }

        /// A size as the manifest writes one (`500MiB`, `20GiB`).
        public static func size(_ text: String) throws(Refusal) -> Int64 {
            do {
                return try ByteCountSyntax.parse(text)
            } catch {
                throw Refusal(description: error.message)
            }
        }

        /// A duration as the manifest writes one (`720h`, `12h`).
        public static func age(_ text: String) throws(Refusal) -> Duration {
            do {
                return try DurationSyntax.parse(text)
            } catch {
                throw Refusal(description: error.message)
            }
        }
    }

    /// What an eviction did.
    public struct Eviction: Sendable, Equatable {
        /// Blobs evicted, least recently used first.
        public var evicted: [String] = []
        public var bytesFreed: Int64 = 0
        /// What the blobs hold after it.
        public var bytesLeft: Int64 = 0
        /// Nothing was done: runs held the cache and `wait` was false.
        public var busy = false
    }

    /// Evicts least recently used blobs until they hold at most `limits.maxSize` bytes, and
    /// every blob unused for longer than `limits.maxAge`. Takes the cache's lock exclusively
    /// (waiting for the runs that hold it when `wait`, else `busy`), moves the chosen blobs to
    /// `DIR/trash/` and deletes them there: an eviction interrupted half-way is finished by the
    /// next, and a blob is never half-deleted under its name. `now`: seconds since 1970.
    public func evict(_ limits: Limits, now: Int64, wait: Bool) throws(TransferFailure) -> Eviction {
        var outcome = Eviction()
        let lock = openCacheLock()
        guard lock >= 0 else { throw .localIO(path: "\(path)/lock", operation: "open", errno: errno) }
        defer { close(lock) }
        while flock(lock, LOCK_EX | (wait ? 0 : LOCK_NB)) != 0 {
            if errno == EINTR { continue }
            if errno == EWOULDBLOCK {
                outcome.busy = true
                return outcome
            }
            throw .localIO(path: "\(path)/lock", operation: "lock", errno: errno)
        }
        let trash = "\(path)/trash"
        emptyTrash(trash)
        // Temporary files a filler left when it died (a day old: a fill under way is younger).
        for name in Self.names(in: "\(path)/tmp") {
            var info = stat()
            let file = "\(path)/tmp/\(name)"
            if lstat(file, &info) == 0, Int64(info.st_mtim.tv_sec) < now - 86_400 { _ = unlink(file) }
        }
        let blobs = blobs().map { ($0, lastUse(of: $0)) }.sorted { $0.1 < $1.1 || ($0.1 == $1.1 && $0.0.sha256 < $1.0.sha256) }
        var total = blobs.reduce(Int64(0)) { $0.saturatingAdding($1.0.size) }
        let oldest = limits.maxAge.map { now - $0.components.seconds }
        for (blob, used) in blobs {
            let tooOld = oldest.map { used < $0 } ?? false
            // A blob roots have as their DEST frees nothing when its name here goes: not taken
            // for the size (its bytes stay counted), only when it is past the age.
            let tooBig = blob.links == 1 && (limits.maxSize.map { total > $0 } ?? false)
            guard tooOld || tooBig else { continue }
            try FileSystem.makeDirectories(trash)
            guard rename(blob.path, "\(trash)/\(blob.sha256)") == 0 else { continue }
            _ = unlink(lockFile(sha256: blob.sha256))
            removeIndex(sha256: blob.sha256, pointer: true)
            outcome.evicted.append(blob.sha256)
            outcome.bytesFreed = outcome.bytesFreed.saturatingAdding(blob.size)
            total -= blob.size
        }
        emptyTrash(trash)
        outcome.bytesLeft = total
        return outcome
    }

    private func emptyTrash(_ trash: String) {
        for name in Self.names(in: trash) { _ = unlink("\(trash)/\(name)") }
    }

    /// Moves the blob of `sha256` aside (to `quarantine/`), its bytes having hashed to another
    /// digest: it is never placed again, and the next download of that file replaces it.
    /// Returns where it went, or nil when it was gone already.
    @discardableResult
    func quarantine(sha256: String, ifStill file: FileIdentity? = nil) -> String? {
        guard let blob = blobPath(sha256: sha256) else { return nil }
        // Only the file found wanting: another process may have quarantined it and filled the
        // blob anew with the right bytes meanwhile.
        if let file {
            var info = stat()
            guard lstat(blob, &info) == 0, FileIdentity(info) == file else { return nil }
        }
        removeIndex(sha256: sha256, pointer: false)
        let aside = "\(path)/quarantine/\(sha256).\(String(UInt64.random(in: 0...UInt64.max), radix: 16))"
        if (try? FileSystem.makeDirectories("\(path)/quarantine")) != nil, rename(blob, aside) == 0 { return aside }
        // It cannot be moved aside: it must not stay under its name either, or every fill of the
        // same bytes would find it and leave it.
        return unlink(blob) == 0 ? "nowhere (removed)" : nil
    }

    /// Which file a path named, when it was looked at.
    struct FileIdentity: Sendable, Equatable {
        let device: UInt64
        let inode: UInt64

        init(_ info: stat) {
            device = UInt64(info.st_dev)
            inode = UInt64(info.st_ino)
        }
    }

    /// A blob the cache holds.
    public struct Blob: Sendable, Equatable {
        /// Its name: the SHA-256 its bytes had when it was put in.
        public let sha256: String
        public let size: Int64
        public let path: String
        /// Its modification time, seconds since 1970: when it was put in.
        public let modified: Int64
        /// Its names: more than one when roots have it as their `DEST` (`cache_place: hardlink`).
        public var links: Int = 1
    }

    /// Every blob, in the order of their names; files there that are not blobs (a name that is
    /// no digest, not a regular file) are left out.
    public func blobs() -> [Blob] {
        var found: [Blob] = []
        let top = "\(path)/sha256"
        for folder in Self.names(in: top).sorted() where folder.utf8.count == 2 {
            for name in Self.names(in: "\(top)/\(folder)").sorted() where Self.isDigest(name) && name.hasPrefix(folder) {
                let file = "\(top)/\(folder)/\(name)"
                var info = stat()
                guard lstat(file, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { continue }
                found.append(Blob(sha256: name, size: Int64(info.st_size), path: file, modified: Int64(info.st_mtim.tv_sec),
                                  links: Int(info.st_nlink)))
            }
        }
        return found
    }

    /// What the cache holds, counted.
    public struct Stats: Sendable, Equatable {
        public var blobs = 0
        public var bytes: Int64 = 0
        /// Blobs found not to be what their names say, moved aside.
        public var quarantined = 0
        /// Temporary files: fills under way, or left by a filler that died.
        public var temporary = 0
        /// Placements from the blobs there now, since each was put in.
        public var hits = 0
    }

    public func stats() -> Stats {
        var stats = Stats()
        for blob in blobs() {
            stats.blobs += 1
            stats.bytes = stats.bytes.saturatingAdding(blob.size)
            stats.hits += hits(of: blob)
        }
        stats.quarantined = Self.names(in: "\(path)/quarantine").count
        stats.temporary = Self.names(in: "\(path)/tmp").count
        return stats
    }

    /// Hashes `blob`; one whose bytes are not its name is quarantined, and its digest returned.
    /// Nil when it is what its name says (or was gone meanwhile).
    public func verify(_ blob: Blob) throws(TransferFailure) -> String? {
        let fd = Glibc.open(blob.path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else {
            if errno == ENOENT { return nil }
            throw .localIO(path: blob.path, operation: "open", errno: errno)
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw .localIO(path: blob.path, operation: "inspect", errno: errno) }
        let digests = try Self.digests(of: fd, length: Int64(info.st_size), path: blob.path, [.sha256, .sha512])
        let digest = digests[.sha256]!
        if digest == blob.sha256 {
            // Hashed now (and durable): trusted while it stays as it is, and reachable by its SHA-512.
            writeIndex(IndexRow(sha256: digest, sha512: digests[.sha512], stat: info), syncing: fd)
            return nil
        }
        quarantine(sha256: blob.sha256, ifStill: FileIdentity(info))
        return digest
    }

    /// Puts the file at `file` into the cache (hashing it): its SHA-256, and whether it was
    /// added (false: the cache held it already).
    public func add(file: String) throws(TransferFailure) -> (sha256: String, added: Bool) {
        let fd = Glibc.open(file, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .localIO(path: file, operation: "open", errno: errno) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw .localIO(path: file, operation: "inspect", errno: errno) }
        guard info.st_mode & S_IFMT == S_IFREG else { throw .localConflict("\(file) is not a regular file") }
        let size = Int64(info.st_size)
        let digests = try Self.digests(of: fd, length: size, path: file, [.sha256, .sha512])
        let digest = digests[.sha256]!
        defer { touch(sha256: digest) }
        let held = lookup(sha256: digest, size: size) != nil
        guard try insert(from: fd, length: size, digest: digest, otherDigest: digests[.sha512], indexing: true) != nil else {
            throw .localConflict("\(file) changed while it was put into the cache; add it again once it is still")
        }
        return (digest, !held)
    }

    private static func names(in directory: String) -> [String] {
        guard let stream = opendir(directory) else { return [] }
        defer { closedir(stream) }
        var names: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    private static func isDigest(_ text: String) -> Bool {
        isDigest(text, .sha256)
    }

    /// Whether `text` is a digest of `algorithm` in lowercase hex.
    static func isDigest(_ text: String, _ algorithm: DigestAlgorithm) -> Bool {
        text.utf8.count == algorithm.hexLength && text.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }

    /// Whether the cache and `root` are on one file system, judged by the nearest directory of
    /// each that exists (either may be made by the run); nil when neither can be looked at. On
    /// two, a placement can be no reflink: every one is a full copy.
    public func sharesFileSystem(with root: String) -> Bool? {
        func device(_ path: String) -> UInt64? {
            var current = path
            while true {
                var info = stat()
                if stat(current, &info) == 0 { return UInt64(info.st_dev) }
                guard let parent = FileSystem.parent(of: current), parent != current else { return nil }
                current = parent
            }
        }
        guard let mine = device(path), let theirs = device(root) else { return nil }
        return mine == theirs
    }

    /// Why a cache directory cannot be used.
    public struct Refusal: Error, CustomStringConvertible, Sendable {
        public let description: String
    }

    /// The cache a run of `manifest` uses: `flag` (`--cache`) over `variable` (`MIRROR_CACHE`,
    /// when not empty) over the manifest's `cache:`; none when `disabled` (`--no-cache`). A
    /// relative flag or variable is taken from `currentDirectory`. A cache that is the root or
    /// inside it is refused: a dest could overwrite a blob.
    public static func chosen(
        flag: String?, disabled: Bool, variable: String?, manifest: Manifest, currentDirectory: String
    ) throws(Refusal) -> BlobCache? {
        if disabled { return nil }
        let chosen: (path: String, from: String)
        if let flag {
            chosen = (flag, "--cache")
        } else if let variable, !variable.isEmpty {
            chosen = (variable, "MIRROR_CACHE")
        } else if let cache = manifest.cache {
            chosen = (cache, "cache")
        } else {
            return nil
        }
        let cache = BlobCache.at(chosen.path, from: currentDirectory, mode: manifest.cachePlacement)
        if LexicalPath.isWithin(cache.path, manifest.root) {
            throw Refusal(description: "\(chosen.from) \(cache.path) is the root \(manifest.root) or inside it: a dest could overwrite a blob; choose a directory outside the root")
        }
        return cache
    }

    /// The cache at `path`, a relative one taken from `currentDirectory`.
    public static func at(_ path: String, from currentDirectory: String, mode: Mode = .copy) -> BlobCache {
        BlobCache(path: LexicalPath.absolute(path, relativeTo: currentDirectory), mode: mode)
    }
}
