import CLinux
import Glibc
import Synchronization

/// Where `mirror` keeps its run locks and state stores: `ROOT/.mirror`, or the manifest's
/// `state_dir` (`--state-dir`). Held open as a directory descriptor, through which everything
/// in it is reached, so that a root reached through symbolic links (`/srv -> /data/srv`, a
/// relative `--root` through a link) keeps its locks and stores like any other.
///
/// - `ROOT/.mirror` is opened from the root's descriptor and must be a real directory: a
///   symbolic link there is refused, never followed, so no lock or store is made outside the
///   root.
/// - A `state_dir` is the user's choice and is followed like any path they name, as the root
///   is. It may not be the root or lie inside it (a web server that serves the root would serve
///   the store, and a dest could overwrite it), and while it is used `ROOT/.mirror` must not
///   exist: a run of the same root that keeps its state there would take other locks and read
///   other records (see `refusal()`).
///
/// Lock files are opened with `openat` from the descriptor. SQLite opens files by name, so a
/// store is opened by `/proc/self/fd/N/NAME` (see `DescriptorVFS`): a name the kernel resolves to
/// this very directory, whatever the path to it and whatever is renamed meanwhile.
public final class StateDirectory: Sendable {
    /// The name of the state directory inside the root when no `state_dir` is given.
    static let insideRootName = DestinationPath.reservedDirectory

    private enum Place: Sendable {
        case insideRoot
        /// `state_dir`: an absolute path.
        case separate(String)
    }

    let root: RootDirectory
    private let place: Place
    private let descriptor = Mutex<Int32?>(nil)

    /// The directory's path, for messages: `ROOT/.mirror` or the `state_dir`.
    public let path: String

    /// The state directory of `root`: `separate` when given (an absolute `state_dir`), else
    /// `ROOT/.mirror`.
    init(root: RootDirectory, separate: String? = nil) {
        self.root = root
        if let separate {
            place = .separate(separate)
            path = separate
        } else {
            place = .insideRoot
            path = root.absolute(Self.insideRootName)
        }
    }

    /// The state directory a run of `manifest` uses, in its root.
    public convenience init(for manifest: Manifest) {
        self.init(root: RootDirectory(path: manifest.root), separate: manifest.stateDirectory)
    }

    deinit {
        if let fd = descriptor.withLock({ $0 }) { close(fd) }
    }

    /// The path of the file `name` in this directory, for messages.
    func file(_ name: String) -> String {
        (path.endsWithSlash ? path : path + "/") + name
    }

    /// Runs `body` with the directory's descriptor (which stays open: do not close it). Nil
    /// without calling `body` when the directory does not exist and `create` is false.
    /// - Throws: `.localConflict` when `ROOT/.mirror` is a symbolic link, or when a `state_dir`
    ///   cannot be used (see `refusal()`); `.localIO` naming what could not be opened or made.
    func withDescriptor<Result>(
        create: Bool, _ body: (Int32) throws(TransferFailure) -> Result
    ) throws(TransferFailure) -> Result? {
        guard let fd = try open(create: create) else { return nil }
        return try body(fd)
    }

    /// Whether the directory exists and can be used (it is then held open); false also when
    /// it cannot be opened, which `withDescriptor` says.
    var exists: Bool {
        ((try? open(create: false)) ?? nil) != nil
    }

    /// Why a run may not use this state directory at all, or nil. Creates and changes nothing:
    /// what `plan` and `verify` ask before they read, as `sync` does before it locks.
    public func refusal() -> String? {
        guard case .separate = place else { return nil }
        do {
            try checkApart()
        } catch {
            return error.description
        }
        return nil
    }

    private func open(create: Bool) throws(TransferFailure) -> Int32? {
        try descriptor.withLock { (held: inout Int32?) throws(TransferFailure) -> Int32? in
            if let held { return held }
            switch place {
            case .insideRoot:
                held = try openInsideRoot(create: create)
            case .separate(let path):
                // Before anything is made: a state_dir under the root would be made in it.
                try checkApart()
                held = try FileSystem.openDirectory(path, create: create)
            }
            return held
        }
    }

