import CLinux
import Dispatch
import Glibc
import Synchronization

/// The SHA-256 of a file that is being written, computed beside the writer instead of in its
/// way: the transfer thread only announces how far the file is written; a thread of the
/// hasher's own reads those bytes back (from the page cache) and hashes them. A resumed file's
/// existing prefix is hashed the same way, while the rest downloads.
///
/// Small files never get a thread: what is left is hashed in `finish`, on the caller's thread.
final class TrailingHasher: Sendable {
    private struct State {
        /// Bytes of the file that are written and may be hashed.
        var target: Int64 = 0
        /// Bumped when the file starts over from byte 0.
        var generation = 0
        var finishing = false
        var abandoned = false
        var threadStarted = false
        var result: Swift.Result<String, TransferFailure>?
    }

    private let fd: Int32
    private let path: String
    /// Start writeback of each hashed chunk, so the fsync before the rename finds little to do.
    private let startWriteback: Bool
    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    /// Below this many bytes, hashing at the end costs less than a thread.
    static let threadThreshold: Int64 = 8 << 20
    static let chunk = 1 << 20

    /// - Parameter fd: the open file; it must stay open until `finish` or `abandon` returns.
    init(fd: Int32, path: String, startWriteback: Bool = false) {
        self.fd = fd
        self.path = path
        self.startWriteback = startWriteback
    }

    /// The file is written up to `position`.
    func advance(to position: Int64) {
        let startThread = state.withLock { state -> Bool in
            state.target = position
            guard !state.threadStarted, position >= Self.threadThreshold else { return false }
            state.threadStarted = true
            return true
        }
        if startThread {
            DetachedThread.start { [self] in run() }
        }
        wake.signal()
    }

    /// The file was truncated: hash from byte 0 again.
    func restart() {
        state.withLock { state in
            state.generation += 1
            state.target = 0
        }
        wake.signal()
    }

    /// The digest of the first `size` bytes, once they are all hashed.
    func finish(size: Int64) throws(TransferFailure) -> String {
        let threaded = state.withLock { state -> Bool in
            state.target = size
            state.finishing = true
            return state.threadStarted
        }
        guard threaded else {
            let hasher = SHA256Hasher()
            try hasher.update(fileDescriptor: fd, length: size, path: path)
            return hasher.finalize()
        }
        wake.signal()
        finished.wait()
        return try state.withLock { $0.result! }.get()
    }

    /// Stops the thread without a result; call before closing the file on failure paths.
    func abandon() {
        let threaded = state.withLock { state -> Bool in
            state.abandoned = true
            return state.threadStarted && state.result == nil
        }
        guard threaded else { return }
        wake.signal()
        finished.wait()
    }

    private func run() {
        let hasher = SHA256Hasher()
        var hashed: Int64 = 0
        var generation = 0
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.chunk, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let now = state.withLock { $0 }
            if now.abandoned { return complete(.failure(.cancelled)) }
            if now.generation != generation {
                hasher.reset()
                hashed = 0
                generation = now.generation
            }
            if hashed < now.target {
                let wanted = Int(min(Int64(Self.chunk), now.target - hashed))
                let count = pread(fd, buffer.baseAddress, wanted, off_t(hashed))
                if count < 0 {
                    if errno == EINTR { continue }
                    return complete(.failure(.localIO(path: path, operation: "read", errno: errno)))
                }
                if count == 0 {
                    // The file may have been truncated after `now` was read: look again.
                    if state.withLock({ $0.generation }) != generation { continue }
                    return complete(.failure(.sizeMismatch(expected: now.target, actual: hashed)))
                }
                hasher.update(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
                if startWriteback { _ = mirror_start_writeback(fd, hashed, Int64(count)) }
                hashed += Int64(count)
                continue
            }
            if now.finishing { return complete(.success(hasher.finalize())) }
            wake.wait()
        }
    }

    private func complete(_ result: Swift.Result<String, TransferFailure>) {
        state.withLock { $0.result = result }
        finished.signal()
    }
}
