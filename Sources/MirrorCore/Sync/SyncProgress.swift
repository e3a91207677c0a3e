import Synchronization

/// Live counters of a sync, for a progress display. Written from the transfer thread and
/// the entry tasks, read by whoever draws: every access takes the lock.
public final class SyncProgress: Sendable {
    public struct ActiveTransfer: Sendable, Equatable {
        public var dest: String
        public var bytesDone: Int64
        public var bytesTotal: Int64?
    }

    public struct Snapshot: Sendable, Equatable {
        /// Bytes received by finished and running transfers in this run.
        public var bytesReceived: Int64
        /// Bytes still expected by running transfers, plus those received: an estimate of the
        /// run's total that grows as transfers start.
        public var bytesExpected: Int64
        public var entriesDone: Int
        public var entriesTotal: Int
        public var active: [ActiveTransfer]
    }

    private struct State {
        var nextTicket = 0
        var active: [Int: ActiveTransfer] = [:]
        var receivedByFinished: Int64 = 0
        var entriesDone = 0
        var entriesTotal = 0
    }

    private let state = Mutex(State())

    public init() {}

    public func snapshot() -> Snapshot {
        state.withLock { state in
            let active = state.active.sorted(by: { $0.key < $1.key }).map(\.value)
            let activeReceived = active.reduce(Int64(0)) { $0 + $1.bytesDone }
            let activeRemaining = active.reduce(Int64(0)) { $0 + max(0, ($1.bytesTotal ?? $1.bytesDone) - $1.bytesDone) }
            return Snapshot(
                bytesReceived: state.receivedByFinished + activeReceived,
                bytesExpected: state.receivedByFinished + activeReceived + activeRemaining,
                entriesDone: state.entriesDone,
                entriesTotal: state.entriesTotal,
                active: active
            )
        }
    }

    func setEntryCount(_ count: Int) {
        state.withLock { $0.entriesTotal = count }
    }

    func entryFinished() {
        state.withLock { $0.entriesDone += 1 }
    }

    /// Registers a running transfer; the ticket reports its bytes until `finish`.
    func startTransfer(dest: String, total: Int64?) -> ProgressTicket {
        let id = state.withLock { state in
            state.nextTicket += 1
            state.active[state.nextTicket] = ActiveTransfer(dest: dest, bytesDone: 0, bytesTotal: total)
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
            if let transfer = state.active.removeValue(forKey: id) {
                state.receivedByFinished += transfer.bytesDone
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

    func add(_ count: Int64) { progress.update(id) { $0.bytesDone += count } }
    /// Bytes this transfer is expected to receive.
    func setTotal(_ total: Int64) { progress.update(id) { $0.bytesTotal = total } }
    /// The transfer started over (the server ignored a range): count from zero again.
    func restart() { progress.update(id) { $0.bytesDone = 0 } }

    func finish() { progress.finish(id) }
}
