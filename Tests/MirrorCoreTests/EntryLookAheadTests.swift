import Dispatch
import Foundation
import Synchronization
import Testing
@testable import MirrorCore

/// The look-ahead hands each entry what was found for it once, only when it was asked for, and
/// never what was found for an entry that started without it; facts found long ago do not stand
/// for the entry's look.
struct EntryLookAheadTests {
    /// What the look found for an entry, recognisable by its size: the entry's index.
    static func found(_ index: Int, at: Int64) -> LookedAhead {
        LookedAhead(prepared: EntryDriver.Prepared(paths: DestinationPaths(root: "/r", dest: "f\(index)"), sources: [], conditional: []),
                    look: .success(EntryLook(local: LocalFacts(destination: .file(size: Int64(index)), partial: .missing),
                                             record: RecordLookup(record: nil, unreadable: false, problem: nil))),
                    at: at)
    }

    static func index(of entry: Entry) -> Int {
        Int(entry.dest.dropFirst())!
    }

    /// Waits (at most 5 s) until `lookAhead` has looked at the entries below `end`.
    static func awaitLooked(_ lookAhead: EntryLookAhead, upTo end: Int) -> Bool {
        for _ in 0..<500 {
            if lookAhead.lookedSoFar >= end { return true }
            usleep(10_000)
        }
        return false
    }

    /// Counts the looks of a look-ahead.
    final class Looks: Sendable {
        private let count = Mutex(0)
        var made: Int { count.withLock { $0 } }
        func add() { count.withLock { $0 += 1 } }
    }

    /// A look-ahead over `count` entries whose look finds each entry's index, counted.
    static func counting(_ count: Int, window: Int) -> (EntryLookAhead, Looks) {
        let looks = Looks()
        let lookAhead = EntryLookAhead(entries: (0..<count).map { ShardingTests.entry("f\($0)") }, window: window) { entry in
            looks.add()
            return Self.found(Self.index(of: entry), at: 1_000)
        }
        return (lookAhead, looks)
    }

    /// As a run takes them, one at a time with the window moving along: however the wakes fall
    /// (a batch at a time), every entry finds what was looked at for it, none is looked at
    /// twice, and the look-ahead never holds more than its window.
    @Test func aRunTakingEntriesOneByOneFindsEachLookedAt() throws {
        let count = 500
        let window = EntryLookAhead.window(width: 16)
        let (lookAhead, looks) = Self.counting(count, window: window)
        defer { lookAhead.stop() }
        var found = 0
        for index in 0..<count {
            lookAhead.want(from: index, upTo: min(count, index + window))
            #expect(Self.awaitLooked(lookAhead, upTo: index + 1), "entry \(index) was never looked at")
            if lookAhead.take(index) != nil { found += 1 }
            #expect(lookAhead.lookedSoFar - index <= window)
        }
        #expect(found == count)
        #expect(looks.made == count)
    }

    @Test func eachEntryGetsWhatWasFoundForItOnceAndOnlyWhatWasAskedFor() throws {
        let (lookAhead, looks) = Self.counting(40, window: 64)
        defer { lookAhead.stop() }
        lookAhead.want(from: 0, upTo: 20)
        #expect(Self.awaitLooked(lookAhead, upTo: 20))
        let first = try #require(lookAhead.take(3))
        guard case .success(let facts) = first.look else { Issue.record("\(first.look)"); return }
        #expect(facts.local.destination == .file(size: 3))
        #expect(lookAhead.take(3) == nil, "taken once")
        let last = try #require(lookAhead.take(19))
        guard case .success(let lastFacts) = last.look else { Issue.record("\(last.look)"); return }
        #expect(lastFacts.local.destination == .file(size: 19))
        #expect(lookAhead.take(20) == nil, "not asked for")
        #expect(looks.made == 20, "only the entries asked for are looked at")
        // Found too long ago, the facts do not stand for the entry's look (what it is made with
        // does).
        let old = try #require(lookAhead.take(10))
        #expect(!old.isFresh(at: 1_000 + LookedAhead.freshFor + 1))
        #expect(old.isFresh(at: 1_000 + LookedAhead.freshFor))
        #expect(old.prepared.paths.name == "f10")
    }

