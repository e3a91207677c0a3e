import CLinux
import Glibc

/// What the store's file was when the connection that last wrote it closed cleanly: its
/// inode, size and modification time, kept on the file itself as an extended attribute
/// (`user.mirror.closed`), so the state directory holds no file more.
///
/// It decides whether an opening runs SQLite's `quick_check` (`needsCheck`), which reads every
/// page of the store (3.6 M instructions for 2,000 records, before the first request): not when
/// the mark is there and the file is still what it describes. A read-write opening removes the
/// mark before it reads anything, and a clean close writes it again, so a run that was killed
/// or crashed leaves none and the next opening checks. A file changed since its close (written,
/// truncated, replaced or restored from a copy) has another size, modification time or inode,
/// and is checked too; a close within the clock tick of the file's last write leaves no mark
/// (`canMark`), so the run after one that wrote its last records just then checks. A file
/// system without user extended attributes keeps no mark: every opening checks, as before the
/// mark.
struct StoreCloseMark: Equatable {
    var inode: UInt64
    var size: Int64
    var modifiedSeconds: Int
    var modifiedNanoseconds: Int

    static let attribute = "user.mirror.closed"
    /// The mark's format: a version, then the numbers, in decimal, separated by spaces.
    private static let version = "1"

    init(_ info: stat) {
        inode = UInt64(info.st_ino)
        size = Int64(info.st_size)
        modifiedSeconds = info.st_mtim.tv_sec
        modifiedNanoseconds = info.st_mtim.tv_nsec
    }

    /// The mark in `text`, or nil when it is not one this mirror wrote.
    init?(text: String) {
        let fields = text.split(separator: " ", omittingEmptySubsequences: false)
        guard fields.count == 5, fields[0] == Self.version,
              let inode = UInt64(fields[1]), let size = Int64(fields[2]),
              let seconds = Int(fields[3]), let nanoseconds = Int(fields[4]) else { return nil }
        self.inode = inode
        self.size = size
        modifiedSeconds = seconds
        modifiedNanoseconds = nanoseconds
    }

    var text: String {
        "\(Self.version) \(inode) \(size) \(modifiedSeconds) \(modifiedNanoseconds)"
    }

    /// Whether a store whose file is now `file` is to be checked on opening: unless `mark`, read
    /// from the file, still describes it.
    static func needsCheck(mark: StoreCloseMark?, file: stat) -> Bool {
        mark != StoreCloseMark(file)
    }

    /// The mark on the file open as `descriptor`; nil when it has none (or none that parses).
    static func read(_ descriptor: Int32) -> StoreCloseMark? {
        var buffer = [UInt8](repeating: 0, count: 96)
        let count = buffer.withUnsafeMutableBytes { fgetxattr(descriptor, attribute, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        return StoreCloseMark(text: String(decoding: buffer[..<count], as: UTF8.self))
    }

    /// Whether a file last modified as `file` says may be marked at `now`, a time of the clock
    /// file times are taken from (`CLOCK_REALTIME_COARSE`): only once that clock has moved past
    /// the modification. A write within the same tick of the clock (4 ms at most) could leave
    /// the file with the same size and modification time, and the mark would vouch for it. (On
    /// a file system that keeps coarser times than the clock, whole seconds, a write by another
    /// program within that second still could: `mirror` itself removes the mark before it
    /// writes.)
    static func canMark(file: stat, now: timespec) -> Bool {
        (now.tv_sec, now.tv_nsec) > (file.st_mtim.tv_sec, file.st_mtim.tv_nsec)
    }

    /// Marks the file open as `descriptor` as it is now; false when it is not marked (it cannot
    /// be, or `canMark` says not yet).
    @discardableResult
    static func write(_ descriptor: Int32) -> Bool {
        var info = stat()
        var now = timespec()
        guard fstat(descriptor, &info) == 0, clock_gettime(CLOCK_REALTIME_COARSE, &now) == 0,
              canMark(file: info, now: now) else { return false }
        let text = StoreCloseMark(info).text
        return text.withCString { fsetxattr(descriptor, attribute, $0, strlen($0), 0) } == 0
    }

    /// Removes the mark from the file open as `descriptor`, if it has one.
    static func remove(_ descriptor: Int32) {
        _ = fremovexattr(descriptor, attribute)
    }
}
