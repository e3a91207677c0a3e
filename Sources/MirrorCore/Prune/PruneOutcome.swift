/// How `--prune` ended: what went, what stayed and why, or why nothing was deleted.
public struct PruneOutcome: Sendable {
    /// What was decided (see `PrunePlan.decide`).
    public var plan: PrunePlan
    /// Files deleted, relative to the root.
    public var deleted: [String] = []
    /// Directories removed because the prune left them empty, relative to the root.
    public var removedDirectories: [String] = []
    /// Files the plan would delete that could not be (or had changed since): why.
    public var failures: [PrunePlan.Kept] = []
    /// State store records removed.
    public var recordsRemoved = 0
    /// Why nothing was deleted: an entry of the run failed, `--max-delete` was exceeded, or the
    /// state store could not be read. Nil when the prune was carried out.
    public var refusal: String?

    public init(plan: PrunePlan, refusal: String? = nil) {
        self.plan = plan
        self.refusal = refusal
    }

    /// Whether the root did not reach the state the prune wanted: the run's exit status says so.
    public var fellShort: Bool { refusal != nil || !failures.isEmpty }
}

/// `--prune` for a run: delete what mirror wrote and the manifest no longer lists.
public struct PruneSettings: Sendable, Equatable {
    /// The most files a prune may delete; when more would go, it deletes none (rclone's
    /// `--max-delete`). Nil: no limit.
    public var maxDelete: Int?

    public init(maxDelete: Int? = nil) {
        self.maxDelete = maxDelete
    }
}
