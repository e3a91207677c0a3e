import Testing
@testable import MirrorCore

/// The decision table of docs/DESIGN.md ("The plan"), row by row, for the rows that need no state store.
struct PlannerTests {
    struct Row: CustomTestStringConvertible, Sendable {
        var name: String
        var destination: LocalFacts.FileState
        var partial: LocalFacts.FileState
        var remote: RemoteFacts
        var pins = Pins()
        var destinationSHA256: String?
        var state: StateRecord?
        var identity: LocalIdentity?
        /// DEST's modification time, seconds since 1970.
        var modified: Int64?
        var expected: Action
        var testDescription: String { name }
    }

    static let size100 = RemoteFacts.available(RemoteFile(size: 100, etag: "\"a\""))
    static let sizeUnknown = RemoteFacts.available(RemoteFile(size: nil, etag: "\"a\""))
    /// A dynamic server's reply: no size, no ETag, no Last-Modified.
    static let nothingKnown = RemoteFacts.available(RemoteFile(size: nil))
    /// Size only: nothing tells one version of that size from another.
    static let sizeOnly = RemoteFacts.available(RemoteFile(size: 100))
    static let dated = RemoteFacts.available(RemoteFile(size: 100, etag: "\"a\"", lastModified: "Sun, 06 Nov 1994 08:49:37 GMT"))
    /// `dated`'s Last-Modified in seconds since 1970.
    static let datedSeconds: Int64 = 784_111_777
    static let pin = String(repeating: "a", count: 64)
    static let otherHash = String(repeating: "b", count: 64)
    static let pin512 = String(repeating: "c", count: 128)
    static let other512 = String(repeating: "d", count: 128)

