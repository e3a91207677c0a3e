extension StateRecord {
    /// The record to decide an entry by, among the run's own store's and its sibling stores'
    /// (`SiblingStores`), which may disagree when runs of different layouts took turns: the
    /// first whose verified local file is the one on disk now; else the run's own; else the
    /// first sibling's.
    ///
    /// A partial-file version that another store contradicts is dropped from the choice: which
    /// run started the `.part` on disk last is not known, and a resume must then not be vouched
    /// for by a validator (the overlap check, or a restart, decides instead).
    static func chosen(own: StateRecord?, siblings: [StateRecord], onDisk identity: LocalIdentity?) -> StateRecord? {
        var chosen: StateRecord?
        if let identity {
            if let own, own.complete?.local == identity {
                chosen = own
            } else if let match = siblings.first(where: { $0.complete?.local == identity }) {
                chosen = match
            }
        }
        chosen = chosen ?? own ?? siblings.first
        if let partial = chosen?.partial,
           ([own].compactMap { $0 } + siblings).contains(where: { $0.partial != nil && $0.partial != partial }) {
            chosen?.partial = nil
        }
        return chosen
    }
}
