/// `ROOT/.mirror`, where the run lock and the state store live.
extension RootDirectory {
    static let stateDirectoryName = DestinationPath.reservedDirectory

    /// The path of the file `name` in `ROOT/.mirror`, for messages (and for SQLite, which
    /// opens by path once the directory has been checked).
    static func statePath(root: String, _ name: String) -> String {
        (root.endsWithSlash ? root : root + "/") + stateDirectoryName + "/" + name
    }

    func statePath(_ name: String) -> String { Self.statePath(root: path, name) }

    /// Runs `body` with a descriptor of `ROOT/.mirror`, which must be a real directory: a
    /// symbolic link there is refused, never followed, so neither the lock nor the store can
    /// be made outside the root. Nil when it does not exist and `create` is false.
    func withStateDirectory<Result>(
        create: Bool, _ body: (Int32) throws(TransferFailure) -> Result
    ) throws(TransferFailure) -> Result? {
        do {
            return try withDirectory(Self.stateDirectoryName, create: create, body)
        } catch {
            guard case .localConflict = error else { throw error }
            let path = absolute(Self.stateDirectoryName)
            throw .localConflict("\(path) is a symbolic link; mirror keeps its lock and state store only in a real directory inside the root (remove the link, or move what it points to there)")
        }
    }
}
