/// What `--prune` deletes, decided in one place from the state store's records, the manifest's
/// dests and what is on disk: a pure function, tested as a table.
///
/// A file is mirror's to delete only when the store records a finished download of it whose
/// local identity (size, mtime, inode) still matches the file: a file changed since mirror wrote
/// it, or one mirror has no record of writing, is kept and reported. A `DEST.part` goes only when
/// the store records that mirror started it. Nothing the manifest still lists is touched, nor
/// anything in `.mirror/`, nor anything behind a symbolic link (the facts then say why it could
/// not be looked at).
public struct PrunePlan: Sendable, Equatable {
    /// One file to delete, by its path relative to the root.
    public struct Deletion: Sendable, Equatable {
        public enum Kind: Sendable, Equatable {
            /// A finished download, still as mirror verified it.
            case destination(LocalIdentity)
            /// The partial download of a dropped entry.
            case partial
        }

        /// The dest whose record names this file.
        public var dest: String
        public var kind: Kind
        /// Path relative to the root: `dest`, or its partial file.
        public var path: String
    }

    /// A file (or other thing) under root that the prune leaves alone, and why.
    public struct Kept: Sendable, Equatable {
        public var path: String
        public var reason: String
    }

    /// What is on disk for one record, as the prune needs it.
    public enum Local: Sendable, Equatable {
        case facts(LocalFacts)
        /// It could not be looked at (a symbolic link on the way, an I/O error): why.
        case unreachable(String)
    }

    /// A store record and what is on disk at its dest.
    public struct Row: Sendable, Equatable {
        public var record: StateRecord
        public var local: Local

        public init(record: StateRecord, local: Local) {
            self.record = record
            self.local = local
        }
    }

    /// Files to delete, in the order of the records' dests.
    public var deletions: [Deletion] = []
    /// Directories (relative to the root) to remove if they are empty once the files are gone,
    /// deepest first.
    public var directories: [String] = []
    public var kept: [Kept] = []
    /// Records to remove: those of dests dropped from the manifest of which nothing is left.
    public var forgotten: [String] = []
    /// Why nothing at all may be deleted (`--max-delete` exceeded); nil when the plan stands.
    public var refusal: String?

    public init() {}

    /// Decides the prune for the store's `rows` (in any order) against the dests the manifest
    /// lists. `maxDelete`: the most files that may go; more refuses the whole prune.
    ///
    /// Dests are compared by their UTF-8 bytes, as the store keys them: two spellings of "é"
    /// are two files, and one being listed does not make the other the manifest's.
    public static func decide(storeRows: [Row], manifestDests: [String], maxDelete: Int?) -> PrunePlan {
        let listed = Set(manifestDests.map { Array($0.utf8) })
        // Directories that hold a listed dest stay, even when they are empty for a moment.
        var neededDirectories = Set<[UInt8]>()
        for dest in manifestDests {
            for directory in ancestors(of: dest) { neededDirectories.insert(Array(directory.utf8)) }
        }
        var plan = PrunePlan()
        let rows = storeRows.sorted { Array($0.record.dest.utf8).lexicographicallyPrecedes(Array($1.record.dest.utf8)) }
        for row in rows {
            let record = row.record
            let dest = record.dest
            guard !listed.contains(Array(dest.utf8)) else { continue }
            // The store is a cache anyone can edit: only a dest mirror itself would write is
            // ever acted on.
            guard (try? DestinationPath.normalised(dest)) == dest else {
                plan.kept.append(Kept(path: dest, reason: "its record does not name a path under the root that mirror writes"))
                continue
            }
            let facts: LocalFacts
            switch row.local {
            case .unreachable(let why):
                plan.kept.append(Kept(path: dest, reason: why))
                continue
            case .facts(let found):
                facts = found
            }
            let paths = DestinationPaths(root: "/", dest: dest)
            let partialPath = paths.relativeDirectory.isEmpty ? paths.partialName : paths.relativeDirectory + "/" + paths.partialName
            var leftBehind = false

            switch facts.destination {
            case .missing:
                break
            case .file:
                if let complete = record.complete, let identity = facts.destinationIdentity, complete.local == identity {
                    plan.deletions.append(Deletion(dest: dest, kind: .destination(identity), path: dest))
                } else {
                    leftBehind = true
                    let why = record.complete == nil
                        ? "mirror has no record of finishing this file, so it is not mirror's to delete"
                        : "changed since mirror wrote it (size, mtime or inode differ from the record), so it is no longer mirror's to delete"
                    plan.kept.append(Kept(path: dest, reason: why))
                }
            case .other(let kind):
                leftBehind = true
                plan.kept.append(Kept(path: dest, reason: "is \(kind), not a file mirror wrote"))
            }

            switch facts.partial {
            case .missing:
                break
            case .file:
                if record.partial != nil, !listed.contains(Array(partialPath.utf8)) {
                    plan.deletions.append(Deletion(dest: dest, kind: .partial, path: partialPath))
                } else {
                    leftBehind = true
                    plan.kept.append(Kept(path: partialPath, reason: "mirror has no record of starting this partial file"))
                }
            case .other(let kind):
                leftBehind = true
                plan.kept.append(Kept(path: partialPath, reason: "is \(kind), not a file mirror wrote"))
            }
            if !leftBehind { plan.forgotten.append(dest) }
        }

        var directories = Set<[UInt8]>()
        for deletion in plan.deletions {
            for directory in ancestors(of: deletion.path) where !neededDirectories.contains(Array(directory.utf8)) {
                directories.insert(Array(directory.utf8))
            }
        }
        plan.directories = directories.map { String(decoding: $0, as: UTF8.self) }.sorted { left, right in
            let (leftDepth, rightDepth) = (depth(left), depth(right))
            if leftDepth != rightDepth { return leftDepth > rightDepth }
            return Array(left.utf8).lexicographicallyPrecedes(Array(right.utf8))
        }

        if let maxDelete, plan.deletions.count > maxDelete {
            let files = plan.deletions.count == 1 ? "1 file" : "\(plan.deletions.count) files"
            plan.refusal = "\(files) would be deleted, more than --max-delete \(maxDelete) allows, so the prune deletes nothing"
        }
        return plan
    }

    private static func depth(_ path: String) -> Int {
        path.utf8.count(where: { $0 == UInt8(ascii: "/") })
    }

    /// The directories that hold `path`, relative to the root, nearest first; not the root.
    static func ancestors(of path: String) -> [String] {
        var found: [String] = []
        var current = Substring(path)
        while let slash = current.lastIndex(of: "/") {
            current = current[..<slash]
            if !current.isEmpty { found.append(String(current)) }
        }
        return found
    }
}
