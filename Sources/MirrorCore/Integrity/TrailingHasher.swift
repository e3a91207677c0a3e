import CLinux
import Dispatch
import Glibc
import Synchronization

/// The digest (SHA-256, or SHA-512 for an entry pinned by one) of a file that is being written,
/// computed beside the writer instead of in its way. The transfer thread hands over each chunk just after writing it (`hash(handingOver:…)`,
/// `hash(copying:…)`) and goes on at once; a thread of the hasher's own hashes the chunks in
/// file order from memory, so the bytes are hashed as they were written, not as the file reads
/// later. Bytes the hasher is only told are on disk (`advance(to:)`: a resumed file's prefix,
/// or chunks written while `HashingMemory` was spent) are read back from the file in their
/// place in that order.
///
/// Memory is bounded twice: a file's writer waits while its hasher's thread has more than
/// `queueLimit` bytes queued, and all files together hold at most `HashingMemory`'s limit;
/// a chunk that would pass it is not kept but read back.
///
/// Small files never get a thread: their chunks wait in memory (under `threadThreshold` bytes)
/// and are hashed in `finish`, on the caller's thread.
final class TrailingHasher: Sendable {
    /// Memory the hasher owns.
    private struct Block: @unchecked Sendable {
        let memory: UnsafeMutableRawBufferPointer
        /// A writer's buffer: handed back to the writer once hashed. A copy is freed instead.
        let reusable: Bool
    }

    /// Bytes `[start, end)` of the file: hashed from `block` when the hasher holds them, else
    /// read from the file.
    private struct Piece {
        var start: Int64
        var end: Int64
        var block: Block?
    }

    private enum Step {
        case hash(Piece)
        /// The file was truncated: forget what was hashed.
        case startOver(generation: Int)
        case wait
        case finish
        case stop
    }

    private struct State {
        /// What is announced and not yet hashed, in file order, each piece starting where the
        /// one before ends.
        var pieces: [Piece] = []
        /// Where the announced bytes end.
        var announced: Int64 = 0
        /// Bumped when the file starts over from byte 0.
        var generation = 0
        var finishing = false
        var abandoned = false
        var threadStarted = false
        /// No more bytes are taken, and none are held.
        var over = false
        var result: Swift.Result<String, TransferFailure>?
        /// Hashed writer buffers, ready to be handed back.
        var spare: [Block] = []
        /// Bytes of the blocks held (queued, being hashed or spare), all reserved in `memory`.
        var held = 0
        /// The writer waits for the queue to shrink below `TrailingHasher.queueLimit`.
        var writerWaits = false

        /// True when the writer should wait: the thread is hashing from memory, with more
        /// queued than `queueLimit`. Never while bytes are to be read back (a resumed file's
        /// prefix, perhaps from a slow disk): the download goes on meanwhile, held under
        /// `HashingMemory` and then read back too.
        var isFull: Bool {
            threadStarted && !over
                && held - spare.reduce(0, { $0 + $1.memory.count }) > TrailingHasher.queueLimit
                && pieces.allSatisfy { $0.block != nil }
        }

        /// The bytes up to `end` are on disk: those not announced yet will be read back.
        mutating func announce(to end: Int64) {
            guard !over, end > announced else { return }
            if let last = pieces.indices.last, pieces[last].block == nil {
                pieces[last].end = end
            } else {
                pieces.append(Piece(start: announced, end: end, block: nil))
            }
            announced = end
        }

        /// Queues the bytes of `block` as `[start, end)`; false (not taken) unless they are
        /// the next bytes of the file, or after a gap that is then read back.
        mutating func take(_ block: Block, from start: Int64, to end: Int64) -> Bool {
            guard !over, start >= announced else { return false }
            announce(to: start)
            pieces.append(Piece(start: start, end: end, block: block))
            announced = end
            held += block.memory.count
            return true
        }

        /// True once, when the bytes waiting are worth a thread.
        mutating func threadIsDue() -> Bool {
            guard !threadStarted, !over, announced >= TrailingHasher.threadThreshold else { return false }
            threadStarted = true
            return true
        }

        mutating func nextStep(generation hashing: Int) -> Step {
            if abandoned { return .stop }
            if generation != hashing { return .startOver(generation: generation) }
            guard let first = pieces.first else { return finishing ? .finish : .wait }
            if first.block != nil { return .hash(pieces.removeFirst()) }
            // Read back a chunk at a time, so a truncation or an abandon is seen between chunks.
            let end = min(first.end, first.start + Int64(TrailingHasher.chunk))
            if end == first.end { pieces.removeFirst() } else { pieces[0].start = end }
            return .hash(Piece(start: first.start, end: end, block: nil))
        }

        /// Keeps a hashed block for the writer, or frees it.
        mutating func hashed(_ block: Block, memory: HashingMemory, drained: DispatchSemaphore) {
            if writerWaits { drained.signal() }
            if block.reusable, !over {
                spare.append(block)
            } else {
                free(block, memory: memory)
            }
        }

