import Synchronization

/// Holds back retries while the network is down.
///
/// After a network-level failure an entry asks the gate before retrying. The gate checks the
/// entry's `ConnectivityTarget` (its host, the manifest's `connectivity.probe`, or the proxy in
/// use) with `ReachabilityCheck`. While nothing answers, every entry for that target waits on
/// the same outage, retries unspent, until the network answers or `connectivity.wait` runs
/// out. An answer that is no (a refused connection, an authoritative "no such host") is not an
/// outage: it passes as `reachable`, and the entry's failure stands. Entries about to start
/// also wait on an outage in progress.
public actor ConnectivityGate {
    public typealias Check = @Sendable (HostKey) async -> Reachability

    /// How an entry's wait ended.
    public enum Passage: Sendable, Equatable {
        /// The network answered at once (yes, or a no that proves it works): the failure was
        /// the server's or the entry's, not the network's.
        case reachable
        /// The host was unreachable and answered again later: the wait should not count as a
        /// spent retry.
        case cameBack
    }

    private let wait: Duration
    private let interval: Duration
    private let check: Check
    private let onOutage: @Sendable (ConnectivityTarget, Duration) -> Void
    private var outages: [ConnectivityTarget: Task<Bool, Never>] = [:]
    /// Targets whose outage outlasted the wait: the rest of their queue fails at once rather
    /// than waiting all over again.
    private var givenUp: Set<ConnectivityTarget> = []
    /// The targets of `outages` and `givenUp`, readable without entering the actor: an entry
    /// about to start while its target is fine (nearly always) passes without queueing here.
    private nonisolated let troubled = Mutex(Set<ConnectivityTarget>())

    /// - Parameters:
    ///   - interval: time between checks while the target is down.
    ///   - onOutage: told once per outage, when it starts, how long it will be waited for.
    public init(
        wait: Duration, interval: Duration = .seconds(1),
        check: @escaping Check = { await ReachabilityCheck.check($0) },
        onOutage: @escaping @Sendable (ConnectivityTarget, Duration) -> Void = { _, _ in }
    ) {
        self.wait = wait
        self.interval = interval
        self.check = check
        self.onOutage = onOutage
    }

    /// Call after a network-level failure talking to `target`.
    public func afterFailure(talkingTo target: ConnectivityTarget) async throws(Unreachable) -> Passage {
        if givenUp.contains(target) { throw Unreachable(target: target, waited: wait) }
        if let outage = outages[target] {
            return try await outcome(of: outage, for: target)
        }
        if await check(target.endpoint).networkAnswered { return .reachable }
        // The check suspended this actor: another entry may have started the outage (or seen
        // it given up) meanwhile. One outage per target, one notice.
        if givenUp.contains(target) { throw Unreachable(target: target, waited: wait) }
        let outage = outages[target] ?? startOutage(target)
        return try await outcome(of: outage, for: target)
    }

    /// Whether an outage of `target` is in progress or was given up: `beforeAttempt` would wait
    /// or refuse. Does not wait.
    public nonisolated func hasTrouble(_ target: ConnectivityTarget) -> Bool {
        troubled.withLock { $0.contains(target) }
    }

    /// Call before starting an attempt: waits out an outage already in progress for `target`.
    public nonisolated func beforeAttempt(talkingTo target: ConnectivityTarget) async throws(Unreachable) {
        guard hasTrouble(target) else { return }
        try await waitForTrouble(of: target)
    }

    private func waitForTrouble(of target: ConnectivityTarget) async throws(Unreachable) {
        if givenUp.contains(target) { throw Unreachable(target: target, waited: wait) }
        if let outage = outages[target] {
            _ = try await outcome(of: outage, for: target)
        }
    }

    private func startOutage(_ target: ConnectivityTarget) -> Task<Bool, Never> {
        onOutage(target, wait)
        let deadline = ContinuousClock.now + wait
        let check = self.check
        let interval = self.interval
        let outage = Task<Bool, Never> {
            while ContinuousClock.now < deadline {
                do {
                    try await Task.sleep(for: min(interval, deadline - ContinuousClock.now))
                } catch {
                    return false
                }
                // Any answer ends the outage, a no included: the retry then meets it.
                if await check(target.endpoint).networkAnswered { return true }
            }
            return false
        }
        outages[target] = outage
        troubled.withLock { _ = $0.insert(target) }
        return outage
    }

    private func outcome(of outage: Task<Bool, Never>, for target: ConnectivityTarget) async throws(Unreachable) -> Passage {
        let cameBack = await withTaskCancellationHandler {
            await outage.value
        } onCancel: {
            outage.cancel()
        }
        if outages[target] == outage {
            outages[target] = nil
            // Troubled means an outage in progress or given up, nothing else. A host given up
            // stays troubled, with no moment in between when an entry could pass the fast
            // path to it.
            if cameBack || Task.isCancelled { troubled.withLock { _ = $0.remove(target) } }
        }
        guard cameBack else {
            if !Task.isCancelled {
                givenUp.insert(target)
                troubled.withLock { _ = $0.insert(target) }
            }
            throw Unreachable(target: target, waited: wait)
        }
        return .cameBack
    }

    /// The network stayed away for the whole wait.
    public struct Unreachable: Error, Sendable, Equatable {
        public var target: ConnectivityTarget
        public var waited: Duration
    }
}