    private func openInsideRoot(create: Bool) throws(TransferFailure) -> Int32? {
        do {
            return try root.withDirectory(Self.insideRootName, create: create) { directory throws(TransferFailure) in
                let copy = dup(directory)
                if copy < 0 { throw .localIO(path: path, operation: "open", errno: errno) }
                return copy
            }
        } catch {
            guard case .localConflict = error else { throw error }
            throw .localConflict("\(path) is a symbolic link; mirror keeps its lock and state store only in a real directory inside the root (remove the link, or move what it points to there), or in a state_dir outside the root")
        }
    }

    /// Checks that a `state_dir` is apart from the root: not the root nor inside it (judged by
    /// the directory, or its nearest ancestor that exists: what it would be made in), and no
    /// `ROOT/.mirror` beside it. A root that does not exist yet holds neither.
    private func checkApart() throws(TransferFailure) {
        let stateFD = nearestExisting()
        defer { if let stateFD { close(stateFD) } }
        do {
            _ = try root.withDirectory("") { rootFD throws(TransferFailure) in
                var leftover = stat()
                if fstatat(rootFD, Self.insideRootName, &leftover, AT_SYMLINK_NOFOLLOW) == 0 {
                    let inside = root.absolute(Self.insideRootName)
                    throw .localConflict("state_dir is \(path), but \(inside) exists too: runs that keep their state there take other locks and read other records. While no run is going, move its files into \(path) (mv \(inside)/* \(path)/ && rmdir \(inside)), or remove it to start afresh")
                }
                if let stateFD, Self.isWithin(stateFD, rootFD) {
                    throw .localConflict("state_dir \(path) is the root \(root.path) or inside it: a web server that serves the root would serve the state store too, and a dest could overwrite it; choose a directory outside the root")
                }
            }
        } catch {
            // A root that cannot be opened is the run's own failure, met where it writes.
            guard case .localConflict = error else { return }
            throw error
        }
    }

    /// A location descriptor (`O_PATH`) of the `state_dir`, or of its nearest ancestor that
    /// exists; nil when none can be opened.
    private func nearestExisting() -> Int32? {
        var candidate = path
        // A bound, not an expectation: each step removes a component.
        for _ in 0..<4096 {
            let fd = mirror_open_directory_location(AT_FDCWD, candidate)
            if fd >= 0 { return fd }
            guard errno == ENOENT, candidate != "/" else { return nil }
            candidate = LexicalPath.directory(of: candidate)
        }
        return nil
    }

    /// Whether the directory `inner` is `outer` or lies below it: walks up from `inner` through
    /// `..` (by identity, so symbolic links and bind mounts on the paths do not matter) until the
    /// file system's root. A parent that cannot be opened ends the walk: not within, as far as
    /// can be told.
    static func isWithin(_ inner: Int32, _ outer: Int32) -> Bool {
        var target = stat()
        guard fstat(outer, &target) == 0 else { return false }
        var current = mirror_open_directory_location(inner, ".")
        guard current >= 0 else { return false }
        defer { close(current) }
        // Deeper than PATH_MAX allows paths to be; a bound, not an expectation.
        for _ in 0..<4096 {
            var here = stat()
            guard fstat(current, &here) == 0 else { return false }
            if here.st_dev == target.st_dev && here.st_ino == target.st_ino { return true }
            let parent = mirror_open_directory_location(current, "..")
            guard parent >= 0 else { return false }
            var above = stat()
            let atTop = fstat(parent, &above) != 0 || (above.st_dev == here.st_dev && above.st_ino == here.st_ino)
            close(current)
            current = parent
            if atTop { return false }
        }
        return false
    }
}
