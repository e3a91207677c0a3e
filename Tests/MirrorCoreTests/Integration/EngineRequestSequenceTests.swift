import Foundation
import Testing
@testable import MirrorCore

/// Requests on one engine end as their own, whatever ended before them: libcurl 7.88 keeps
/// state in an easy handle across `curl_easy_reset` (the receive buffer, after which
/// `CURLOPT_BUFFERSIZE` is refused, and the last OS error), so an engine that reused handles
/// failed every request after one that could not connect.
struct EngineRequestSequenceTests {
    @Test func requestsAfterOnesThatFailedBeforeConnectingEndAsTheirOwn() async throws {
        let body = randomData(count: 20_000, seed: 41)
        let scenario = try SyncScenario(.nginx(site: ["a.bin": body]))
        let closed = try ClosedPort()
        defer { withExtendedLifetime(closed) {} }
        let engine = TransferEngine()
        let good = TransferRequest(url: scenario.url("/a.bin"), method: .get)
        let refused = TransferRequest(url: "http://127.0.0.1:\(closed.port)/a.bin", method: .get)
        for round in 0..<5 {
            // Two that end well in a row, then one refused.
            for order in 0..<2 {
                let outcome = await Self.fetch(good, on: engine)
                #expect(outcome.succeeded && outcome.head?.status == 200, "round \(round), \(order): \(outcome)")
                #expect(outcome.osErrno == 0, "round \(round), \(order): no error of an earlier request: \(outcome)")
            }
            let outcome = await Self.fetch(refused, on: engine)
            #expect(outcome.curlCode == 7, "couldn't connect, round \(round): \(outcome)")
            #expect(outcome.osErrno == ECONNREFUSED, "round \(round): \(outcome)")
        }
        let requests = try scenario.nginxRequests()
        #expect(requests.count == 10 && requests.allSatisfy { $0.status == 200 }, "\(requests)")
    }

    /// Sends `request` on the engine's thread and waits for its outcome.
    private static func fetch(_ request: TransferRequest, on engine: TransferEngine) async -> TransferOutcome {
        await withCheckedContinuation { continuation in
            engine.post {
                engine.start(request, sink: nil) { continuation.resume(returning: $0) }
            }
        }
    }
}
