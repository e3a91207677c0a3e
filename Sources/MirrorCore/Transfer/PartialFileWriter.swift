import Glibc

/// Receives a GET's body into an open `.part` file, applying `BodyPlacement` and the size
/// guards: it never writes a byte that does not belong at its offset, and never grows the file
/// past the size the response, the manifest's `size` pin or `max_size` allows.
///
/// A new file's body of at most `holdLimit` bytes may be held in memory instead (`holding`):
/// the partial file is then neither made nor touched, nor its version recorded, until the body
/// is written out whole by the group commit, on its thread, or the bytes go to the file after
/// all (`spill`): when the body outgrows the limit, or the attempt ends without a commit.
/// Creating a file costs more than its request on a busy directory (ext4 looks for a free
/// inode), and the engine's thread no longer pays for it. What a crash leaves is what it left
/// before the file was opened: the partial file and its record as they were.
///
/// Used by one thread at a time (see `ResponseBodySink`).
final class PartialFileWriter: ResponseBodySink, @unchecked Sendable {
    /// The open partial file; -1 while it waits to be opened (`opener`).
    private(set) var fd: Int32
    let path: String
    let requestedOffset: Int64
    let expectedTotal: Int64?
    let pinnedSize: Int64?
    let maxSize: Int64?
    /// Given each chunk once it is written, and told when the file starts over.
    private(set) var hasher: TrailingHasher?
    /// Opens the file and its hasher when the writer was made before it (`fd` -1): the
    /// request's owner calls `openIfWaiting` once the request is sent, and the reply's head
    /// calls it at the latest, so no byte is taken before the file is open.
    private var opener: (() throws(TransferFailure) -> (fd: Int32, hasher: TrailingHasher))?
    let progress: ProgressTicket?
    /// Validators of the version already on disk, checked against a 206 (see `BodyPlacement`).
    let startedFrom: RemoteValidators?
    /// Local bytes just before the resume point, re-requested to check that the bytes on disk
    /// are the server's: the response must start with exactly these. Not written again.
    let overlap: [UInt8]
    /// Told once where writing starts (0: a new version), before the first byte is written,
    /// and only once the overlap (if any) has matched: a response is vouched for only then.
    /// A failure it returns stops the transfer before that byte.
    let onStart: (@Sendable (ResponseHead, Int64) -> TransferFailure?)?
    private var overlapChecked = 0
    private var startFrom: Int64?

    private(set) var head: ResponseHead?
    private(set) var placement: BodyPlacement?
    /// Size of the file's valid content so far.
    private(set) var position: Int64
    /// Where the bytes in the file (not counting those still buffered or held) end.
    var flushedPosition: Int64 { position - Int64(buffered) - Int64(held.count) }
    /// Body bytes written by this request.
    private(set) var bytesWritten: Int64 = 0
    private(set) var failure: TransferFailure?
    private var limit: Int64?
    /// Body bytes received but not yet written: libcurl hands them over 16 KiB at a time, and
    /// a pwrite (and a wakeup of the hashing thread) per 16 KiB cost more than copying them
    /// into one write per `bufferSize`. Only for bodies longer than that. Once written, the
    /// buffer goes to the hasher, which gives back another.
    private var buffer: UnsafeMutableRawBufferPointer?
    private var buffered = 0
    static let bufferSize = 1 << 20
    /// The longest body held in memory (`holding`); 0: none is. Below the smallest file that
    /// may be split into segments (`SegmentMinimum.floor`): a held body is never a lead's.
    let holdLimit: Int
    static let defaultHoldLimit = 64 << 10
    /// The body so far is in `held`, not in the file, which is not open (see the type).
    private(set) var holding = false
    private var held: [UInt8] = []

