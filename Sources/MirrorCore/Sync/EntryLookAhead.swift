import Dispatch
import Synchronization

/// What an entry's inspection finds: `DEST` and `DEST.part`, and the store's record of the
/// `DEST` found (its problem, if any, told by the entry that uses it).
struct EntryLook: Sendable {
    let local: LocalFacts
    let record: RecordLookup

    /// Looks at `paths` in `root`, then asks `record` for the record of the `DEST` there. The
    /// one way an entry looks, on its turn or ahead of it (`EntryLookAhead`).
    static func make(_ paths: DestinationPaths, in root: RootDirectory,
                     record: (LocalIdentity?) -> RecordLookup) -> Result<EntryLook, TransferFailure> {
        Result { () throws(TransferFailure) in
            let local = try LocalFacts.inspect(paths, in: root)
            return EntryLook(local: local, record: record(local.destinationIdentity))
        }
    }
}

/// What was made and found for an entry ahead of its start (`EntryLookAhead`): what its driver
/// is made with, and what its first inspection would find (or why it could not look).
/// A class: it is handed from the look-ahead's table to the entry's driver, and as a struct
/// each hand-over copied it and retained everything it holds.
final class LookedAhead: Sendable {
    let prepared: EntryDriver.Prepared
    let look: Result<EntryLook, TransferFailure>
    /// When it was looked at (`MonotonicClock.milliseconds`).
    let at: Int64

    init(prepared: EntryDriver.Prepared, look: Result<EntryLook, TransferFailure>, at: Int64) {
        self.prepared = prepared
        self.look = look
        self.at = at
    }

    /// Facts found longer ago than this are looked at again at the entry's first inspection:
    /// an entry that waited that long for its turn (behind large downloads) decides on what
    /// the disk holds when its turn comes.
    static let freshFor: Int64 = 1_000

    /// Whether the facts may stand for a look at `now` (`MonotonicClock.milliseconds`).
    func isFresh(at now: Int64) -> Bool {
        now - at <= Self.freshFor
    }
}

