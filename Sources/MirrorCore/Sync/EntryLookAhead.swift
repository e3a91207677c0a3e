import Dispatch
import Synchronization

/// What an entry's first inspection found, looked at ahead of its turn (`EntryLookAhead`):
/// `DEST` and `DEST.part` (or why they could not be looked at), and the store's record.
struct LookedAhead: Sendable {
    let facts: Result<LocalFacts, TransferFailure>
    let record: StateRecord?
    let recordUnreadable: Bool
    /// When it was looked at (`MonotonicClock.milliseconds`).
    let at: Int64

    /// Looked-ahead facts older than this are looked at again: an entry that waited that long
    /// for its turn (behind large downloads) decides on what the disk holds when its turn comes.
    static let freshFor: Int64 = 1_000
}

/// Looks at the entries about to start, on a thread of its own, so that the engine's thread
/// does not: each entry's `DEST` and `DEST.part` (two `fstatat`) and its record, about 7,000
/// instructions and two system calls an entry on the thread every request waits for. The run
/// says how far ahead to look (`want`); an entry that starts takes what was found for it
/// (`take`), or, when nothing was (not looked at yet, or too long ago), looks for itself.
/// Only an entry's first attempt uses what was found ahead.
///
/// The facts are those a look at the entry's turn would find, a few milliseconds earlier:
/// nothing else in the run touches an entry's files before it starts (its dest is its own),
/// and what the machine then does with `DEST` checks it again (a kept `DEST` is compared with
/// its recorded identity, a new version replaces it by a rename).
final class EntryLookAhead: Sendable {
    private struct State {
        /// Entries below this index are to be looked at.
        var wanted = 0
        /// Entries below this index have been looked at (or passed).
        var looked = 0
        var found: [Int: LookedAhead] = [:]
        /// Entries that started before they were looked at: what is found for them is dropped.
        var passed: Set<Int> = []
        var stopping = false
    }

    /// What the engine's thread and the look-ahead's share.
    private final class Shared: Sendable {
        let state = Mutex(State())
        let work = DispatchSemaphore(value: 0)
    }

    private let shared = Shared()
    private let thread: JoinableThread

    /// - Parameter look: what an entry's first inspection finds, called on the look-ahead's
    ///   thread.
    init(entries: [Entry], look: @escaping @Sendable (Entry) -> LookedAhead) {
        let shared = self.shared
        thread = JoinableThread {
            Self.keepLooking(entries: entries, shared: shared, look: look)
        }
    }

    deinit { stop() }

    /// Look at the entries below `end` (in manifest order), from the engine's thread; a
    /// sleeping look-ahead is woken at once (woken only for a batch's worth, it fell behind the
    /// run: a no-op of 2,000 took 128 ms instead of 113).
    func want(upTo end: Int) {
        let wake = shared.state.withLock { state -> Bool in
            guard end > state.wanted, !state.stopping else { return false }
            let idle = state.looked == state.wanted
            state.wanted = end
            return idle
        }
        if wake { shared.work.signal() }
    }

    /// Entries looked at between two publications of what was found.
    static let batch = 16

    /// What was found for entry `index`, taken (nil: nothing yet, or nothing recent).
    func take(_ index: Int, now: Int64) -> LookedAhead? {
        shared.state.withLock { state in
            guard let found = state.found.removeValue(forKey: index) else {
                if index >= state.looked, index < state.wanted { state.passed.insert(index) }
                return nil
            }
            return now - found.at <= LookedAhead.freshFor ? found : nil
        }
    }

    /// The entries below this have been looked at (or passed).
    var lookedSoFar: Int { shared.state.withLock { $0.looked } }

    /// Stops looking and waits for the thread. Once; from any thread but the look-ahead's.
    func stop() {
        shared.state.withLock { $0.stopping = true }
        shared.work.signal()
        thread.join()
    }

    /// The thread's loop: looks at what is wanted, publishing in batches (one lock a batch, not
    /// one an entry), and sleeps when it has caught up.
    private static func keepLooking(entries: [Entry], shared: Shared, look: @Sendable (Entry) -> LookedAhead) {
        while true {
            shared.work.wait()
            while true {
                let (range, stopping) = shared.state.withLock { ($0.looked..<min($0.wanted, $0.looked + Self.batch), $0.stopping) }
                if stopping { return }
                if range.isEmpty { break }
                let found = range.map { ($0, look(entries[$0])) }
                shared.state.withLock { state in
                    for (index, looked) in found where state.passed.remove(index) == nil {
                        state.found[index] = looked
                    }
                    state.looked = range.upperBound
                }
            }
        }
    }
}