    static let rows: [Row] = [
        Row(name: "nothing on disk → download", destination: .missing, partial: .missing, remote: size100,
            expected: .download),
        Row(name: "nothing on disk, size unknown → download", destination: .missing, partial: .missing,
            remote: sizeUnknown, expected: .download),
        Row(name: "DEST equal, no record, its date is the server's Last-Modified → skip", destination: .file(size: 100),
            partial: .missing, remote: dated, modified: datedSeconds, expected: .skip),
        Row(name: "DEST equal, no record, another date → replace: never adopted under validators it was not fetched with",
            destination: .file(size: 100), partial: .missing, remote: dated, modified: datedSeconds + 1,
            expected: .replace(reason: "no record says which version the local file is, and its date is not the server's Last-Modified")),
        Row(name: "DEST equal, no record, no Last-Modified → replace", destination: .file(size: 100), partial: .missing,
            remote: size100, modified: datedSeconds,
            expected: .replace(reason: "no record says which version the local file is, and its date is not the server's Last-Modified")),
        Row(name: "DEST smaller → resume from its size", destination: .file(size: 40), partial: .missing,
            remote: size100, expected: .resume(from: 40, source: .destination)),
        Row(name: "DEST larger → restart", destination: .file(size: 140), partial: .missing, remote: size100,
            expected: .restart(reason: "local file (140 bytes) is larger than the remote file (100 bytes)")),
        Row(name: "DEST empty → restart", destination: .file(size: 0), partial: .missing, remote: size100,
            expected: .restart(reason: "local file is empty")),
        Row(name: "DEST.part smaller → resume", destination: .missing, partial: .file(size: 60), remote: size100,
            expected: .resume(from: 60, source: .partial)),
        Row(name: "DEST.part equal, no record → resume at its end (the overlap check verifies it)",
            destination: .missing, partial: .file(size: 100), remote: size100,
            expected: .resume(from: 100, source: .partial)),
        Row(name: "DEST.part larger → restart", destination: .missing, partial: .file(size: 101), remote: size100,
            expected: .restart(reason: "partial file (101 bytes) is larger than the remote file (100 bytes)")),
        Row(name: "DEST.part empty → download", destination: .missing, partial: .file(size: 0), remote: size100,
            expected: .download),
        Row(name: "DEST larger and DEST.part smaller → resume the partial", destination: .file(size: 140),
            partial: .file(size: 30), remote: size100, expected: .resume(from: 30, source: .partial)),
        Row(name: "DEST equal and current by its date, and a stale DEST.part → skip", destination: .file(size: 100),
            partial: .file(size: 30), remote: dated, modified: datedSeconds, expected: .skip),
        Row(name: "remote 404 → fail, whatever is on disk", destination: .file(size: 40), partial: .missing,
            remote: .unavailable(.httpStatus(404)), expected: .fail(.httpStatus(404))),
        Row(name: "remote 403 → fail", destination: .missing, partial: .missing,
            remote: .unavailable(.httpStatus(403)), expected: .fail(.httpStatus(403))),
        Row(name: "remote connection refused → fail", destination: .missing, partial: .file(size: 5),
            remote: .unavailable(.curl(code: 7, message: "refused", osErrno: 0)),
            expected: .fail(.curl(code: 7, message: "refused", osErrno: 0))),
        Row(name: "size unknown, DEST present → replace", destination: .file(size: 10), partial: .missing,
            remote: sizeUnknown,
            expected: .replace(reason: "the server did not report the file's size, so the local copy cannot be checked")),
        Row(name: "size unknown, DEST.part present → restart", destination: .missing, partial: .file(size: 10),
            remote: sizeUnknown,
            expected: .restart(reason: "the server did not report the file's size, so the partial file cannot be resumed safely")),
        Row(name: "size unknown but pinned → the pin is the size", destination: .file(size: 100), partial: .missing,
            remote: .available(RemoteFile(size: nil, lastModified: "Sun, 06 Nov 1994 08:49:37 GMT")), pins: Pins(size: 100),
            modified: datedSeconds, expected: .skip),
        Row(name: "nothing identifies the version, DEST present → replace, never a silent skip", destination: .file(size: 10),
            partial: .missing, remote: nothingKnown,
            expected: .replace(reason: "the server sends no ETag or Last-Modified to identify the file's version, so the local file is fetched again and compared")),
        Row(name: "size only, DEST equal → replace: a same-size change would go unseen", destination: .file(size: 100),
            partial: .missing, remote: sizeOnly, modified: datedSeconds,
            expected: .replace(reason: "the server sends no ETag or Last-Modified to identify the file's version, so the local file is fetched again and compared")),
        Row(name: "size only, DEST.part → restart: nothing says the partial is of this version", destination: .missing,
            partial: .file(size: 40), remote: sizeOnly,
            expected: .restart(reason: "the server sends no ETag or Last-Modified to identify the file's version, so the partial file cannot be resumed safely")),
        Row(name: "size only, DEST shorter → replace, not resume", destination: .file(size: 40), partial: .missing,
            remote: sizeOnly,
            expected: .replace(reason: "the server sends no ETag or Last-Modified to identify the file's version, so the local file is fetched again and compared")),
        Row(name: "size only, DEST.part, sha256 pin → resume: the pin checks the result", destination: .missing,
            partial: .file(size: 40), remote: sizeOnly, pins: Pins(digest: pin), expected: .resume(from: 40, source: .partial)),
        Row(name: "size only, DEST equal and matching its sha256 pin → skip", destination: .file(size: 100), partial: .missing,
            remote: sizeOnly, pins: Pins(digest: pin), destinationSHA256: pin, expected: .skip),
        Row(name: "size pin contradicts the server → fail", destination: .missing, partial: .missing,
            remote: size100, pins: Pins(size: 99), expected: .fail(.sizePinConflict(pinned: 99, remote: 100))),
        Row(name: "DEST equal, sha256 pin matches → skip", destination: .file(size: 100), partial: .missing,
            remote: size100, pins: Pins(digest: pin), destinationSHA256: pin, expected: .skip),
        Row(name: "DEST equal, sha256 pin differs → replace", destination: .file(size: 100), partial: .missing,
            remote: size100, pins: Pins(digest: pin), destinationSHA256: otherHash,
            expected: .replace(reason: "local file does not match its sha256 pin")),
        Row(name: "DEST fails its pin, a partial of the pinned version → resume it, not replace", destination: .file(size: 100),
            partial: .file(size: 60), remote: size100, pins: Pins(digest: pin), destinationSHA256: otherHash,
            expected: .resume(from: 60, source: .partial)),
        Row(name: "DEST matches its pin though the server's size changed → skip, record or not", destination: .file(size: 100),
            partial: .missing, remote: .available(RemoteFile(size: 150, etag: "\"c\"")), pins: Pins(digest: pin),
            destinationSHA256: pin, expected: .skip),
        Row(name: "DEST matches the sha256 pin but not the size pin → not skipped", destination: .file(size: 100),
            partial: .missing, remote: .available(RemoteFile(size: 90, etag: "\"c\"")), pins: Pins(size: 90, digest: pin),
            destinationSHA256: pin,
            expected: .replace(reason: "local file does not match its sha256 pin")),
        Row(name: "shorter DEST failing its pin → resumed: it may be the pinned file's start", destination: .file(size: 40),
            partial: .missing, remote: size100, pins: Pins(digest: pin), destinationSHA256: otherHash,
            expected: .resume(from: 40, source: .destination)),
        Row(name: "DEST is a directory → fail", destination: .other(kind: "a directory"), partial: .missing,
            remote: size100, expected: .fail(.localConflict("the destination is a directory; mirror will not replace it"))),
        Row(name: "DEST.part is a symlink → fail", destination: .missing, partial: .other(kind: "a symbolic link"),
            remote: size100,
            expected: .fail(.localConflict("the partial file's path is a symbolic link; mirror will not replace it"))),
    ]

