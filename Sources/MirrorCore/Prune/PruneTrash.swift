import CLinux
import Glibc

/// How `--prune` removes a file it has checked, so that a file put at its name after the check
/// is never the one removed.
///
/// An unlink by name after a check removes whatever has the name by then. Instead the file is
/// renamed into `.mirror-trash`, a private (0700) directory made beside it: in the file's own
/// directory, and so on its own file system whatever is mounted where (rename(2) cannot cross
/// file systems, and a `state_dir`, or a directory under the root, may be on another). There,
/// through the trash's descriptor, the file that arrived is compared with the one checked
/// (inode, size, mtime): the same is unlinked; another (a user's, swapped in meanwhile) is moved
/// back, never over a file that has taken its name since (then it stays in the trash, reported).
///
/// The state store notes each move before it is made (`Note`, in the store whose records the
/// prune deletes) and forgets it once nothing is left in the trash: a prune interrupted in
/// between leaves notes, which the next unsharded `sync` finishes (`finishLeftovers`) and `plan`,
/// `verify` and shards report (`pending`).
enum PruneTrash {
    /// The trash's name in each directory prune deletes from; no dest may use it.
    static let directoryName = DestinationPath.reservedTrashDirectory

    /// A move into the trash: the file's path relative to the root, and the identity it was
    /// checked at.
    struct Note: Sendable, Equatable {
        var path: String
        var identity: LocalIdentity
    }

    /// What the trash holds under a file's name.
    enum Found: Equatable {
        case nothing
        case file(LocalIdentity)
        /// Not a regular file.
        case other
    }

    enum Decision: Equatable {
        /// The file that was checked: unlink it.
        case delete
        /// Not the file that was checked: put it back where it was.
        case moveBack
        /// Nothing there (never moved, or gone since): only the note goes.
        case forget
    }

    /// What becomes of what the trash holds under a name, against the identity the file was
    /// checked at before it was moved there.
    static func decide(checked: LocalIdentity, found: Found) -> Decision {
        switch found {
        case .nothing: .forget
        case .file(let identity): identity == checked ? .delete : .moveBack
        case .other: .moveBack
        }
    }

    /// How one removal (or one leftover) ended.
    enum Removal: Equatable {
        case deleted
        /// Nothing was there to remove.
        case vanished
        /// Another file than the one checked had the name: it was put back.
        case restored
        /// Another file than the one checked had the name, and a third has taken the name
        /// since: the second stays in the trash.
        case keptInTrash
        /// Why nothing could be done.
        case failed(String)
    }

    /// Removes the file `name` of `directory` (at `path` under the root) if it is the file
    /// checked as `checked`, through the trash, noting the move in `store` meanwhile.
    static func remove(_ name: String, in directory: Int32, path: String, checked: LocalIdentity, store: StateStore) -> Removal {
        guard let trash = openTrash(in: directory, create: true) else {
            return .failed("\(directoryName) could not be made beside it (\(String(cString: strerror(errno)))); kept")
        }
        var removal: Removal
        if look(name, in: trash) != .nothing {
            // Another prune's leftover, whose note is its own.
            removal = .failed("\(directoryName)/\(name) beside it is in the way (left by an interrupted prune?); kept")
        } else {
            do {
                try store.noteTrash(Note(path: path, identity: checked))
                removal = moveAside(name, from: directory, into: trash) ?? settle(name, in: trash, directory: directory, checked: checked)
                if look(name, in: trash) == .nothing { try? store.forgetTrash(path) }
            } catch {
                removal = .failed("the move to \(directoryName) could not be noted in \(store.path) (\(error)); kept")
            }
        }
        close(trash)
        // Only an empty one goes.
        unlinkat(directory, directoryName, AT_REMOVEDIR)
        return removal
    }

    /// Deletes or puts back what `decide` says for the file `name` in `trash`.
    static func settle(_ name: String, in trash: Int32, directory: Int32, checked: LocalIdentity) -> Removal {
        switch decide(checked: checked, found: look(name, in: trash)) {
        case .forget:
            return .vanished
        case .delete:
            if unlinkat(trash, name, 0) == 0 || errno == ENOENT { return .deleted }
            return .failed("delete: \(String(cString: strerror(errno))); kept in \(directoryName)")
        case .moveBack:
            if mirror_rename_noreplace(trash, name, directory, name) == 0 { return .restored }
            var code = errno
            if code == EINVAL {
                // No RENAME_NOREPLACE on this file system: a hard link cannot replace a file either.
                if linkat(trash, name, directory, name, 0) == 0 {
                    unlinkat(trash, name, 0)
                    return .restored
                }
                code = errno
            }
            if code == EEXIST { return .keptInTrash }
            return .failed("moving it back: \(String(cString: strerror(code))); kept in \(directoryName)")
        }
    }

    /// Moves `name` from `directory` into `trash`; nil when it is there now.
    private static func moveAside(_ name: String, from directory: Int32, into trash: Int32) -> Removal? {
        if mirror_rename_noreplace(directory, name, trash, name) == 0 { return nil }
        var code = errno
        if code == EINVAL, look(name, in: trash) == .nothing {
            // No RENAME_NOREPLACE on this file system; the trash is private and holds nothing
            // of that name, so a plain rename replaces nothing.
            if renameat(directory, name, trash, name) == 0 { return nil }
            code = errno
        }
        return code == ENOENT ? .vanished : .failed("moving it to \(directoryName): \(String(cString: strerror(code))); kept")
    }

