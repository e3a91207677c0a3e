/// Records in the state store which version a partial file holds, before the transfer writes
/// its first byte, so that a later run (even after kill -9) resumes only that version.
struct TransferStartRecord: Sendable {
    let store: StateStore?
    let dest: String
    let url: String
    let paths: DestinationPaths
    let rootDirectory: RootDirectory
    /// The transfer continues the version the store already records.
    let continuingRecord: Bool
    /// The store held a partial record when the attempt began (perhaps of another version).
    let hadPartialRecord: Bool

    /// Called once, with the reply's head and where writing starts (0: a new version). A
    /// failure stops the transfer before that byte.
    func write(head: ResponseHead, from: Int64) -> TransferFailure? {
        guard let store else { return nil }
        // Continuing the recorded version: the record already says so.
        if from > 0 && continuingRecord { return nil }
        // A file no longer than the overlap needs no record (a resume re-reads all of it), but
        // a record of another version must go.
        let small = head.totalSize.map { $0 <= DownloadMachine.overlapLength } ?? false
        if small && !hadPartialRecord { return nil }
        let validators = small ? nil : RemoteValidators(etag: head.etag, lastModified: head.lastModified, size: head.totalSize)
        do {
            try store.update(dest: dest, url: url) { $0.partial = validators }
        } catch {
            // With no record at all, the next run checks the overlap: nothing is at risk. A
            // record of another version would vouch for these bytes and let a resume splice
            // that version onto them: write none, and keep no partial file for that record to
            // vouch for.
            guard hadPartialRecord else { return nil }
            rootDirectory.removePartial(paths)
            return .localConflict("cannot record in \(store.path) which version \(paths.partial) holds (\(error)), and the record there is of another version; not writing to it")
        }
        return nil
    }
}