        /// Drops what is queued (the file starts over).
        mutating func dropPieces(memory: HashingMemory) {
            for piece in pieces { if let block = piece.block { free(block, memory: memory) } }
            pieces = []
            announced = 0
        }

        /// Frees everything held; the hasher takes no more bytes.
        mutating func end(memory: HashingMemory, drained: DispatchSemaphore) {
            dropPieces(memory: memory)
            for block in spare { free(block, memory: memory) }
            spare = []
            over = true
            if writerWaits { drained.signal() }
        }

        private mutating func free(_ block: Block, memory: HashingMemory) {
            held -= block.memory.count
            memory.release(block.memory.count)
            block.memory.deallocate()
        }
    }

    private let fd: Int32
    private let path: String
    private let algorithm: DigestAlgorithm
    /// Start writeback of each chunk its thread hashes, so the fsync before the rename finds
    /// little to do (a file hashed only at the end is left to the group commit, which starts it).
    private let startWriteback: Bool
    private let memory: HashingMemory
    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    /// Signalled as the thread hashes a queued block while the writer waits.
    private let drained = DispatchSemaphore(value: 0)
    /// Below this many bytes waiting, hashing at the end costs less than a thread, and holding
    /// the bytes until then costs little memory.
    static let threadThreshold: Int64 = 1 << 20
    /// The most a file's writer hands over before it waits for the hasher's thread (see
    /// `isFull`): two write buffers, so that the writer fills one while the thread hashes
    /// another. SHA-256 (1.2–1.7 GB/s on one core here) is slower than loopback HTTP, and the
    /// file is complete only once it is hashed: running the download further ahead buys
    /// nothing, holds memory, and past `HashingMemory` has the bytes read back, a copy more
    /// for the thread that is already the slower one.
    static let queueLimit = 2 << 20
    /// The most read back from the file at once.
    static let chunk = 1 << 20

    /// - Parameters:
    ///   - fd: the open file; it must stay open until `finish` or `abandon` returns.
    ///   - algorithm: the digest `finish` returns.
    ///   - memory: the budget the bytes waiting to be hashed are held under.
    init(fd: Int32, path: String, algorithm: DigestAlgorithm = .sha256, startWriteback: Bool = false, memory: HashingMemory = .shared) {
        self.fd = fd
        self.algorithm = algorithm
        self.path = path
        self.startWriteback = startWriteback
        self.memory = memory
    }

    deinit {
        state.withLock { $0.end(memory: memory, drained: drained) }
    }

    /// The file is written up to `position`; bytes up to there that were not handed over are
    /// read back from the file (a resumed file's prefix: call before the first new byte).
    func advance(to position: Int64) {
        let startThread = state.withLock { state -> Bool in
            state.announce(to: position)
            return state.threadIsDue()
        }
        wakeWorker(startingIt: startThread)
    }

    /// Takes `buffer`, whose first `count` bytes were just written to the file ending at
    /// `end`, to hash them from memory, and returns the buffer (of the same size) to fill
    /// next. When `HashingMemory` is spent, keeps nothing and returns `buffer` itself: its
    /// bytes will be read back from the file.
    func hash(handingOver buffer: UnsafeMutableRawBufferPointer, count: Int, endingAt end: Int64) -> UnsafeMutableRawBufferPointer {
        guard count > 0 else { return buffer }
        let block = Block(memory: buffer, reusable: true)
        let reserved = memory.reserve(buffer.count)
        let (taken, spare, startThread) = state.withLock { state -> (Bool, Block?, Bool) in
            guard reserved, state.take(block, from: end - Int64(count), to: end) else {
                state.announce(to: end)
                return (false, nil, state.threadIsDue())
            }
            let spare = state.spare.popLast()
            if let spare {
                // It leaves the hasher: the writer owns it now.
                state.held -= spare.memory.count
                memory.release(spare.memory.count)
            }
            return (true, spare, state.threadIsDue())
        }
        if reserved, !taken { memory.release(buffer.count) }
        wakeWorker(startingIt: startThread)
        waitWhileFull()
        guard taken else { return buffer }
        return spare?.memory ?? UnsafeMutableRawBufferPointer.allocate(byteCount: buffer.count, alignment: 16)
    }

    /// Copies `bytes`, just written to the file ending at `end`, to hash them from memory; or,
    /// when `HashingMemory` is spent, notes that they are to be read back.
    func hash(copying bytes: UnsafeRawBufferPointer, endingAt end: Int64) {
        guard !bytes.isEmpty else { return }
        var copy: Block?
        if memory.reserve(bytes.count) {
            let duplicate = UnsafeMutableRawBufferPointer.allocate(byteCount: bytes.count, alignment: 16)
            duplicate.copyMemory(from: bytes)
            copy = Block(memory: duplicate, reusable: false)
        }
        let (refused, startThread) = state.withLock { state -> (Block?, Bool) in
            guard let copy, state.take(copy, from: end - Int64(bytes.count), to: end) else {
                state.announce(to: end)
                return (copy, state.threadIsDue())
            }
            return (nil, state.threadIsDue())
        }
        if let refused {
            memory.release(refused.memory.count)
            refused.memory.deallocate()
        }
        wakeWorker(startingIt: startThread)
    }

