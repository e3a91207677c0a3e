import Synchronization

/// Holds back retries while the network is down.
///
/// After a network-level failure an entry asks the gate before retrying. The gate checks the
/// host (or the manifest's `connectivity.probe`) with `ReachabilityCheck`; while that fails,
/// every entry for the host waits on the same outage, retries unspent, until a check passes or
/// `connectivity.wait` runs out. Entries about to start also wait on an outage in progress.
public actor ConnectivityGate {
    public typealias Check = @Sendable (HostKey) async -> Bool

    /// How an entry's wait ended.
    public enum Passage: Sendable, Equatable {
        /// The host answered at once: the failure was the server's, not the network's.
        case reachable
        /// The host was unreachable and answered again later: the wait should not count as a
        /// spent retry.
        case cameBack
    }

    private let wait: Duration
    private let probe: HostKey?
    private let interval: Duration
    private let check: Check
    private let onOutage: @Sendable (HostKey, Duration) -> Void
    private var outages: [HostKey: Task<Bool, Never>] = [:]
    /// Hosts whose outage outlasted the wait: the rest of their queue fails at once rather
    /// than waiting all over again.
    private var givenUp: Set<HostKey> = []
    /// The targets of `outages` and `givenUp`, readable without entering the actor: an entry
    /// about to start while its host is fine (nearly always) passes without queueing here.
    private nonisolated let troubled = Mutex(Set<HostKey>())

    /// - Parameters:
    ///   - probe: checked instead of each entry's own host, when set.
    ///   - interval: time between checks while the host is down.
    ///   - onOutage: told once per outage, when it starts, how long it will be waited for.
    public init(
        wait: Duration, probe: HostKey?, interval: Duration = .seconds(1),
        check: @escaping Check = { await ReachabilityCheck.isReachable($0) },
        onOutage: @escaping @Sendable (HostKey, Duration) -> Void = { _, _ in }
    ) {
        self.wait = wait
        self.probe = probe
        self.interval = interval
        self.check = check
        self.onOutage = onOutage
    }

    /// Call after a network-level failure talking to `host`.
    public func afterFailure(talkingTo host: HostKey) async throws(Unreachable) -> Passage {
        let target = probe ?? host
        if givenUp.contains(target) { throw Unreachable(host: target, waited: wait) }
        if let outage = outages[target] {
            return try await outcome(of: outage, for: target)
        }
        if await check(target) { return .reachable }
        // The check suspended this actor: another entry may have started the outage (or seen
        // it given up) meanwhile. One outage per host, one notice.
        if givenUp.contains(target) { throw Unreachable(host: target, waited: wait) }
        let outage = outages[target] ?? startOutage(target)
        return try await outcome(of: outage, for: target)
    }

    /// Whether an outage of `host` is in progress or was given up: `beforeAttempt` would wait
    /// or refuse. Does not wait.
    public nonisolated func hasTrouble(_ host: HostKey) -> Bool {
        let target = probe ?? host
        return troubled.withLock { $0.contains(target) }
    }

    /// Call before starting an attempt: waits out an outage already in progress for `host`.
    public nonisolated func beforeAttempt(talkingTo host: HostKey) async throws(Unreachable) {
        guard hasTrouble(host) else { return }
        try await waitForTrouble(of: probe ?? host)
    }

    private func waitForTrouble(of target: HostKey) async throws(Unreachable) {
        if givenUp.contains(target) { throw Unreachable(host: target, waited: wait) }
        if let outage = outages[target] {
            _ = try await outcome(of: outage, for: target)
        }
    }

    private func startOutage(_ target: HostKey) -> Task<Bool, Never> {
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
                if await check(target) { return true }
            }
            return false
        }
        outages[target] = outage
        troubled.withLock { _ = $0.insert(target) }
        return outage
    }

    private func outcome(of outage: Task<Bool, Never>, for target: HostKey) async throws(Unreachable) -> Passage {
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
            throw Unreachable(host: target, waited: wait)
        }
        return .cameBack
    }

    /// The network stayed away for the whole wait.
    public struct Unreachable: Error, Sendable, Equatable {
        public var host: HostKey
        public var waited: Duration
    }
}