/// Looks at the entries about to start, on a thread of its own, so that the engine's thread
/// does not: each entry's paths and sources (what its driver is made with), its `DEST` and
/// `DEST.part` (two `fstatat`) and its record, about 20,000 instructions and two system calls an
/// entry on the thread every request waits for. The run says how far ahead to look (`want`);
/// an entry that starts takes what was found for it (`take`), or, when nothing was (not looked
/// at yet), makes and looks for itself. Only an entry's first inspection uses what was found
/// ahead, and only if it was found recently (`LookedAhead.freshFor`).
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
        /// The entries that started, a bit each: one that started before it was looked at is
        /// not looked at, or what was found for it is dropped.
        var started: [UInt64]
        var stopping = false
        /// The thread waits for work: more entries wanted, or room in the window.
        var sleeping = false

        /// Whether a sleeping thread has something to do now; it is then no longer asleep. Not
        /// for one entry's room at a time: once a batch fits in the window, or when what was
        /// found runs low. Woken for every entry taken, the thread looked at one entry a wake
        /// (a plan of 100,000: about 100,000 wakes, each a `futex` call on the engine's thread
        /// and a switch to the look-ahead's).
        mutating func wakes(window: Int) -> Bool {
            guard sleeping, EntryLookAhead.hasBatch(looked: looked, wanted: wanted, found: found.count, window: window) else { return false }
            sleeping = false
            return true
        }

        func hasStarted(_ index: Int) -> Bool {
            started[index >> 6] & (1 << UInt64(index & 63)) != 0
        }

        mutating func markStarted(_ index: Int) {
            started[index >> 6] |= 1 << UInt64(index & 63)
        }
    }

    /// What is held for entries not started yet, at most: a run that passes over entries (a
    /// host at its `concurrency`) moves its next index far ahead, and the look-ahead must not
    /// follow it through the manifest. A run gives its width and two batches more
    /// (`window(width:)`), so that the thread is woken a batch at a time while the run takes.
    let window: Int

    /// The window for a run that works on `width` entries at once.
    static func window(width: Int) -> Int {
        max(1, width) + 2 * batch
    }

    /// What the engine's thread and the look-ahead's share.
    private final class Shared: Sendable {
        let state: Mutex<State>
        let work = DispatchSemaphore(value: 0)

        init(entries: Int) {
            state = Mutex(State(started: Array(repeating: 0, count: (entries + 63) / 64)))
        }
    }

    private let shared: Shared
    private let thread: JoinableThread

    /// - Parameter look: what an entry's first inspection finds, called on the look-ahead's
    ///   thread.
    /// - Parameter window: what is held for entries not started yet, at most.
    init(entries: [Entry], window: Int, look: @escaping @Sendable (Entry) -> LookedAhead) {
        let shared = Shared(entries: entries.count)
        self.shared = shared
        let window = max(1, window)
        self.window = window
        thread = JoinableThread {
            Self.keepLooking(entries: entries, shared: shared, window: window, look: look)
        }
    }

    deinit { stop() }

    /// Look at the entries from `start` (the run's next) up to `end` (in manifest order), from
    /// the engine's thread; a sleeping look-ahead is woken when a batch fits in its window, or
    /// at once when it holds less than a batch (woken only for a batch's worth with nothing in
    /// hand, it fell behind the run: a no-op of 2,000 took 128 ms instead of 113). Entries
    /// below `start` not started yet wait for their host (`hosts:` `concurrency`): they are not
    /// looked at, and what is held for them is let go, so that they do not fill the window
    /// while the run goes on with the entries after them; they look for themselves.
    func want(from start: Int, upTo end: Int) {
        let wake = shared.state.withLock { state -> Bool in
            guard !state.stopping else { return false }
            state.wanted = max(state.wanted, end)
            state.looked = max(state.looked, min(start, state.wanted))
            if state.found.keys.contains(where: { $0 < start }) {
                state.found = state.found.filter { $0.key >= start }
            }
            return state.wakes(window: window)
        }
        if wake { shared.work.signal() }
    }

    /// Entries looked at between two publications of what was found, and the room that wakes
    /// the look-ahead: a wake is a `futex` call on the engine's thread (`EasyHandleKeeper.maxReady`).
    static let batch = 64

    /// Whether a sleeping look-ahead is to be woken: entries are wanted that it has not looked
    /// at, and either a batch of them fits in the window beside the `found` held, or what is
    /// held is fewer than a batch (the run is about to take entries nothing was found for).
    static func hasBatch(looked: Int, wanted: Int, found: Int, window: Int) -> Bool {
        guard looked < wanted, found < window else { return false }
        return window - found >= batch || found < batch
    }

    /// What was found for entry `index`, taken as it starts (nil: nothing yet).
    func take(_ index: Int) -> LookedAhead? {
        let (found, wake) = shared.state.withLock { state in
            state.markStarted(index)
            let found = state.found.removeValue(forKey: index)
            return (found, found != nil && state.wakes(window: window))
        }
        if wake { shared.work.signal() }
        return found
    }

    /// The entries below this have been looked at (or passed).
    var lookedSoFar: Int { shared.state.withLock { $0.looked } }

    /// Stops looking and waits for the thread. Once; from any thread but the look-ahead's.
    func stop() {
        shared.state.withLock { state in
            state.stopping = true
            state.found = [:]
        }
        shared.work.signal()
        thread.join()
    }

    /// The thread's loop: looks at what is wanted, publishing in batches (one lock a batch, not
    /// one an entry), and sleeps when it has caught up or its window is full.
    private static func keepLooking(entries: [Entry], shared: Shared, window: Int, look: @Sendable (Entry) -> LookedAhead) {
        while true {
            // The next batch wanted, within the room the window leaves, less the entries that
            // started meanwhile; none: sleep until `want` or `take` makes some.
            let (range, started, stopping) = shared.state.withLock { state in
                let room = max(0, window - state.found.count)
                let range = state.looked..<min(state.wanted, state.looked + min(Self.batch, room))
                if range.isEmpty { state.sleeping = true }
                return (range, range.filter { state.hasStarted($0) }, state.stopping)
            }
            if stopping { return }
            if range.isEmpty {
                shared.work.wait()
                continue
            }
            let found = range.filter { !started.contains($0) }.map { ($0, look(entries[$0])) }
            shared.state.withLock { state in
                // Nothing is kept once the look-ahead is stopping, nor for entries that started
                // or were passed over (below `looked`, moved on by `want`) meanwhile.
                for (index, looked) in found where !state.stopping && !state.hasStarted(index) && index >= state.looked {
                    state.found[index] = looked
                }
                state.looked = max(state.looked, range.upperBound)
            }
        }
    }
}
