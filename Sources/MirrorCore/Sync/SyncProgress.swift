import Synchronization

/// Live counters of a sync, for a progress display. Written from the transfer thread and
/// the entry tasks, read by whoever draws: every access takes the lock.
///
/// Every sum saturates: sizes come from servers and manifests, and two entries of
/// `Content-Length: 9223372036854775807` must give a large total, not a trap.
public final class SyncProgress: Sendable {
    public struct ActiveTransfer: Sendable, Equatable {
        public var dest: String
        public var bytesDone: Int64
        /// Bytes this transfer is expected to receive, when known.
        public var bytesTotal: Int64?
    }

    public struct Snapshot: Sendable, Equatable {
        /// Bytes received by finished and running transfers in this run.
        public var bytesReceived: Int64
        /// Bytes known to be still to come: the rest of the running transfers, the rest of
        /// interrupted attempts that will be retried, and the pinned `size` of entries that have
        /// not started.
        public var bytesRemaining: Int64
        /// Unfinished entries whose size nobody knows yet (no pin, no reply so far): the
        /// remaining bytes are at least `bytesRemaining`.
        public var entriesOfUnknownSize: Int
        public var entriesDone: Int
        public var entriesTotal: Int
        /// Running transfers, oldest first.
        public var active: [ActiveTransfer]

        /// What the run is known to fetch in all, so far.
        public var bytesKnownTotal: Int64 { bytesReceived.saturatingAdding(bytesRemaining) }
    }

    private struct State {
        var nextTicket = 0
        var active: [Int: ActiveTransfer] = [:]
        var receivedByFinished: Int64 = 0
        var entriesDone = 0
        var entriesTotal = 0
        /// Unfinished entries that are not transferring right now, by dest: the bytes they
        /// are still expected to fetch, nil when unknown.
        var waiting: [String: Int64?] = [:]
    }

    private let state = Mutex(State())

    public init() {}

    public func snapshot() -> Snapshot {
        state.withLock { state in
            let active = state.active.sorted(by: { $0.key < $1.key }).map(\.value)
            let activeReceived = active.lazy.map(\.bytesDone).saturatingSum()
            let activeRemaining = active.lazy.map { max(0, ($0.bytesTotal ?? $0.bytesDone).saturatingSubtracting($0.bytesDone)) }.saturatingSum()
            let waitingRemaining = state.waiting.values.lazy.compactMap { $0 }.saturatingSum()
            return Snapshot(
                bytesReceived: state.receivedByFinished.saturatingAdding(activeReceived),
                bytesRemaining: activeRemaining.saturatingAdding(waitingRemaining),
                entriesOfUnknownSize: state.waiting.values.lazy.filter { $0 == nil }.count,
                entriesDone: state.entriesDone,
                entriesTotal: state.entriesTotal,
                active: active
            )
        }
    }

    /// The entries of the run, with the size each is expected to fetch when the manifest
    /// pins one (an entry found up to date later fetches nothing, and drops out).
    func expect(_ entries: [(dest: String, size: Int64?)]) {
        state.withLock { state in
            state.entriesTotal = entries.count
            for entry in entries { state.waiting[entry.dest] = .some(entry.size.map { max(0, $0) }) }
        }
    }

    func entryFinished(dest: String) {
        state.withLock { state in
            state.entriesDone += 1
            state.waiting[dest] = nil
        }
    }

    /// Registers a running transfer; the ticket reports its bytes until `finish`.
    func startTransfer(dest: String, total: Int64?) -> ProgressTicket {
        let id = state.withLock { state in
            state.nextTicket += 1
            state.active[state.nextTicket] = ActiveTransfer(dest: dest, bytesDone: 0, bytesTotal: total)
            state.waiting[dest] = nil
            return state.nextTicket
        }
        return ProgressTicket(progress: self, id: id)
    }

    fileprivate func update(_ id: Int, _ change: (inout ActiveTransfer) -> Void) {
        state.withLock { state in
            if var transfer = state.active[id] {
                change(&transfer)
                state.active[id] = transfer
            }
        }
    }

    fileprivate func finish(_ id: Int) {
        state.withLock { state in
            guard let transfer = state.active.removeValue(forKey: id) else { return }
            state.receivedByFinished = state.receivedByFinished.saturatingAdding(transfer.bytesDone)
            // A failed attempt is retried or its entry ends; until then what it did not fetch
            // is still to come. A successful one ends its entry, which drops this.
            if let total = transfer.bytesTotal {
                state.waiting[transfer.dest] = .some(max(0, total.saturatingSubtracting(transfer.bytesDone)))
            }
        }
    }
}

/// One transfer's handle on the shared progress.
final class ProgressTicket: Sendable {
    private let progress: SyncProgress
    private let id: Int

    fileprivate init(progress: SyncProgress, id: Int) {
        self.progress = progress
        self.id = id
    }

    func add(_ count: Int64) { progress.update(id) { $0.bytesDone = $0.bytesDone.saturatingAdding(count) } }
    /// Bytes this transfer is expected to receive.
    func setTotal(_ total: Int64) { progress.update(id) { $0.bytesTotal = total } }
    /// The transfer started over (the server ignored a range): count from zero again.
    func restart() { progress.update(id) { $0.bytesDone = 0 } }

    func finish() { progress.finish(id) }
}