    init(
        fd: Int32, path: String, requestedOffset: Int64, expectedTotal: Int64?, pinnedSize: Int64?,
        maxSize: Int64?, hasher: TrailingHasher?, progress: ProgressTicket?,
        startedFrom: RemoteValidators? = nil, overlap: [UInt8] = [],
        onStart: (@Sendable (ResponseHead, Int64) -> TransferFailure?)? = nil,
        opener: (() throws(TransferFailure) -> (fd: Int32, hasher: TrailingHasher))? = nil,
        holdLimit: Int = 0
    ) {
        self.opener = opener
        // Only a new file's body, written from its first byte into a file still to be made.
        self.holdLimit = opener != nil && requestedOffset == 0 && overlap.isEmpty && startedFrom == nil ? holdLimit : 0
        self.startedFrom = startedFrom
        self.overlap = overlap
        self.onStart = onStart
        self.fd = fd
        self.path = path
        self.requestedOffset = requestedOffset
        self.expectedTotal = expectedTotal
        self.pinnedSize = pinnedSize
        self.maxSize = maxSize
        self.hasher = hasher
        self.progress = progress
        self.position = requestedOffset
    }

    deinit {
        buffer?.deallocate()
    }

    /// Opens the file if it waits to be opened; whether it is open (when opening failed,
    /// now or before, `failure` says why).
    @discardableResult
    func openIfWaiting() -> Bool {
        if let opener {
            self.opener = nil
            do throws(TransferFailure) {
                (fd, hasher) = try opener()
            } catch {
                failure = error
            }
        }
        return fd >= 0
    }

    /// The file is yet to be opened (`openIfWaiting`).
    var waitsToOpen: Bool { opener != nil }

    /// The body may be held in memory, so the file is opened at the reply's head at the
    /// earliest, and only for a body that is not held.
    var mayHold: Bool { holdLimit > 0 }

    /// The request ended before the file was opened: it never will be, unless the body is held
    /// (`spill` opens it then).
    func forgoOpening() {
        if !holding { opener = nil }
    }

    /// The whole body, held in memory (nil when it went to the file, or none is held): the
    /// commit writes it.
    var heldBody: [UInt8]? { holding ? held : nil }

    /// Writes the held body to the partial file, opened (emptied) now, after the version it is
    /// of is recorded (`onStart`), as if it had been written as it came; nil when nothing is
    /// held. Returns why it could not, the file then holding what was written of it.
    func spill() -> TransferFailure? {
        guard holding else { return nil }
        holding = false
        let bytes = held
        held = []
        guard openIfWaiting() else { return failure ?? .localConflict("internal error: no partial file to write \(path) to") }
        startFrom = 0
        guard announceStart() else { return failure }
        if bytes.isEmpty { return nil }
        let written = bytes.withUnsafeBytes { writeOut($0, endingAt: Int64(bytes.count)) }
        return written ? nil : failure
    }

    /// The held body is done with (committed, or its file removed): it is let go, with what
    /// would have opened the file.
    func release() {
        holding = false
        held = []
        opener = nil
    }