    // Rows that need the state store.
    static let identity = LocalIdentity(size: 100, modifiedNanoseconds: 1_000, inode: 7)
    static let v1 = RemoteValidators(etag: "\"a\"", lastModified: "Sun, 06 Nov 1994 08:49:37 GMT", size: 100)
    static func verified(_ validators: RemoteValidators = v1, sha256: String? = nil, local: LocalIdentity = identity) -> StateRecord {
        StateRecord(dest: "d", url: "u", complete: CompleteVersion(validators: validators, sha256: sha256, local: local))
    }
    static let v1Remote = RemoteFacts.available(RemoteFile(size: 100, etag: "\"a\"", lastModified: "Sun, 06 Nov 1994 08:49:37 GMT"))
    static let v2SameSize = RemoteFacts.available(RemoteFile(size: 100, etag: "\"b\"", lastModified: "Sun, 06 Nov 1994 08:49:37 GMT"))
    static let v2NewDate = RemoteFacts.available(RemoteFile(size: 100, etag: nil, lastModified: "Mon, 07 Nov 1994 08:49:37 GMT"))
    static let v2Longer = RemoteFacts.available(RemoteFile(size: 150, etag: "\"c\""))
    /// v1 as Apache tags it while the file is less than a second old.
    static let v1Weak = RemoteValidators(etag: "W/\"a\"", lastModified: "Sun, 06 Nov 1994 08:49:37 GMT", size: 100)