    /// Holds the writer until the hasher's thread has no more than `queueLimit` queued. The
    /// thread needs nothing from the writer's to get there, and a megabyte takes it about a
    /// millisecond: the transfer thread (and its other transfers) waits about that long, and
    /// its download goes at the speed of the hash, which it could not finish before anyway.
    private func waitWhileFull() {
        while state.withLock({ state -> Bool in
            state.writerWaits = state.isFull
            return state.writerWaits
        }) {
            drained.wait()
        }
    }

    /// The file was truncated: hash from byte 0 again. Call before truncating it.
    func restart() {
        state.withLock { state in
            state.generation += 1
            state.dropPieces(memory: memory)
        }
        wakeWorker(startingIt: false)
    }

    /// The digest of the file's first `size` bytes, once they are all hashed: those announced
    /// (handed over, or read back), then any after them read back from the file.
    func finish(size: Int64) throws(TransferFailure) -> String {
        let (threaded, announced) = state.withLock { state -> (Bool, Int64) in
            state.announce(to: size)
            state.finishing = true
            return (state.threadStarted, state.announced)
        }
        if announced > size {
            abandon()
            throw .sizeMismatch(expected: size, actual: announced)
        }
        let result: Swift.Result<String, TransferFailure>
        if threaded {
            wake.signal()
            finished.wait()
            result = state.withLock { $0.result! }
        } else {
            // Hashed here, at the end: the group commit starts the whole file's writeback just
            // before its fsync, off this (often the engine's) thread.
            result = drain(startingWriteback: false)
            state.withLock { $0.end(memory: memory, drained: drained) }
        }
        return try result.get()
    }

    /// Stops hashing without a result and frees what is held; call before closing the file on
    /// failure paths.
    func abandon() {
        let threaded = state.withLock { state -> Bool in
            state.abandoned = true
            guard state.threadStarted else {
                state.end(memory: memory, drained: drained)
                return false
            }
            return state.result == nil
        }
        guard threaded else { return }
        wake.signal()
        finished.wait()
    }

    private func wakeWorker(startingIt start: Bool) {
        if start {
            DetachedThread.start { [self] in
                let result = drain(startingWriteback: startWriteback)
                state.withLock { state in
                    state.result = result
                    state.end(memory: memory, drained: drained)
                }
                finished.signal()
            }
        } else if state.withLock({ $0.threadStarted }) {
            wake.signal()
        }
    }

    /// Hashes the pieces in order until `finish` or `abandon`: on the hasher's thread, or on
    /// `finish`'s caller when no thread was started.
    private func drain(startingWriteback: Bool) -> Swift.Result<String, TransferFailure> {
        let hasher = DigestHasher(algorithm)
        var generation = 0
        var readBuffer: UnsafeMutableRawBufferPointer?
        defer { readBuffer?.deallocate() }
        while true {
            switch state.withLock({ $0.nextStep(generation: generation) }) {
            case .stop:
                return .failure(.cancelled)
            case .finish:
                return .success(hasher.finalize())
            case .wait:
                wake.wait()
            case .startOver(let now):
                hasher.reset()
                generation = now
            case .hash(let piece):
                let count = Int(piece.end - piece.start)
                if let block = piece.block {
                    hasher.update(UnsafeRawBufferPointer(rebasing: block.memory[0..<count]))
                    state.withLock { $0.hashed(block, memory: memory, drained: drained) }
                } else {
                    let buffer = readBuffer ?? UnsafeMutableRawBufferPointer.allocate(byteCount: Self.chunk, alignment: 16)
                    readBuffer = buffer
                    switch readBack(piece, into: buffer, generation: generation) {
                    case .success(true):
                        hasher.update(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
                    case .success(false):
                        // Truncated under us: the next step starts over.
                        continue
                    case .failure(let failure):
                        return .failure(failure)
                    }
                }
                if startingWriteback { _ = mirror_start_writeback(fd, piece.start, piece.end - piece.start) }
            }
        }
    }

    /// Reads the bytes of `piece` from the file into `buffer`: false if the file ended early
    /// because it started over since `generation`, a failure if it ended early otherwise.
    private func readBack(
        _ piece: Piece, into buffer: UnsafeMutableRawBufferPointer, generation: Int
    ) -> Swift.Result<Bool, TransferFailure> {
        let count = Int(piece.end - piece.start)
        var done = 0
        while done < count {
            let read = pread(fd, buffer.baseAddress! + done, count - done, off_t(piece.start) + off_t(done))
            if read < 0 {
                if errno == EINTR { continue }
                return .failure(.localIO(path: path, operation: "read", errno: errno))
            }
            if read == 0 {
                if state.withLock({ $0.generation }) != generation { return .success(false) }
                return .failure(.sizeMismatch(expected: piece.end, actual: piece.start + Int64(done)))
            }
            done += read
        }
        return .success(true)
    }
}
