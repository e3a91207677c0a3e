/// Why a run goes without some or all of what its state store records.
public struct StateStoreProblem: Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// A store could not be opened (or is of a newer schema): it is left as it is, and the
        /// run decides by size without it.
        case notOpened
        /// A damaged store (not a database, corrupt) was replaced by an empty one: its records
        /// are gone.
        case replaced
        /// The first write of the run failed: later ones may fail too (a read-only or full
        /// store), and the run's records with them.
        case notWritten
        /// One record could not be read or written; the run goes on.
        case record
    }

    public var kind: Kind
    public var text: String

    public init(_ kind: Kind, _ text: String) {
        self.kind = kind
        self.text = text
    }

    /// Whether the whole run goes without the store's records: something to say at the
    /// default verbosity, not only with `-v`, since every later run may pay for it (files
    /// fetched again, a prune that cannot tell what is mirror's).
    public var concernsTheRun: Bool { kind != .record }

    public var description: String { text }
}