    static let stateRows: [Row] = [
        Row(name: "state complete, validators equal → skip", destination: .file(size: 100), partial: .missing,
            remote: v1Remote, state: verified(), identity: identity, expected: .skip),
        Row(name: "state complete, same size, ETag changed → replace", destination: .file(size: 100), partial: .missing,
            remote: v2SameSize, state: verified(), identity: identity,
            expected: .replace(reason: "the remote file changed: ETag changed from \"a\" to \"b\"")),
        Row(name: "state complete, Last-Modified changed → replace", destination: .file(size: 100), partial: .missing,
            remote: v2NewDate, state: verified(), identity: identity,
            expected: .replace(reason: "the remote file changed: Last-Modified changed from Sun, 06 Nov 1994 08:49:37 GMT to Mon, 07 Nov 1994 08:49:37 GMT")),
        Row(name: "state complete, size changed → replace, not resume", destination: .file(size: 100), partial: .missing,
            remote: v2Longer, state: verified(), identity: identity,
            expected: .replace(reason: "the remote file changed: size changed from 100 to 150 bytes")),
        Row(name: "state for another file (inode changed) → not adopted under the new validators: replace",
            destination: .file(size: 100), partial: .missing,
            remote: v2SameSize, state: verified(), identity: LocalIdentity(size: 100, modifiedNanoseconds: 1_000, inode: 8),
            expected: .replace(reason: "no record says which version the local file is, and its date is not the server's Last-Modified")),
        Row(name: "state complete, nothing identifies the version → replace, never skipped forever",
            destination: .file(size: 100), partial: .missing, remote: sizeOnly,
            state: verified(RemoteValidators(etag: nil, lastModified: nil, size: 100)), identity: identity,
            expected: .replace(reason: "the server sends no ETag or Last-Modified to identify the file's version, so the local file is fetched again and compared")),
        Row(name: "state complete, pinned and matching, remote changed → skip: the pin names the bytes",
            destination: .file(size: 100), partial: .missing, remote: v2SameSize, pins: Pins(digest: pin),
            state: verified(sha256: pin), identity: identity, expected: .skip),
        Row(name: "partial recorded with a size only → restart, never resumed unidentified", destination: .missing,
            partial: .file(size: 40), remote: sizeOnly,
            state: StateRecord(dest: "d", url: "u", partial: RemoteValidators(etag: nil, lastModified: nil, size: 100)),
            expected: .restart(reason: "the server sends no ETag or Last-Modified to identify the file's version, so the partial file cannot be resumed safely")),
        Row(name: "state complete, recorded hash contradicts the pin → replace", destination: .file(size: 100), partial: .missing,
            remote: v1Remote, pins: Pins(digest: pin), state: verified(sha256: otherHash), identity: identity,
            expected: .replace(reason: "local file does not match its sha256 pin")),
        Row(name: "sha512 pin, DEST hashes to it → skip", destination: .file(size: 100), partial: .missing,
            remote: v1Remote, pins: Pins(digest: pin512), destinationSHA256: pin512, expected: .skip),
        Row(name: "sha512 pin, DEST hashes otherwise → replace, naming the sha512 pin", destination: .file(size: 100), partial: .missing,
            remote: v1Remote, pins: Pins(digest: pin512), destinationSHA256: other512,
            expected: .replace(reason: "local file does not match its sha512 pin")),
        Row(name: "sha512 pin over a record of a sha256: the record says nothing of the pin, DEST's hash decides",
            destination: .file(size: 100), partial: .missing, remote: v1Remote, pins: Pins(digest: pin512),
            destinationSHA256: pin512, state: verified(sha256: otherHash), identity: identity, expected: .skip),
        Row(name: "no pin, a record of a sha512, DEST hashed in SHA-256: not taken for a changed file",
            destination: .file(size: 100), partial: .missing, remote: v1Remote, destinationSHA256: pin,
            state: verified(sha256: pin512), identity: LocalIdentity(size: 100, modifiedNanoseconds: 1_000, inode: 8),
            expected: .replace(reason: "no record says which version the local file is, and its date is not the server's Last-Modified")),
        Row(name: "partial of the current version → resume", destination: .missing, partial: .file(size: 40),
            remote: v1Remote, state: StateRecord(dest: "d", url: "u", partial: v1),
            expected: .resume(from: 40, source: .partial)),
        Row(name: "partial of the current version, complete → finish", destination: .missing, partial: .file(size: 100),
            remote: v1Remote, state: StateRecord(dest: "d", url: "u", partial: v1), expected: .finish(size: 100)),
        Row(name: "partial of an older version → restart, never spliced", destination: .missing, partial: .file(size: 40),
            remote: v2SameSize, state: StateRecord(dest: "d", url: "u", partial: v1),
            expected: .restart(reason: "the remote file changed since the partial download started (ETag changed from \"a\" to \"b\")")),
        Row(name: "state complete under a weak ETag, the same tag now strong → skip", destination: .file(size: 100),
            partial: .missing, remote: v1Remote, state: verified(v1Weak), identity: identity, expected: .skip),
        Row(name: "partial started under a weak ETag, the same tag now strong → resume", destination: .missing,
            partial: .file(size: 40), remote: v1Remote, state: StateRecord(dest: "d", url: "u", partial: v1Weak),
            expected: .resume(from: 40, source: .partial)),
        Row(name: "DEST outdated and a partial of the new version → resume the partial", destination: .file(size: 100),
            partial: .file(size: 60), remote: v2Longer,
            state: StateRecord(dest: "d", url: "u",
                               complete: CompleteVersion(validators: v1, sha256: nil, local: identity),
                               partial: RemoteValidators(etag: "\"c\"", lastModified: nil, size: 150)),
            identity: identity, expected: .resume(from: 60, source: .partial)),
    ]

    @Test(arguments: stateRows)
    func decisionTableWithState(_ row: Row) {
        decisionTable(row)
    }