    /// An entry that starts while its look is still to come looks for itself, and what is found
    /// for it afterwards is dropped (not kept for the rest of the run).
    @Test func anEntryThatStartedFirstIsPassedOver() throws {
        let entries = (0..<40).map { ShardingTests.entry("f\($0)") }
        let gate = DispatchSemaphore(value: 0)
        let lookAhead = EntryLookAhead(entries: entries, window: 64) { entry in
            let index = Self.index(of: entry)
            if index == 0 { gate.wait() }
            return Self.found(index, at: 1_000)
        }
        defer { lookAhead.stop() }
        lookAhead.want(from: 0, upTo: 8)
        // The look is held at entry 0: entry 5 starts before it is looked at.
        #expect(lookAhead.take(5) == nil)
        gate.signal()
        #expect(Self.awaitLooked(lookAhead, upTo: 8))
        #expect(lookAhead.take(6) != nil)
        #expect(lookAhead.take(5) == nil, "found after its entry started: dropped")
        #expect(lookAhead.take(0) != nil)
    }

    /// However far the run's next entry moves (entries passed over for a host at its
    /// `concurrency`), the look-ahead holds at most its window of entries not started, and looks
    /// further only as entries start and take theirs.
    @Test func whatIsHeldStaysWithinTheWindow() throws {
        let (lookAhead, looks) = Self.counting(200, window: 8)
        defer { lookAhead.stop() }
        lookAhead.want(from: 0, upTo: 200)
        #expect(Self.awaitLooked(lookAhead, upTo: 8))
        usleep(50_000)
        #expect(looks.made == 8, "a full window looks no further")
        #expect(lookAhead.lookedSoFar == 8)
        // Entry 150 starts out of order (nothing was found for it) and entry 2 takes its own:
        // room for one more, and 150 is never looked at.
        #expect(lookAhead.take(150) == nil)
        #expect(lookAhead.take(2) != nil)
        #expect(Self.awaitLooked(lookAhead, upTo: 9))
        usleep(50_000)
        #expect(looks.made == 9)
    }

    /// Entries the run passes over (their host at its `concurrency`) are not looked at, and what
    /// was held for them goes: they do not fill the window while the run goes on after them.
    @Test func entriesPassedOverLeaveTheWindow() throws {
        let (lookAhead, looks) = Self.counting(200, window: 8)
        defer { lookAhead.stop() }
        lookAhead.want(from: 0, upTo: 8)
        #expect(Self.awaitLooked(lookAhead, upTo: 8))
        // Entry 0 started; 1 to 99 wait for their host, and the run goes on at 100.
        #expect(lookAhead.take(0) != nil)
        lookAhead.want(from: 100, upTo: 108)
        #expect(Self.awaitLooked(lookAhead, upTo: 108))
        #expect(lookAhead.take(3) == nil, "let go")
        #expect(lookAhead.take(104) != nil)
        #expect(looks.made == 16, "0 to 7 once, 8 to 99 never, 100 to 107 once")
    }
}

/// When the engine's thread wakes its helpers: a batch at a time, never so late that the run
/// finds nothing ready. Woken for every entry, each cost a `futex` call and a switch.
struct HelperWakeTests {
    struct LookRow: CustomTestStringConvertible, Sendable {
        var looked: Int
        var wanted: Int
        var found: Int
        var window: Int
        var wakes: Bool
        var testDescription: String { "looked \(looked) wanted \(wanted) found \(found) window \(window) → \(wakes)" }
    }

    /// A run of width 16: its window is 16 and two batches.
    static let b = EntryLookAhead.batch
    static let w = EntryLookAhead.window(width: 16)
    static let lookRows: [LookRow] = [
        LookRow(looked: 100, wanted: 100, found: 0, window: w, wakes: false),            // nothing wanted beyond what was looked at
        LookRow(looked: 90, wanted: 100, found: w, window: w, wakes: false),             // the window is full
        LookRow(looked: 90, wanted: 90 + w, found: w - 1, window: w, wakes: false),      // room for one: not yet
        LookRow(looked: 90, wanted: 90 + w, found: w - b + 1, window: w, wakes: false),  // room for a batch less one
        LookRow(looked: 90, wanted: 90 + w, found: w - b, window: w, wakes: true),       // room for a batch
        LookRow(looked: 90, wanted: 90 + w, found: 0, window: w, wakes: true),
        LookRow(looked: 99, wanted: 100, found: w - 1, window: w, wakes: false),         // the last entry, a batch and more held
        LookRow(looked: 99, wanted: 100, found: b - 1, window: w, wakes: true),          // the last entry, less than a batch held
        LookRow(looked: 90, wanted: 90 + w, found: b - 1, window: b + 4, wakes: true),   // fewer than a batch held: wake though the room is small
        LookRow(looked: 0, wanted: 8, found: 7, window: 8, wakes: true),                 // a window smaller than a batch: every entry
    ]

