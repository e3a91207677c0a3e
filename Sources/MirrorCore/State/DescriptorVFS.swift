import CSQLite
import Glibc

/// A SQLite VFS, SQLite's own "unix" one but for how it names files: a path is used as given,
/// not resolved first.
///
/// The unix VFS turns every name into a "full pathname" by following each symbolic link on the
/// way (and `SQLITE_OPEN_NOFOLLOW` refuses a name with any link on it at all), then opens the
/// store, its `-wal` and its `-shm` by that resolved name. A store opened by
/// `/proc/self/fd/N/state.sqlite` would so be opened by whatever path the directory had at that
/// moment. Kept as given, the name goes to the kernel, which resolves `/proc/self/fd/N` to the
/// very directory the descriptor holds: the store and its files are found there, through a root
/// reached by symbolic links or not, and never anywhere else.
enum DescriptorVFS {
    static let name = "mirror-descriptor"

    /// Registers the VFS, once; whether it is there.
    static let isRegistered: Bool = {
        // Before `sqlite3_vfs_find` initialises SQLite.
        _ = mirror_sqlite_stop_counting_memory()
        guard let unix = sqlite3_vfs_find("unix") else { return false }
        let vfs = UnsafeMutablePointer<sqlite3_vfs>.allocate(capacity: 1)
        vfs.initialize(to: unix.pointee)
        vfs.pointee.pNext = nil
        vfs.pointee.zName = UnsafePointer(strdup(name))
        vfs.pointee.xFullPathname = { _, path, size, out in
            // Only the absolute names `path(of:in:)` makes are given to this VFS.
            guard let path, let out, path.pointee == CChar(UInt8(ascii: "/")) else { return SQLITE_CANTOPEN }
            let length = strlen(path)
            guard length < Int(size) else { return SQLITE_CANTOPEN }
            memcpy(out, path, length + 1)
            return SQLITE_OK
        }
        return sqlite3_vfs_register(vfs, 0) == SQLITE_OK
    }()

    /// The name by which SQLite opens `file` in the directory open as `descriptor`; valid
    /// while the descriptor is.
    static func path(of file: String, in descriptor: Int32) -> String {
        "/proc/self/fd/\(descriptor)/\(file)"
    }
}
