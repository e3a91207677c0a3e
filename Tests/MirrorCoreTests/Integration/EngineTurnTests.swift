import Foundation
import Synchronization
import Testing
@testable import MirrorCore

/// What a turn of the engine's loop does first: a request that a finished transfer made way for
/// goes out before the work that no request waits for (`TransferEngine.afterSends`).
struct EngineTurnTests {
    /// The second request is started as a finished entry's successor is (its permit's grant is
    /// posted from the first one's completion), and the completion defers half a second of work
    /// besides. The second request reaches nginx before that work begins, not after it.
    @Test func aSuccessorGoesOutBeforeWorkDeferredPastTheSends() async throws {
        let scenario = try SyncScenario(.nginx(site: ["a.bin": randomData(count: 1_000, seed: 7), "b.bin": randomData(count: 1_000, seed: 8)]))
        let engine = TransferEngine()
        let first = TransferRequest(url: scenario.url("/a.bin"), method: .get)
        let second = TransferRequest(url: scenario.url("/b.bin"), method: .get)
        let deferredBegan = Mutex<Double?>(nil)
        let busy = 0.5
        let outcomes: (TransferOutcome, TransferOutcome) = await withCheckedContinuation { continuation in
            engine.post {
                engine.start(first, sink: nil) { firstOutcome in
                    engine.post {
                        engine.start(second, sink: nil) { continuation.resume(returning: (firstOutcome, $0)) }
                    }
                    engine.afterSends {
                        deferredBegan.withLock { $0 = Date().timeIntervalSince1970 }
                        Thread.sleep(forTimeInterval: busy)
                    }
                }
            }
        }
        #expect(outcomes.0.succeeded && outcomes.0.head?.status == 200, "\(outcomes.0)")
        #expect(outcomes.1.succeeded && outcomes.1.head?.status == 200, "\(outcomes.1)")
        let requests = try scenario.nginxRequests()
        let began = try #require(deferredBegan.withLock { $0 })
        let arrived = try #require(requests.first { $0.uri == "/b.bin" }, "\(requests)")
        // Sent after the deferred work, it would arrive `busy` seconds after that work began.
        #expect(arrived.startedAt < began + busy / 2,
                "the second request reached nginx \(arrived.startedAt - began) s after the deferred work began")
    }
}
