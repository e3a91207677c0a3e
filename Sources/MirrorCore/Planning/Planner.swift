/// The decision table of docs/DESIGN.md ("The plan: one decision per entry") as a pure function:
/// local facts, the state store's record and remote facts in, one action out. No I/O here; it
/// is tested as a table.
public enum Planner {
    /// - Parameters:
    ///   - state: the store's record for this destination, if any.
    ///   - destinationSHA256: the digest of `DEST` in the pins' algorithm (SHA-256 unless the
    ///     entry is pinned by SHA-512), when the caller computed it because
    ///     `needsDestinationHash` said so; nil otherwise.
    public static func decide(
        local: LocalFacts, remote: RemoteFacts, pins: Pins, state: StateRecord? = nil,
        destinationSHA256: String? = nil
    ) -> Action {
        let file: RemoteFile
        switch remote {
        case .unavailable(let failure): return .fail(failure)
        case .available(let available): file = available
        }
        if let pinned = pins.size, let size = file.size, pinned != size {
            return .fail(.sizePinConflict(pinned: pinned, remote: size))
        }
        if case .other(let kind) = local.destination {
            return .fail(.localConflict("the destination is \(kind); mirror will not replace it"))
        }
        if case .other(let kind) = local.partial {
            return .fail(.localConflict("the partial file's path is \(kind); mirror will not replace it"))
        }
        let total = file.size ?? pins.size
        let current = RemoteValidators(etag: file.etag, lastModified: file.lastModified, size: total)
        // Without an ETag or a Last-Modified nothing tells one version from the next: a file
        // of the same size may hold other bytes. Only a digest pin can vouch for bytes then.
        let versionKnown = current.namesVersion
        var verified = verifiedVersion(local: local, state: state)
        if verified == nil, let complete = state?.complete, let recorded = pins.comparable(complete.sha256),
           let actual = destinationSHA256, actual == recorded, local.destination.size == complete.local.size {
            // Touched (copied, restored, moved) but the same bytes mirror wrote: the record's
            // validators still say which version it is.
            verified = complete
        }

        // DEST is current.
        var failsItsPin = false
        if let size = local.destination.size,
           let matches = matchesPins(size: size, sha256: pins.comparable(verified?.sha256) ?? destinationSHA256, pins: pins) {
            // The pin names the bytes wanted, whatever the server says of its version. Bytes
            // that are not those are replaced, but a partial file may still be continued first.
            if matches { return .skip }
            failsItsPin = true
        } else if let verified {
            if versionKnown, verified.validators.difference(from: current) == nil { return .skip }
        } else if let size = local.destination.size, let total, size == total {
            if let recorded = pins.comparable(state?.complete?.sha256), let actual = destinationSHA256, actual != recorded {
                return .replace(reason: "local file was changed since mirror wrote it")
            }
            // No record says which version DEST is. Its date does, when it is the server's
            // Last-Modified: mirror (like `wget -N` and `curl -R`) gives a file the date of
            // the version it holds. Anything else would adopt a file under validators it was
            // not downloaded with.
            if let modified = local.destinationModified, let lastModified = file.lastModified,
               let date = HTTPDate.parse(lastModified), Int64(date) == modified {
                return .skip
            }
        }

        // A partial download exists: continue it if it is of the current version.
        if let partSize = local.partial.size, partSize > 0 {
            guard let total else {
                return .restart(reason: "the server did not report the file's size, so the partial file cannot be resumed safely")
            }
            guard versionKnown || pins.digest != nil else {
                return .restart(reason: Self.noVersion + ", so the partial file cannot be resumed safely")
            }
            if let started = state?.partial {
                if let change = started.difference(from: current) {
                    return .restart(reason: "the remote file changed since the partial download started (\(change))")
                }
                if partSize < total { return .resume(from: partSize, source: .partial) }
                if partSize == total { return .finish(size: partSize) }
            } else if partSize <= total {
                // No record of the version it came from: the resume re-reads an overlap to check.
                return .resume(from: partSize, source: .partial)
            }
            return .restart(reason: "partial file (\(partSize) bytes) is larger than the remote file (\(total) bytes)")
        }

        // DEST is outdated, or nothing says it is not.
        if failsItsPin, let size = local.destination.size, total.map({ size >= $0 }) ?? true {
            // (A shorter DEST may be the start of the pinned file: it is continued below.)
            return .replace(reason: "local file does not match its \(pins.algorithm.key) pin")
        }
        if let verified, let change = verified.validators.difference(from: current) {
            return .replace(reason: "the remote file changed: \(change)")
        }
        guard versionKnown || pins.digest != nil || local.destination.size == nil else {
            return .replace(reason: Self.noVersion + ", so the local file is fetched again and compared")
        }
        if let size = local.destination.size {
            guard let total else {
                return .replace(reason: "the server did not report the file's size, so the local copy cannot be checked")
            }
            if size == 0 { return .restart(reason: "local file is empty") }
            if size == total {
                return .replace(reason: "no record says which version the local file is, and its date is not the server's Last-Modified")
            }
            if size < total { return .resume(from: size, source: .destination) }
            return .restart(reason: "local file (\(size) bytes) is larger than the remote file (\(total) bytes)")
        }
        return .download
    }

    /// Why an entry cannot be judged by its validators.
    static let noVersion = "the server sends no ETag or Last-Modified to identify the file's version"

    /// The store's record of the version on disk, when it describes the `DEST` that is there
    /// now (same size, mtime and inode); nil when there is none or `DEST` was touched since.
    public static func verifiedVersion(local: LocalFacts, state: StateRecord?) -> CompleteVersion? {
        guard let complete = state?.complete, let identity = local.destinationIdentity, complete.local == identity else {
            return nil
        }
        return complete
    }

    /// True when the store vouches that `DEST` matches the entry's digest pin: the entry is
    /// `skip` without any request.
    public static func isPinnedAndVerified(local: LocalFacts, state: StateRecord?, pins: Pins) -> Bool {
        guard let verified = verifiedVersion(local: local, state: state) else { return false }
        return matchesPins(size: verified.local.size, sha256: pins.comparable(verified.sha256), pins: pins) == true
    }

    /// Whether a file of `size` bytes hashing to `sha256` (a digest in the pins' algorithm) is
    /// what the entry's pins name; nil when there is no digest pin or the hash is not known. The one verdict on pins, with or
    /// without a request, with or without a record.
    static func matchesPins(size: Int64, sha256: String?, pins: Pins) -> Bool? {
        guard let pin = pins.digest, let sha256 else { return nil }
        return sha256 == pin && (pins.size.map { $0 == size } ?? true)
    }

    /// True when the decision depends on the hash of `DEST`, which then must be computed: a
    /// pinned `DEST` whose hash no record vouches for (of any size: the pin decides, not the
    /// server), or a `DEST` of the right size that no record vouches for when the record
    /// holds a hash to compare with.
    public static func needsDestinationHash(local: LocalFacts, remote: RemoteFacts, pins: Pins, state: StateRecord? = nil) -> Bool {
        guard let size = local.destination.size, case .available(let file) = remote else { return false }
        if let verified = verifiedVersion(local: local, state: state) {
            return pins.digest != nil && pins.comparable(verified.sha256) == nil
        }
        if pins.digest != nil { return true }
        guard let total = file.size ?? pins.size, size == total else { return false }
        return pins.comparable(state?.complete?.sha256) != nil
    }
}