    func begin(_ head: ResponseHead) -> BodyDisposition {
        self.head = head
        let placement = BodyPlacement.decide(
            offset: requestedOffset, head: head, expectedTotal: expectedTotal, startedFrom: startedFrom,
            rangeRequested: !overlap.isEmpty)
        let holds: Bool = {
            guard mayHold, case .write(from: 0, let total) = placement else { return false }
            return total.map { $0 <= Int64(holdLimit) } ?? true
        }()
        guard holds || openIfWaiting() else { return .abort }
        self.placement = placement
        switch placement {
        case .alreadyComplete:
            return .discard
        case .reject(let failure):
            self.failure = failure
            // An error page is small and reading it keeps the connection reusable; a wrong
            // 2xx body may be the whole file, so stop it.
            return head.isSuccess ? .abort : .discard
        case .write(let from, let total):
            if let pinnedSize, let total, total != pinnedSize {
                failure = .sizePinConflict(pinned: pinnedSize, remote: total)
                return .abort
            }
            if let maxSize, let total, total > maxSize {
                failure = .bodyTooLarge(limit: maxSize)
                return .abort
            }
            if from != requestedOffset {
                // The server ignored the range or the file changed: the bytes on disk are stale.
                // The hasher starts over first, so it never reads the file mid-truncation.
                buffered = 0
                hasher?.restart()
                if ftruncate(fd, 0) != 0 {
                    failure = .localIO(path: path, operation: "truncate", errno: errno)
                    return .abort
                }
                progress?.restart()
                overlapChecked = overlap.count
            }
            position = from
            limit = [total, pinnedSize, maxSize].compactMap { $0 }.min()
            if holds {
                // Its start is recorded when it is written (`spill`), or not at all: the commit
                // records the complete file.
                holding = true
                held.reserveCapacity(Int(total ?? 16 << 10))
                if let total { progress?.setTotal(total) }
                return .write
            }
            if total.map({ $0 - from > Int64(Self.bufferSize) }) ?? true, buffer == nil {
                buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.bufferSize, alignment: 16)
            }
            if let total { progress?.setTotal(total - from) }
            startFrom = from
            if overlapChecked >= overlap.count, !announceStart() { return .abort }
            return .write
        }
    }

    /// False when `onStart` refused: `failure` says why.
    private func announceStart() -> Bool {
        guard let from = startFrom, let head else { return true }
        startFrom = nil
        if let refused = onStart?(head, from) {
            failure = refused
            return false
        }
        return true
    }

    func write(_ incoming: UnsafeRawBufferPointer) -> Bool {
        var bytes = incoming
        if overlapChecked < overlap.count {
            let compared = min(bytes.count, overlap.count - overlapChecked)
            let matches = overlap[overlapChecked..<(overlapChecked + compared)].withUnsafeBytes {
                memcmp($0.baseAddress!, bytes.baseAddress!, compared) == 0
            }
            if !matches {
                failure = .rangeMismatch("the bytes before the resume point differ from the server's; the file changed")
                return false
            }
            overlapChecked += compared
            position += Int64(compared)
            if overlapChecked == overlap.count, !announceStart() { return false }
            bytes = UnsafeRawBufferPointer(rebasing: bytes[compared...])
            if bytes.isEmpty { return true }
        }
        let count = Int64(bytes.count)
        if let limit, position + count > limit {
            failure = .bodyTooLarge(limit: limit)
            return false
        }
        if holding {
            if held.count + bytes.count <= holdLimit {
                held.append(contentsOf: bytes)
                position += count
                bytesWritten += count
                progress?.add(count)
                return true
            }
            // Longer than a held body may be: from here on, to the file, through the buffer a
            // body of unknown length gets (`begin`).
            if spill() != nil { return false }
            if case .write(_, nil)? = placement, buffer == nil {
                buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.bufferSize, alignment: 16)
            }
        }
        if let size = buffer?.count, bytes.count < size {
            if buffered + bytes.count > size, !flush() { return false }
            // After a flush this is the buffer the hasher gave back, not the one it took.
            let buffer = self.buffer!
            UnsafeMutableRawBufferPointer(rebasing: buffer[buffered..<(buffered + bytes.count)]).copyMemory(from: bytes)
            buffered += bytes.count
        } else {
            guard flush(), writeOut(bytes, endingAt: position + count) else { return false }
        }
        position += count
        bytesWritten += count
        progress?.add(count)
        return true
    }

    /// Writes what is buffered and gives the buffer back: the writer lives on while its file
    /// is hashed, fsync'd and renamed, and a megabyte per entry in that state adds up.
    func end() {
        _ = flush()
        buffer?.deallocate()
        buffer = nil
    }

    /// Writes the buffered bytes, which end at `position`, and hands the buffer to the hasher
    /// (which gives back one to fill next): the bytes are hashed where they are, not copied.
    private func flush() -> Bool {
        guard buffered > 0, let buffer else { return true }
        defer { buffered = 0 }
        guard writeToFile(UnsafeRawBufferPointer(rebasing: buffer[0..<buffered]), endingAt: position) else { return false }
        if let hasher { self.buffer = hasher.hash(handingOver: buffer, count: buffered, endingAt: position) }
        return true
    }

    /// Writes bytes that are not in the buffer (libcurl's) so that they end at `end`, and
    /// gives the hasher a copy.
    private func writeOut(_ bytes: UnsafeRawBufferPointer, endingAt end: Int64) -> Bool {
        guard writeToFile(bytes, endingAt: end) else { return false }
        hasher?.hash(copying: bytes, endingAt: end)
        return true
    }

    private func writeToFile(_ bytes: UnsafeRawBufferPointer, endingAt end: Int64) -> Bool {
        do {
            try FileSystem.write(bytes, to: fd, at: end - Int64(bytes.count), path: path)
        } catch {
            failure = error
            return false
        }
        return true
    }
}
