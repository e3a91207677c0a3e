/// What a connectivity check learned about one host (or probe, or proxy).
public enum Reachability: Sendable, Equatable {
    /// A TCP connection was made.
    case reachable
    /// The network answered, and the answer was no: a refused connection, or an authoritative
    /// "no such host" (NXDOMAIN). Not an outage: waiting would not change the answer. The
    /// text says which, e.g. "connection refused".
    case refused(String)
    /// Nothing answered: connects timed out, the route is unreachable, or the resolver could not
    /// be reached. The network is down, or this side of it is cut off.
    case noAnswer(String)

    /// Whether the network answered at all, yes or no.
    public var networkAnswered: Bool {
        if case .noAnswer = self { return false }
        return true
    }
}