    @Test("the look-ahead is woken for a batch, or when what it holds runs low", arguments: lookRows)
    func lookAhead(_ row: LookRow) {
        #expect(EntryLookAhead.hasBatch(looked: row.looked, wanted: row.wanted, found: row.found, window: row.window) == row.wakes)
    }

    @Test("a run's look-ahead window leaves room for two batches beside its width")
    func window() {
        #expect(EntryLookAhead.window(width: 16) == 16 + 2 * EntryLookAhead.batch)
        #expect(EntryLookAhead.window(width: 0) == 1 + 2 * EntryLookAhead.batch)
    }

    struct KeeperRow: CustomTestStringConvertible, Sendable {
        var retired: Int
        var ready: Int
        var taken: Int
        var idle = false
        var holdsDescriptor = false
        var wakes: Bool
        var testDescription: String { "retired \(retired) ready \(ready) taken \(taken) idle \(idle) descriptor \(holdsDescriptor) → \(wakes)" }
    }

    static let ready = EasyHandleKeeper.maxReady
    static let batch = EasyHandleKeeper.retiredBatch
    static let keeperRows: [KeeperRow] = [
        KeeperRow(retired: 0, ready: ready, taken: 0, wakes: false),
        KeeperRow(retired: 1, ready: ready - 1, taken: 1, wakes: false),                 // one handle to clean, plenty ready
        KeeperRow(retired: batch - 1, ready: ready / 2 + 1, taken: batch - 1, wakes: false),
        KeeperRow(retired: batch, ready: ready, taken: 0, wakes: true),
        KeeperRow(retired: 0, ready: ready / 2, taken: ready / 2, wakes: true),          // running low
        KeeperRow(retired: 0, ready: 0, taken: 1, wakes: true),
        KeeperRow(retired: 0, ready: 0, taken: 0, wakes: false),                         // nothing taken: nothing to make again
        KeeperRow(retired: 1, ready: ready - 1, taken: 1, idle: true, wakes: true),      // the run may be over: not kept until the engine goes
        KeeperRow(retired: 0, ready: ready, taken: 0, idle: true, wakes: false),
        KeeperRow(retired: 1, ready: ready - 1, taken: 1, holdsDescriptor: true, wakes: true),  // a file: source's descriptor
    ]

    @Test("the keeper is woken for a batch of handles to clean up, when few are ready, or when the engine is idle", arguments: keeperRows)
    func keeper(_ row: KeeperRow) {
        #expect(EasyHandleKeeper.wakes(
            retired: row.retired, ready: row.ready, taken: row.taken, idle: row.idle, holdsDescriptor: row.holdsDescriptor) == row.wakes)
    }

    @Test("a finished request's handle is reset for another unless an option was refused, an OS error is left in it or it may have shared its connection",
          arguments: [
            (setupFailed: false, osErrno: 0, shared: false, reusable: true),
            (setupFailed: true, osErrno: 0, shared: false, reusable: false),
            (setupFailed: false, osErrno: Int(ECONNREFUSED), shared: false, reusable: false),  // kept across a reset by libcurl 7.88
            (setupFailed: false, osErrno: Int(ETIMEDOUT), shared: false, reusable: false),
            (setupFailed: true, osErrno: Int(ECONNREFUSED), shared: false, reusable: false),
            (setupFailed: false, osErrno: 0, shared: true, reusable: false),  // an HTTP/2 stream's buffer outlives the reset
          ])
    func keeperReuse(_ row: (setupFailed: Bool, osErrno: Int, shared: Bool, reusable: Bool)) {
        #expect(EasyHandleKeeper.reusable(setupFailed: row.setupFailed, osErrno: row.osErrno, sharedConnection: row.shared) == row.reusable)
    }
}
