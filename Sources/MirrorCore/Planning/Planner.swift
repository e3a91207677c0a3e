/// The decision table of DESIGN.md ("Planning: one decision per entry") as a pure function:
/// local facts and remote facts in, one action out. No I/O here; it is tested as a table.
public enum Planner {
    /// - Parameter destinationSHA256: the hash of `DEST`, when the caller computed it because
    ///   `needsDestinationHash` said so; nil otherwise.
    public static func decide(
        local: LocalFacts, remote: RemoteFacts, pins: Pins, destinationSHA256: String? = nil
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

        if let size = local.destination.size, let total, size == total {
            if let pin = pins.sha256, let actual = destinationSHA256, actual != pin {
                return .replace(reason: "local file does not match its sha256 pin")
            }
            return .skip
        }
        if let partSize = local.partial.size, partSize > 0 {
            guard let total else {
                return .restart(reason: "the server did not report the file's size, so the partial file cannot be resumed safely")
            }
            if partSize < total { return .resume(from: partSize, source: .partial) }
            if partSize == total { return .finish(size: partSize) }
            return .restart(reason: "partial file (\(partSize) bytes) is larger than the remote file (\(total) bytes)")
        }
        if let size = local.destination.size {
            guard let total else {
                return .replace(reason: "the server did not report the file's size, so the local copy cannot be checked")
            }
            if size == 0 { return .restart(reason: "local file is empty") }
            if size < total { return .resume(from: size, source: .destination) }
            return .restart(reason: "local file (\(size) bytes) is larger than the remote file (\(total) bytes)")
        }
        return .download
    }

    /// True when the decision depends on the hash of `DEST`: a sha256 pin, and a `DEST` whose
    /// size already matches. Only then is hashing worth its cost.
    public static func needsDestinationHash(local: LocalFacts, remote: RemoteFacts, pins: Pins) -> Bool {
        guard pins.sha256 != nil, let size = local.destination.size, case .available(let file) = remote,
              let total = file.size ?? pins.size
        else { return false }
        return size == total
    }
}
