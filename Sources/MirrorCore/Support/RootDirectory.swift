import CLinux
import Glibc
import Synchronization

/// The root of a run's destinations, held open as a directory descriptor, from which every
/// path under it is resolved without following a symbolic link.
///
/// Checking a path and then using it by name is a race: a directory swapped for a symlink in
/// between leads the write out of the root. So each operation opens the directory that holds
/// its file from the root's descriptor, with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`
/// or, on kernels without it, one component at a time with `O_NOFOLLOW`, and then creates,
/// opens, renames or removes the file relative to that directory's descriptor. A symbolic link
/// met on the way is refused, even one that would stay inside the root.
///
/// The root itself is the user's choice and is followed like any path they name. It is opened
/// once, when first needed: a `plan` of a root that does not exist yet opens and creates nothing.
public final class RootDirectory: Sendable {
    public let path: String
    /// The root's descriptor once opened, -1 before: read without a lock by every entry's
    /// inspection, on however many threads (`verify`'s workers).
    private let descriptor = Atomic<Int32>(-1)

    /// Cleared for the rest of the process when the kernel turns out not to have openat2.
    private static let kernelHasOpenat2 = Atomic<Bool>(true)
    private static let directoryFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC

    /// Whether openat2 is tried before the walk; off only to test the walk on any kernel.
    private let kernelResolution: Bool

    public convenience init(path: String) {
        self.init(path: path, kernelResolution: true)
    }

    init(path: String, kernelResolution: Bool) {
        self.path = path
        self.kernelResolution = kernelResolution
    }

    deinit {
        let fd = descriptor.load(ordering: .acquiring)
        if fd >= 0 { close(fd) }
    }

    /// Runs `body` with a descriptor of `relative` (a directory path under the root without `.`
    /// or `..` components; empty for the root), opened without following a symbolic link, and
    /// closes it afterwards; the root's own is the one held open, which `body` must not close.
    /// Returns nil without calling `body` when that directory, or a
    /// directory on the way, does not exist and `create` is false.
    /// - Parameters:
    ///   - create: make missing directories, with the umask's permissions.
    ///   - durable: fsync the parent of each directory made, so that a file renamed into it
    ///     later cannot vanish with it in a power loss.
    /// - Throws: `.localConflict` naming the symbolic link on the way; `.localIO` naming the
    ///   path that could not be opened or made.
    func withDirectory<Result>(
        _ relative: String, create: Bool = false, durable: Bool = false,
        _ body: (Int32) throws(TransferFailure) -> Result
    ) throws(TransferFailure) -> Result? {
        guard let root = try rootDescriptor(create: create) else { return nil }
        // Most entries live in the root itself: no descriptor of their own to open and close.
        if relative.isEmpty { return try body(root) }
        guard let directory = try open(relative, from: root, create: create, durable: durable) else { return nil }
        defer { close(directory) }
        return try body(directory)
    }

    /// A descriptor of the directory `relative` under the root (not empty), opened as
    /// `withDirectory` opens it, for the caller to close; nil when it or the root does not exist.
    func openDirectory(_ relative: String) throws(TransferFailure) -> Int32? {
        guard let root = try rootDescriptor(create: false) else { return nil }
        return try open(relative, from: root, create: false, durable: false)
    }

    /// fsync of the directory `relative` under the root; the errno of a failure.
    func syncDirectory(_ relative: String) -> Int32? {
        do {
            let failure = try withDirectory(relative) { directory in fsync(directory) == 0 ? nil : errno }
            return failure ?? ENOENT
        } catch {
            if case .localIO(_, _, let code) = error { return code }
            return ELOOP
        }
    }

    /// The absolute path of `relative`, for messages.
    func absolute(_ relative: String) -> String {
        relative.isEmpty ? path : (path.endsWithSlash ? path : path + "/") + relative
    }

    /// The root's descriptor, opened the first time it exists (or, with `create`, is made).
    /// Opened outside any lock: while the root does not exist, every entry's look fails on its
    /// own (`ENOENT`) rather than queueing behind the others' failures, which on two cores made
    /// a `verify` of 100,000 entries spend half its time spinning for a lock. Two threads that
    /// both open it keep the first descriptor stored and close the other.
    private func rootDescriptor(create: Bool) throws(TransferFailure) -> Int32? {
        let known = descriptor.load(ordering: .acquiring)
        if known >= 0 { return known }
        guard let opened = try FileSystem.openDirectory(path, create: create) else { return nil }
        let (stored, current) = descriptor.compareExchange(expected: -1, desired: opened, ordering: .acquiringAndReleasing)
        if stored { return opened }
        close(opened)
        return current
    }

    private func open(_ relative: String, from root: Int32, create: Bool, durable: Bool) throws(TransferFailure) -> Int32? {
        if kernelResolution && Self.kernelHasOpenat2.load(ordering: .relaxed) {
            let fd = mirror_openat_beneath(root, relative, Self.directoryFlags)
            if fd >= 0 { return fd }
            switch errno {
            case ENOSYS, EPERM:
                // Before Linux 5.6, or a seccomp filter that does not know the call.
                Self.kernelHasOpenat2.store(false, ordering: .relaxed)
            case ENOENT where !create:
                return nil
            default:
                // Missing directories to make, a symlink or a file on the way: the walk below
                // makes them or names the component at fault.
                break
            }
        }
        return try walk(relative, from: root, create: create, durable: durable)
    }

    /// Opens `relative` one component at a time, each relative to the last with `O_NOFOLLOW`.
    private func walk(_ relative: String, from root: Int32, create: Bool, durable: Bool) throws(TransferFailure) -> Int32? {
        var current = openat(root, ".", Self.directoryFlags)
        if current < 0 { throw .localIO(path: path, operation: "open", errno: errno) }
        var walked = path.endsWithSlash ? String(path.dropLast()) : path
        for component in relative.split(separator: "/", omittingEmptySubsequences: true) {
            let name = String(component)
            walked += "/" + name
            var next = openat(current, name, Self.directoryFlags)
            if next < 0, errno == ENOENT, create {
                if mkdirat(current, name, 0o777) == 0 {
                    if durable && fsync(current) != 0 {
                        let code = errno
                        close(current)
                        throw .localIO(path: LexicalPath.directory(of: walked), operation: "fsync directory", errno: code)
                    }
                } else if errno != EEXIST {
                    let code = errno
                    close(current)
                    throw .localIO(path: walked, operation: "create directory", errno: code)
                }
                next = openat(current, name, Self.directoryFlags)
            }
            if next < 0 {
                let code = errno
                let isLink = Self.isSymbolicLink(name, in: current)
                close(current)
                if isLink { throw Self.refusal(walked) }
                if !create && (code == ENOENT || code == ENOTDIR) { return nil }
                throw .localIO(path: walked, operation: create ? "create directory" : "open", errno: code)
            }
            close(current)
            current = next
        }
        return current
    }

    private static func isSymbolicLink(_ name: String, in directory: Int32) -> Bool {
        var info = stat()
        return fstatat(directory, name, &info, AT_SYMLINK_NOFOLLOW) == 0 && info.st_mode & S_IFMT == S_IFLNK
    }

    /// The failure for a symbolic link met under the root.
    static func refusal(_ path: String) -> TransferFailure {
        .localConflict("\(path) is a symbolic link; mirror follows no symbolic link under the root, so that nothing is written outside it")
    }
}
