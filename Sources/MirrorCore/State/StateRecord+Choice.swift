extension StateRecord {
    /// The record to decide an entry by, among the run's own store's and its sibling stores'
    /// (`SiblingStores`), which may disagree when runs of different layouts took turns: the
    /// first whose verified local file is the one on disk now; else the run's own; else the
    /// first sibling's.
    static func chosen(own: StateRecord?, siblings: [StateRecord], onDisk identity: LocalIdentity?) -> StateRecord? {
        if let identity {
            if let own, own.complete?.local == identity { return own }
            if let match = siblings.first(where: { $0.complete?.local == identity }) { return match }
        }
        return own ?? siblings.first
    }
}