    /// The trash in `directory`, opened without following a symbolic link (made, 0700, when
    /// `create`); nil with errno set when there is none or it cannot be had.
    private static func openTrash(in directory: Int32, create: Bool) -> Int32? {
        if create && mkdirat(directory, directoryName, 0o700) != 0 && errno != EEXIST { return nil }
        let fd = openat(directory, directoryName, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        return fd >= 0 ? fd : nil
    }

    private static func look(_ name: String, in trash: Int32) -> Found {
        var info = stat()
        guard fstatat(trash, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { return errno == ENOENT ? .nothing : .other }
        return info.st_mode & S_IFMT == S_IFREG ? .file(LocalIdentity(info)) : .other
    }

    // MARK: Leftovers of an interrupted prune

    /// Finishes the moves `store` noted and no prune finished: the file checked is deleted,
    /// another is put back (or, when its name is taken, kept in the trash and reported); then
    /// the notes of what is settled go. What was done, for each leftover found.
    static func finishLeftovers(in root: RootDirectory, store: StateStore) -> [PruneLeftover] {
        guard let notes = try? store.trashNotes() else { return [] }
        var finished: [PruneLeftover] = []
        for note in notes {
            let (relativeDirectory, name) = split(note.path)
            var removal = Removal.vanished
            var remains = false
            do {
                _ = try root.withDirectory(relativeDirectory) { directory in
                    guard let trash = openTrash(in: directory, create: false) else { return }
                    removal = settle(name, in: trash, directory: directory, checked: note.identity)
                    remains = look(name, in: trash) != .nothing
                    close(trash)
                    unlinkat(directory, directoryName, AT_REMOVEDIR)
                }
            } catch {
                // A symbolic link on the way: nothing is looked at behind it, and the note stays.
                removal = .failed("\(error)")
                remains = true
            }
            if !remains { try? store.forgetTrash(note.path) }
            if let state = PruneLeftover.State(removal) {
                finished.append(PruneLeftover(path: note.path, trashPath: trashPath(of: note.path), state: state))
            }
        }
        return finished
    }

    /// The leftovers the notes in `stores` name that are still in a trash, for runs that
    /// leave them to the next unsharded sync (`plan`, `verify`, shards). Reads only.
    static func pending(in root: RootDirectory, stores: [StateStore]) -> [PruneLeftover] {
        var found: [PruneLeftover] = []
        for store in stores {
            for note in (try? store.trashNotes()) ?? [] {
                let (relativeDirectory, name) = split(note.path)
                let there = try? root.withDirectory(relativeDirectory) { directory -> Bool in
                    guard let trash = openTrash(in: directory, create: false) else { return false }
                    defer { close(trash) }
                    return look(name, in: trash) != .nothing
                }
                if there == true {
                    found.append(PruneLeftover(path: note.path, trashPath: trashPath(of: note.path), state: .pending))
                }
            }
        }
        return found
    }

    /// Where the file at `path` (relative to the root) goes in its directory's trash.
    static func trashPath(of path: String) -> String {
        let (directory, name) = split(path)
        return (directory.isEmpty ? "" : directory + "/") + directoryName + "/" + name
    }

    private static func split(_ path: String) -> (directory: String, name: String) {
        guard let slash = path.lastSlash else { return ("", path) }
        return (String(path[..<slash]), String(path[path.index(after: slash)...]))
    }
}

/// A file an interrupted prune left in a directory's `.mirror-trash` (see `PruneTrash`).
public struct PruneLeftover: Sendable, Equatable, CustomStringConvertible {
    public enum State: Sendable, Equatable {
        /// Left for the next unsharded `sync` to finish.
        case pending
        /// The file the prune had checked: deleted now.
        case deleted
        /// Not the file the prune had checked: put back at its path.
        case restored
        /// Not the file the prune had checked, and its path is taken, or it could not be moved:
        /// kept in the trash, why.
        case kept(String)

        init?(_ removal: PruneTrash.Removal) {
            switch removal {
            case .deleted: self = .deleted
            case .restored: self = .restored
            case .keptInTrash: self = .kept("another file has its name now")
            case .failed(let why): self = .kept(why)
            case .vanished: return nil
            }
        }
    }

    /// Where the file was, relative to the root.
    public var path: String
    /// Where it is (or was), relative to the root.
    public var trashPath: String
    public var state: State

    /// The state's name in JSON.
    public var stateName: String {
        switch state {
        case .pending: "pending"
        case .deleted: "deleted"
        case .restored: "restored"
        case .kept: "kept"
        }
    }

    public var description: String {
        switch state {
        case .pending:
            "\(path): an interrupted prune left it in \(trashPath); the next unsharded sync deletes it if it is the file the prune checked, and puts it back otherwise"
        case .deleted:
            "\(path): finished an interrupted prune: deleted \(trashPath), the file it had checked"
        case .restored:
            "\(path): an interrupted prune had moved another file than the one it checked to \(trashPath); put it back"
        case .kept(let why):
            "\(path): an interrupted prune left another file than the one it checked in \(trashPath), and it is kept there: \(why)"
        }
    }
}
