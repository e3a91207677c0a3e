import Glibc

/// The I/O of `--prune`: gathers what the state store and the disk say for every dest the
/// manifest no longer lists, lets `PrunePlan.decide` choose, and carries the plan out through
/// the root's directory descriptor (never following a symbolic link), each file through
/// `PruneTrash` so that only the file checked is ever deleted.
struct Pruner {
    let rootDirectory: RootDirectory
    /// Also holds the notes of the moves into a trash.
    let store: StateStore
    /// The shards' stores, for an unsharded run (`SiblingStores`): what they record as
    /// mirror's is mirror's too, and the records of what is deleted go from them as well.
    var shardStores: [StateStore] = []
    /// Called with a file's path between its last check and its removal: where a test puts
    /// what a user might do in that moment.
    var afterFinalCheck: (@Sendable (String) -> Void)?

    /// The plan for a manifest that lists `manifestDests`. Reads only: `plan` shows it as is.
    /// Throws when a store cannot be read (then nothing is known to be mirror's).
    func plan(manifestDests: [String], maxDelete: Int?) throws(StoreError) -> PrunePlan {
        let listed = Set(manifestDests.map { Array($0.utf8) })
        let own = try store.allRecords().filter { !listed.contains(Array($0.dest.utf8)) }
        var fromShards: [[UInt8]: [StateRecord]] = [:]
        for shardStore in shardStores {
            for record in try shardStore.allRecords() where !listed.contains(Array(record.dest.utf8)) {
                fromShards[Array(record.dest.utf8), default: []].append(record)
            }
        }
        var rows = own.map { record in
            let local = look(at: record.dest)
            let chosen = StateRecord.chosen(own: record, siblings: fromShards.removeValue(forKey: Array(record.dest.utf8)) ?? [], onDisk: local.identity)
            return PrunePlan.Row(record: chosen ?? record, local: local)
        }
        // Dests that only shards recorded, in a fixed order.
        for key in fromShards.keys.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
            let records = fromShards[key]!
            let local = look(at: records[0].dest)
            rows.append(PrunePlan.Row(record: StateRecord.chosen(own: nil, siblings: records, onDisk: local.identity) ?? records[0], local: local))
        }
        return PrunePlan.decide(storeRows: rows, manifestDests: manifestDests, maxDelete: maxDelete)
    }

    /// What is at `dest` and its partial file, without following a symbolic link.
    private func look(at dest: String) -> PrunePlan.Local {
        // A dest that is not a clean relative path is never looked at; the plan keeps it.
        guard (try? DestinationPath.normalised(dest)) == dest else { return .facts(LocalFacts(destination: .missing, partial: .missing)) }
        do {
            return .facts(try rootDirectory.inspect(DestinationPaths(root: rootDirectory.path, dest: dest)))
        } catch {
            return .unreachable("\(error); left alone")
        }
    }

    /// Deletes what `plan` says, checking each file again just before it goes (a file changed
    /// since the plan was made is kept), removes the directories left empty, then the records of
    /// the dests of which nothing is left, in one transaction. A refused plan changes nothing.
    func carryOut(_ plan: PrunePlan) -> PruneOutcome {
        var outcome = PruneOutcome(plan: plan)
        guard plan.refusal == nil else {
            outcome.refusal = plan.refusal
            return outcome
        }
        var failedDests = Set<[UInt8]>()
        for deletion in plan.deletions {
            if let problem = delete(deletion) {
                outcome.failures.append(PrunePlan.Kept(path: deletion.path, reason: problem))
                failedDests.insert(Array(deletion.dest.utf8))
            } else {
                outcome.deleted.append(deletion.path)
            }
        }
        for directory in plan.directories where removeIfEmpty(directory) {
            outcome.removedDirectories.append(directory)
        }
        let forgotten = plan.forgotten.filter { !failedDests.contains(Array($0.utf8)) }
        outcome.recordsRemoved = forgotten.count
        for store in [store] + shardStores {
            do {
                try store.removeRecords(forgotten)
            } catch {
                outcome.recordsRemoved = 0
                outcome.failures.append(PrunePlan.Kept(path: store.path, reason: "could not remove the records of deleted files: \(error)"))
            }
        }
        return outcome
    }

    /// Removes one file if it is still what the plan saw; nil on success (or when it is gone
    /// already), else why not.
    private func delete(_ deletion: PrunePlan.Deletion) -> String? {
        let paths = DestinationPaths(root: rootDirectory.path, dest: deletion.dest)
        let name = deletion.kind == .partial ? paths.partialName : paths.name
        do {
            let result: String?? = try rootDirectory.withDirectory(paths.relativeDirectory) { directory -> String? in
                var info = stat()
                guard fstatat(directory, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else {
                    return errno == ENOENT ? nil : "inspect: \(String(cString: strerror(errno)))"
                }
                guard info.st_mode & S_IFMT == S_IFREG else { return "no longer a regular file; kept" }
                let checked = LocalIdentity(info)
                if case .destination(let identity) = deletion.kind, checked != identity {
                    return "changed since mirror wrote it; kept"
                }
                afterFinalCheck?(deletion.path)
                switch PruneTrash.remove(name, in: directory, path: deletion.path, checked: checked, store: store) {
                case .deleted, .vanished:
                    return nil
                case .restored:
                    return "replaced by another file after its last check; that file was left in place"
                case .keptInTrash:
                    return "replaced by another file after its last check, and its name was taken again since: that file is kept in \(PruneTrash.trashPath(of: deletion.path))"
                case .failed(let why):
                    return why
                }
            }
            return result ?? nil
        } catch {
            return "\(error)"
        }
    }

    /// Removes `directory` (relative to the root) if it is empty; whether it did.
    private func removeIfEmpty(_ directory: String) -> Bool {
        let parent = PrunePlan.ancestors(of: directory).first ?? ""
        let name = parent.isEmpty ? directory : String(directory.dropFirst(parent.count + 1))
        let removed = try? rootDirectory.withDirectory(parent) { fd in
            // rmdir refuses a directory that is not empty, and a symbolic link is not a directory.
            unlinkat(fd, name, AT_REMOVEDIR) == 0
        }
        return removed == true
    }
}

extension PrunePlan.Local {
    /// Size, mtime and inode of the file at the dest, when it was looked at and is one.
    var identity: LocalIdentity? {
        if case .facts(let facts) = self { return facts.destinationIdentity }
        return nil
    }
}
