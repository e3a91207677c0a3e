/// What `mirror` will do for one entry: the planner's answer.
public enum Action: Sendable, Equatable {
    /// Nothing on disk: fetch the whole file into `DEST.part`, then rename.
    case download
    /// Continue a partial copy from `from` bytes.
    case resume(from: Int64, source: ResumeSource)
    /// `DEST.part` already holds the whole file: verify it and rename it into place.
    case finish(size: Int64)
    /// What is on disk cannot be continued: fetch from byte 0 into `DEST.part`, then rename.
    case restart(reason: String)
    /// `DEST` is outdated: fetch the new version into `DEST.part`, rename over `DEST` when done.
    case replace(reason: String)
    /// `DEST` is missing and the cache holds the pinned bytes: copy (or reflink) them into
    /// `DEST.part`, check them against the pin, rename. No request.
    case cached
    /// `DEST` is already what the manifest wants.
    case skip
    /// The entry cannot be carried out; local files are left untouched.
    case fail(TransferFailure)

    public enum ResumeSource: Sendable, Equatable {
        /// The partial download `DEST.part`.
        case partial
        /// A shorter `DEST` with no record of how it got there, continued as a partial.
        case destination
    }

    /// The name used in output and JSON: download, resume, restart, replace, cached, skip or fail.
    /// Finishing a complete partial file is a resume with nothing left to fetch.
    public var name: String {
        switch self {
        case .download: return "download"
        case .resume, .finish: return "resume"
        case .restart: return "restart"
        case .replace: return "replace"
        case .cached: return "cached"
        case .skip: return "skip"
        case .fail: return "fail"
        }
    }

    /// The byte a transfer would start from.
    public var offset: Int64 {
        switch self {
        case .resume(let from, _): return from
        case .finish(let size): return size
        default: return 0
        }
    }

    /// Why, for the actions that need explaining.
    public var reason: String? {
        switch self {
        case .restart(let reason), .replace(let reason): return reason
        case .fail(let failure): return failure.description
        case .resume(_, .destination): return "continuing a copy of the shorter local file; it is replaced only when complete"
        case .finish: return "partial file is complete; it will be verified and renamed"
        case .cached: return "the cache holds the pinned bytes; they are placed without a request"
        case .download, .resume, .skip: return nil
        }
    }

    /// Whether the action fetches bytes or moves files.
    public var changesSomething: Bool {
        switch self {
        case .skip, .fail: return false
        default: return true
        }
    }

    /// Bytes the action would fetch, given the remote size; nil when that size is unknown.
    public func bytesToTransfer(remoteSize: Int64?) -> Int64? {
        switch self {
        case .skip, .fail, .finish, .cached: return 0
        case .download, .restart, .replace: return remoteSize
        case .resume(let from, _): return remoteSize.map { max(0, $0 - from) }
        }
    }
}
