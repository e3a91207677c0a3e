import Dispatch
import Foundation
import Synchronization
import Testing
@testable import MirrorCore

/// The look-ahead hands each entry what was found for it once, only when it was asked for and
/// found recently, and never what was found for an entry that started without it.
struct EntryLookAheadTests {
    /// What the look found for an entry, recognisable by its size: the entry's index.
    static func found(_ index: Int, at: Int64) -> LookedAhead {
        LookedAhead(facts: .success(LocalFacts(destination: .file(size: Int64(index)), partial: .missing)),
                    record: nil, recordUnreadable: false, at: at)
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

    @Test func eachEntryGetsWhatWasFoundForItOnceAndOnlyWhatWasAskedFor() throws {
        let entries = (0..<40).map { ShardingTests.entry("f\($0)") }
        let looks = Mutex(0)
        let lookAhead = EntryLookAhead(entries: entries) { entry in
            looks.withLock { $0 += 1 }
            return Self.found(Self.index(of: entry), at: 1_000)
        }
        defer { lookAhead.stop() }
        lookAhead.want(upTo: 20)
        #expect(Self.awaitLooked(lookAhead, upTo: 20))
        let first = try #require(lookAhead.take(3, now: 1_000))
        guard case .success(let facts) = first.facts else { Issue.record("\(first.facts)"); return }
        #expect(facts.destination == .file(size: 3))
        #expect(lookAhead.take(3, now: 1_000) == nil, "taken once")
        let last = try #require(lookAhead.take(19, now: 1_000))
        guard case .success(let lastFacts) = last.facts else { Issue.record("\(last.facts)"); return }
        #expect(lastFacts.destination == .file(size: 19))
        #expect(lookAhead.take(20, now: 1_000) == nil, "not asked for")
        #expect(looks.withLock { $0 } == 20, "only the entries asked for are looked at")
        // Found too long ago: the entry looks for itself.
        #expect(lookAhead.take(10, now: 1_000 + LookedAhead.freshFor + 1) == nil)
        #expect(lookAhead.take(11, now: 1_000 + LookedAhead.freshFor)?.facts != nil)
    }

    /// An entry that starts while its look is still to come looks for itself, and what is found
    /// for it afterwards is dropped (not kept for the rest of the run).
    @Test func anEntryThatStartedFirstIsPassedOver() throws {
        let entries = (0..<40).map { ShardingTests.entry("f\($0)") }
        let gate = DispatchSemaphore(value: 0)
        let lookAhead = EntryLookAhead(entries: entries) { entry in
            let index = Self.index(of: entry)
            if index == 0 { gate.wait() }
            return Self.found(index, at: 1_000)
        }
        defer { lookAhead.stop() }
        lookAhead.want(upTo: 8)
        // The look is held at entry 0: entry 5 starts before it is looked at.
        #expect(lookAhead.take(5, now: 1_000) == nil)
        gate.signal()
        #expect(Self.awaitLooked(lookAhead, upTo: 8))
        #expect(lookAhead.take(6, now: 1_000) != nil)
        #expect(lookAhead.take(5, now: 1_000) == nil, "found after its entry started: dropped")
        #expect(lookAhead.take(0, now: 1_000) != nil)
    }
}
