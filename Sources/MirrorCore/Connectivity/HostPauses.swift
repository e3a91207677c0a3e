import Synchronization

/// What a sync knows about the hosts it talks to: the connectivity gate and the pauses
/// servers asked for, and what the connectivity check of a URL connects to.
struct HostConditions: Sendable {
    let gate: ConnectivityGate
    let pauses: HostPauses
    /// The manifest's `connectivity.probe`.
    let probe: RemoteURL?
    let proxies: ProxyEnvironment

    /// What the gate checks for requests to `url`, whose host is `host`; nil for a URL with
    /// no host.
    func target(for url: RemoteURL, host: HostKey?) -> ConnectivityTarget? {
        host.map { ConnectivityTarget(for: url, host: $0, probe: probe, proxies: proxies) }
    }
}

/// Pauses that a server asked for with `Retry-After`, per host: every transfer to that host
/// waits them out, not only the one that was told. A lock, not an actor: every attempt looks
/// here first, and nearly always finds nothing.
public final class HostPauses: Sendable {
    private let until = Mutex([HostKey: ContinuousClock.Instant]())

    public init() {}

    public func pause(_ host: HostKey, for duration: Duration) {
        let end = ContinuousClock.now + duration
        until.withLock { until in
            if let current = until[host], current >= end { return }
            until[host] = end
        }
    }

    /// Whether a pause on `host` is in force now.
    public func isPaused(_ host: HostKey) -> Bool {
        until.withLock { until in until[host].map { $0 > ContinuousClock.now } ?? false }
    }

    /// Sleeps until any pause on `host` has passed. Throws when the task is cancelled.
    public func waitOut(_ host: HostKey) async throws {
        while true {
            let end = until.withLock { until -> ContinuousClock.Instant? in
                guard let end = until[host] else { return nil }
                if end > ContinuousClock.now { return end }
                until[host] = nil
                return nil
            }
            guard let end else { return }
            try await Task.sleep(until: end)
        }
    }
}

/// `Retry-After` (RFC 9110 §10.2.3): delay-seconds or an HTTP-date.
enum RetryAfter {
    /// The delay the header asks for, relative to `now` (seconds since the epoch), capped.
    static func delay(_ header: String, now: Int, cap: Duration) -> Duration? {
        let text = header.trimmingBlanks
        var seconds: Int
        if let value = Int(text), value >= 0 {
            seconds = value
        } else if let date = HTTPDate.parse(String(text)) {
            seconds = max(0, date - now)
        } else {
            return nil
        }
        seconds = min(seconds, Int(cap.components.seconds))
        return .seconds(seconds)
    }
}

extension String {
    var trimmingBlanks: Substring { Substring(self).trimmingSpaces }
}