    @Test func pinnedAndVerifiedNeedsTheSameFileAndHash() {
        let local = LocalFacts(destination: .file(size: 100), partial: .missing, destinationIdentity: Self.identity)
        #expect(Planner.isPinnedAndVerified(local: local, state: Self.verified(sha256: Self.pin), pins: Pins(digest: Self.pin)))
        #expect(!Planner.isPinnedAndVerified(local: local, state: Self.verified(sha256: Self.pin), pins: Pins()))
        #expect(!Planner.isPinnedAndVerified(local: local, state: Self.verified(sha256: Self.otherHash), pins: Pins(digest: Self.pin)))
        #expect(!Planner.isPinnedAndVerified(local: local, state: Self.verified(sha256: Self.pin), pins: Pins(size: 99, digest: Self.pin)))
        let touched = LocalFacts(destination: .file(size: 100), partial: .missing,
                                 destinationIdentity: LocalIdentity(size: 100, modifiedNanoseconds: 2_000, inode: 7))
        #expect(!Planner.isPinnedAndVerified(local: touched, state: Self.verified(sha256: Self.pin), pins: Pins(digest: Self.pin)))
    }

    @Test(arguments: rows)
    func decisionTable(_ row: Row) {
        let local = LocalFacts(destination: row.destination, partial: row.partial, destinationIdentity: row.identity,
                               destinationModified: row.modified)
        let action = Planner.decide(
            local: local, remote: row.remote, pins: row.pins, state: row.state, destinationSHA256: row.destinationSHA256)
        #expect(action == row.expected)
    }

    /// The pin decides whatever the server's size: with or without a record, the same bytes get
    /// the same verdict.
    @Test func hashIsWantedForAPinnedDestinationOfAnySize() {
        let equal = LocalFacts(destination: .file(size: 100), partial: .missing)
        let shorter = LocalFacts(destination: .file(size: 10), partial: .missing)
        #expect(Planner.needsDestinationHash(local: equal, remote: Self.size100, pins: Pins(digest: Self.pin)))
        #expect(!Planner.needsDestinationHash(local: equal, remote: Self.size100, pins: Pins()))
        #expect(Planner.needsDestinationHash(local: shorter, remote: Self.size100, pins: Pins(digest: Self.pin)))
        #expect(!Planner.needsDestinationHash(local: shorter, remote: Self.size100, pins: Pins()))
        #expect(!Planner.needsDestinationHash(local: equal, remote: .unavailable(.httpStatus(404)), pins: Pins(digest: Self.pin)))
    }

    /// A digest recorded in one algorithm vouches for nothing pinned in the other: the file is
    /// hashed again rather than taken for a match or a mismatch.
    @Test func aRecordedDigestCountsOnlyForAPinOfItsAlgorithm() {
        let local = LocalFacts(destination: .file(size: 100), partial: .missing, destinationIdentity: Self.identity)
        let record = Self.verified(sha256: Self.pin)
        #expect(Planner.isPinnedAndVerified(local: local, state: record, pins: Pins(digest: Self.pin)))
        #expect(!Planner.isPinnedAndVerified(local: local, state: record, pins: Pins(digest: Self.pin512)))
        #expect(Planner.needsDestinationHash(local: local, remote: Self.size100, pins: Pins(digest: Self.pin512), state: record))
        #expect(!Planner.needsDestinationHash(local: local, remote: Self.size100, pins: Pins(digest: Self.pin), state: record))
    }

    @Test func actionNamesOffsetsAndBytes() {
        #expect(Action.resume(from: 40, source: .partial).name == "resume")
        #expect(Action.resume(from: 40, source: .partial).offset == 40)
        #expect(Action.resume(from: 40, source: .partial).bytesToTransfer(remoteSize: 100) == 60)
        #expect(Action.finish(size: 100).name == "resume")
        #expect(Action.finish(size: 100).bytesToTransfer(remoteSize: 100) == 0)
        #expect(Action.download.bytesToTransfer(remoteSize: nil) == nil)
        #expect(Action.skip.bytesToTransfer(remoteSize: 100) == 0)
        #expect(!Action.skip.changesSomething && !Action.fail(.httpStatus(404)).changesSomething)
        #expect(Action.replace(reason: "x").changesSomething)
    }
}
