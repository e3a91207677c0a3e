import Glibc
import Testing
@testable import MirrorCore

/// `EntryMachine`, transition by transition: each row feeds events in order and states the
/// effects each one must produce. Every `(phase, event)` pair the machine handles appears in
/// at least one row (`everyHandledTransitionIsInTheTable` keeps it so).
struct EntryMachineTests {
    typealias Event = EntryMachine.Event
    typealias Effect = EntryMachine.Effect

    struct Step: Sendable {
        var event: Event
        var effects: [Effect]
        var phase: EntryMachine.Phase
    }

    struct Row: CustomTestStringConvertible, Sendable {
        var name: String
        var mode = EntryMachine.Mode.sync
        var sources = 1
        var retries = 2
        var pins = Pins()
        /// The sources that answer HTTP conditions; nil: all of them (http and https URLs).
        var conditional: SourceIndexSet?
        /// A blob cache is used (`EntryMachine.fillsCache`).
        var cache = false
        /// `--offline`.
        var offline = false
        var steps: [Step]
        var testDescription: String { name }
    }

    static func step(_ event: Event, _ effects: [Effect], _ phase: EntryMachine.Phase) -> Step {
        Step(event: event, effects: effects, phase: phase)
    }

    // Facts used by the rows.
    static let nothing = LocalFacts(destination: .missing, partial: .missing)
    static let identity = LocalIdentity(size: 100, modifiedNanoseconds: 784_111_777_000_000_000, inode: 7)
    static let lastModified = "Sun, 06 Nov 1994 08:49:37 GMT"
    static let equalDest = LocalFacts(destination: .file(size: 100), partial: .missing, destinationIdentity: identity,
                                      destinationModified: 784_111_777)
    static let halfPartial = LocalFacts(destination: .missing, partial: .file(size: 50))
    static let shortDest = LocalFacts(destination: .file(size: 50), partial: .missing,
                                      destinationIdentity: LocalIdentity(size: 50, modifiedNanoseconds: 1, inode: 8))
    static let file = RemoteFile(size: 100, etag: "\"a\"", lastModified: lastModified)
    static let validators = RemoteValidators(file)
    static let pin = String(repeating: "a", count: 64)
    static let other = String(repeating: "b", count: 64)
    static let pin512 = String(repeating: "d", count: 128)
    static let other512 = String(repeating: "e", count: 128)
    static let head = EntryMachine.ResponseHeadSummary(etag: "\"a\"", lastModified: lastModified)
    static let verified = CompleteVersion(validators: validators, sha256: pin, local: identity)
    static let recordOfDest = StateRecord(dest: "f", url: "u", complete: verified)
    static let recordOfPartial = StateRecord(dest: "f", url: "u", partial: validators)
    static let refused = TransferFailure.curl(code: 7, message: "refused", osErrno: ECONNREFUSED)
    static let timeout = TransferFailure.curl(code: 28, message: "timed out", osErrno: 0)
    static let unavailable503 = TransferFailure.httpStatus(503, retryAfter: "5")
    static let notFound = TransferFailure.httpStatus(404)
    static let full = TransferFailure.localIO(path: "f.part", operation: "write", errno: ENOSPC)

    /// Up to the inspection of the first attempt.
    static let begin: [Step] = [
        step(.start(cancelled: false), [.awaitHost(source: 0)], .waitingForHost),
        step(.hostReady, [.acquireSlot], .waitingForSlot),
        step(.slotGranted(hostTroubled: false), [.inspect], .inspecting),
    ]

    static func download(offset: Int64 = 0, remote: RemoteFile? = nil, action: Action = .download, startedFrom: RemoteValidators? = nil,
                         hadRecord: Bool = false, source: Int = 0) -> Effect {
        .transfer(EntryMachine.TransferOrder(source: source, action: action, offset: offset, remote: remote, startedFrom: startedFrom,
                                             hadPartialRecord: hadRecord))
    }

    static func receive(remote: RemoteFile?, action: Action, source: Int = 0) -> Effect {
        .receiveBody(EntryMachine.TransferOrder(source: source, action: action, offset: 0, remote: remote, startedFrom: nil,
                                                hadPartialRecord: false))
    }

    /// Up to the conditional GET of `equalDest`, which the store vouches for as `file`.
    static let askConditionally: [Step] = begin + [
        step(.inspected(equalDest, record: recordOfDest, recordUnreadable: false),
             [.conditionalGet(source: 0, ifNoneOf: validators)], .askingConditionally),
    ]
    static let changed = RemoteFile(size: 100, etag: "\"b\"", lastModified: "Mon, 07 Nov 1994 08:49:37 GMT")
    static let changedReplace = Action.replace(reason: "the remote file changed: ETag changed from \"a\" to \"b\"")

    /// A new file downloaded whole, up to its hash.
    static let freshDownload: [Step] = begin + [
        step(.inspected(nothing, record: nil, recordUnreadable: false), [.announce(.decided(.download)), download()], .transferring),
        step(.transferEnded(.written(position: 100, total: 100, bytes: 100, restartedFromZero: false, head: head)),
             [.releaseSlot, .finishHash(size: 100)], .finishingHash),
    ]

    /// A resumed download of `file` that fails the pin `pin`, retried, up to the inspection of
    /// the retry.
    static let resumedPinMismatch: [Step] = begin + [
        step(.inspected(halfPartial, record: recordOfPartial, recordUnreadable: false), [.probe(source: 0)], .probing),
        step(.probed(.available(file)), [
            .announce(.decided(.resume(from: 50, source: .partial))),
            download(offset: 50, remote: file, action: .resume(from: 50, source: .partial), startedFrom: validators, hadRecord: true),
        ], .transferring),
        step(.transferEnded(.written(position: 100, total: 100, bytes: 50, restartedFromZero: false, head: head)),
             [.releaseSlot, .finishHash(size: 100)], .finishingHash),
        step(.hashed(.success(.init(sha256: other, sizeOnDisk: 100))), [
            .removePartial, .record(.clearPartial),
            .backOff(attempt: 1, failure: .checksumMismatch(expected: pin, actual: other), retryAfter: nil),
        ], .backingOff),
        step(.backOffEnded(cancelled: false), [.awaitHost(source: 0)], .waitingForHost),
        step(.hostReady, [.acquireSlot], .waitingForSlot),
        step(.slotGranted(hostTroubled: false), [.inspect], .inspecting),
    ]

    /// `nothing` on disk, and the cache's blob of the pin, of 100 bytes.
    static let cachedOnly = LocalFacts(destination: .missing, partial: .missing, cached: 100)
    static let noValidators = RemoteValidators(etag: nil, lastModified: nil, size: 100)

    /// The blob cache: placing a pinned file from it, a blob found wanting, filling it.
    /// Up to the inspection of the first attempt of a file pinned by SHA-256, with a cache: the
    /// blob's lock first.
    static let lockedBegin: [Step] = begin

    static let cacheRows: [Row] = [
        Row(name: "cache: an interruption while the blob's lock is awaited ends the entry as cancelled", pins: Pins(digest: pin), cache: true,
            steps: begin + [
            step(.inspected(nothing, record: nil, recordUnreadable: false), [.releaseSlot, .lockBlob], .lockingBlob),
            step(.runCancelled, [], .lockingBlob),
            step(.blobLocked, [.finish(.failed(.cancelled, action: .download, inspectPartial: false))], .done),
        ]),
        Row(name: "cache: a pinned file to fetch waits for the blob's lock without a slot, then looks again and finds it placed",
            pins: Pins(digest: pin), cache: true, steps: begin + [
            step(.inspected(nothing, record: nil, recordUnreadable: false), [.releaseSlot, .lockBlob], .lockingBlob),
            step(.blobLocked, [.awaitHost(source: 0)], .waitingForHost),
            step(.hostReady, [.acquireSlot], .waitingForSlot),
            step(.slotGranted(hostTroubled: false), [.inspect], .inspecting),
            step(.inspected(cachedOnly, record: nil, recordUnreadable: false), [.announce(.decided(.cached)), .place(size: 100)], .placing),
            step(.placed(.success(.init(sha256: pin, sizeOnDisk: 100))), [.releaseSlot, .commit(validators: noValidators, sha256: pin)], .committing),
            step(.committed(.success(identity)), [.finish(.succeeded(.transferred, action: .cached, size: 100, sha256: pin))], .done),
        ]),
        Row(name: "cache: a pinned file the store vouches for takes no lock", pins: Pins(digest: pin), cache: true, steps: begin + [
            step(.inspected(equalDest, record: recordOfDest, recordUnreadable: false), [
                .announce(.decided(.skip)), .releaseSlot, .finish(.succeeded(.skipped, action: .skip, size: 100, sha256: pin)),
            ], .done),
        ]),
        Row(name: "cache: a missing DEST whose pinned blob is cached is placed, checked and committed, with no request",
            pins: Pins(digest: pin), cache: true, steps: lockedBegin + [
            step(.inspected(cachedOnly, record: nil, recordUnreadable: false), [.announce(.decided(.cached)), .place(size: 100)], .placing),
            step(.placed(.success(.init(sha256: pin, sizeOnDisk: 100))), [.releaseSlot, .commit(validators: noValidators, sha256: pin)], .committing),
            step(.committed(.success(identity)), [.finish(.succeeded(.transferred, action: .cached, size: 100, sha256: pin))], .done),
        ]),
        Row(name: "cache: a blob that hashes to another digest is quarantined, and the file downloaded and not put back",
            pins: Pins(digest: pin), cache: true, steps: lockedBegin + [
            step(.inspected(cachedOnly, record: nil, recordUnreadable: false), [.announce(.decided(.cached)), .place(size: 100)], .placing),
            step(.placed(.success(.init(sha256: other, sizeOnDisk: 100))), [.removePartial, .quarantineCached], .quarantining),
            step(.quarantined, [.inspect], .inspecting),
            // The blob is still named on this look (a copy another process put back): not tried again.
            step(.inspected(cachedOnly, record: nil, recordUnreadable: false), [.releaseSlot, .lockBlob], .lockingBlob),
            step(.blobLocked, [.awaitHost(source: 0)], .waitingForHost),
            step(.hostReady, [.acquireSlot], .waitingForSlot),
            step(.slotGranted(hostTroubled: false), [.inspect], .inspecting),
            step(.inspected(cachedOnly, record: nil, recordUnreadable: false), [.announce(.decided(.download)), download()], .transferring),
            step(.transferEnded(.written(position: 100, total: 100, bytes: 100, restartedFromZero: false, head: head)),
                 [.releaseSlot, .finishHash(size: 100)], .finishingHash),
            step(.hashed(.success(.init(sha256: pin, sizeOnDisk: 100))), [.commit(validators: validators, sha256: pin)], .committing),
            step(.committed(.success(identity)), [.fillCache(digest: pin, size: 100, identity: identity)], .fillingCache),
            step(.cacheFilled, [.finish(.succeeded(.transferred, action: .download, size: 100, sha256: pin))], .done),
        ]),
        Row(name: "cache: a blob that cannot be read is a miss: the file is downloaded", pins: Pins(digest: pin), cache: true, steps: lockedBegin + [
            step(.inspected(cachedOnly, record: nil, recordUnreadable: false), [.announce(.decided(.cached)), .place(size: 100)], .placing),
            step(.placed(.failure(full)), [.removePartial, .inspect], .inspecting),
            step(.inspected(nothing, record: nil, recordUnreadable: false), [.releaseSlot, .lockBlob], .lockingBlob),
            step(.blobLocked, [.awaitHost(source: 0)], .waitingForHost),
            step(.hostReady, [.acquireSlot], .waitingForSlot),
            step(.slotGranted(hostTroubled: false), [.inspect], .inspecting),
            step(.inspected(nothing, record: nil, recordUnreadable: false), [.announce(.decided(.download)), download()], .transferring),
        ]),
        Row(name: "cache: a blob of another size than the placement read back is not committed", pins: Pins(digest: pin), cache: true,
            steps: lockedBegin + [
            step(.inspected(cachedOnly, record: nil, recordUnreadable: false), [.announce(.decided(.cached)), .place(size: 100)], .placing),
            step(.placed(.success(.init(sha256: pin, sizeOnDisk: 90))), [.removePartial, .quarantineCached], .quarantining),
            step(.quarantined, [.inspect], .inspecting),
        ]),
        Row(name: "cache: a size pin the blob does not meet keeps the cache out", pins: Pins(size: 90, digest: pin), cache: true,
            steps: lockedBegin + [
            step(.inspected(cachedOnly, record: nil, recordUnreadable: false), [.releaseSlot, .lockBlob], .lockingBlob),
            step(.blobLocked, [.awaitHost(source: 0)], .waitingForHost),
            step(.hostReady, [.acquireSlot], .waitingForSlot),
            step(.slotGranted(hostTroubled: false), [.inspect], .inspecting),
            step(.inspected(cachedOnly, record: nil, recordUnreadable: false), [.announce(.decided(.download)), download()], .transferring),
        ]),
        Row(name: "cache: an unpinned download goes into the cache once committed", cache: true, steps: freshDownload + [
            step(.hashed(.success(.init(sha256: pin, sizeOnDisk: 100))), [.commit(validators: validators, sha256: pin)], .committing),
            step(.committed(.success(identity)), [.fillCache(digest: pin, size: 100, identity: identity)], .fillingCache),
            step(.cacheFilled, [.finish(.succeeded(.transferred, action: .download, size: 100, sha256: pin))], .done),
        ]),
        Row(name: "cache: a DEST hashed at first sight is recorded, goes into the cache, and is kept", cache: true, steps: begin + [
            step(.inspected(equalDest, record: nil, recordUnreadable: false), [.probe(source: 0)], .probing),
            step(.probed(.available(file)), [.announce(.decided(.skip)), .hashDestination], .hashingForRecord),
            step(.destinationHashed(.success(pin)), [
                .record(.complete(verified)), .releaseSlot, .fillCache(digest: pin, size: 100, identity: identity),
            ], .fillingCache),
            step(.cacheFilled, [.finish(.succeeded(.skipped, action: .skip, size: 100, sha256: pin))], .done),
        ]),
        Row(name: "cache: a file pinned by SHA-512 takes the blob's lock, is downloaded and goes in", pins: Pins(digest: pin512), cache: true,
            steps: begin + [
            step(.inspected(nothing, record: nil, recordUnreadable: false), [.releaseSlot, .lockBlob], .lockingBlob),
            step(.blobLocked, [.awaitHost(source: 0)], .waitingForHost),
            step(.hostReady, [.acquireSlot], .waitingForSlot),
            step(.slotGranted(hostTroubled: false), [.inspect], .inspecting),
            step(.inspected(nothing, record: nil, recordUnreadable: false), [.announce(.decided(.download)), download()], .transferring),
            step(.transferEnded(.written(position: 100, total: 100, bytes: 100, restartedFromZero: false, head: head)),
                 [.releaseSlot, .finishHash(size: 100)], .finishingHash),
            step(.hashed(.success(.init(sha256: pin512, sizeOnDisk: 100))), [.commit(validators: validators, sha256: pin512)], .committing),
            step(.committed(.success(identity)), [.fillCache(digest: pin512, size: 100, identity: identity)], .fillingCache),
            step(.cacheFilled, [.finish(.succeeded(.transferred, action: .download, size: 100, sha256: pin512))], .done),
        ]),
        Row(name: "cache: a file pinned by SHA-512 whose blob the index names is placed and checked against that pin",
            pins: Pins(digest: pin512), cache: true, steps: begin + [
            step(.inspected(cachedOnly, record: nil, recordUnreadable: false), [.announce(.decided(.cached)), .place(size: 100)], .placing),
            step(.placed(.success(.init(sha256: pin512, sizeOnDisk: 100))), [.releaseSlot, .commit(validators: noValidators, sha256: pin512)], .committing),
            step(.committed(.success(identity)), [.finish(.succeeded(.transferred, action: .cached, size: 100, sha256: pin512))], .done),
        ]),
        Row(name: "cache: a partial file beside a cached blob is resumed, not placed over", pins: Pins(digest: pin), cache: true,
            steps: lockedBegin + [
            step(.inspected(LocalFacts(destination: .missing, partial: .file(size: 50), cached: 100), record: recordOfPartial,
                            recordUnreadable: false), [.releaseSlot, .lockBlob], .lockingBlob),
            step(.blobLocked, [.awaitHost(source: 0)], .waitingForHost),
            step(.hostReady, [.acquireSlot], .waitingForSlot),
            step(.slotGranted(hostTroubled: false), [.inspect], .inspecting),
            step(.inspected(LocalFacts(destination: .missing, partial: .file(size: 50), cached: 100), record: recordOfPartial,
                            recordUnreadable: false), [.probe(source: 0)], .probing),
        ]),
        Row(name: "cache: a pinned file whose blob is not cached is downloaded", pins: Pins(digest: pin), steps: begin + [
            step(.inspected(nothing, record: nil, recordUnreadable: false), [.announce(.decided(.download)), download()], .transferring),
        ]),
        Row(name: "cache: plan shows a cached blob as the action, with no request", mode: .plan, pins: Pins(digest: pin), cache: true,
            steps: [
            step(.start(cancelled: false), [.acquireSlot], .waitingForSlot),
            step(.slotGranted(hostTroubled: false), [.inspect], .inspecting),
            step(.inspected(cachedOnly, record: nil, recordUnreadable: false), [
                .announce(.decided(.cached)), .releaseSlot, .finish(.planned(.cached, localSize: nil, remoteSize: 100)),
            ], .done),
        ]),
    ]

    static let offlineMissing = TransferFailure.offline("neither the root nor the cache holds sha256 \(pin)")
    static let offlineUnpinned = TransferFailure.offline("the root does not hold it, and with no sha256 or sha512 pin the cache cannot stand in")

    /// `--offline`: no request, whatever is on disk.
    static let offlineRows: [Row] = [
        Row(name: "offline: the cache's blob is placed as online", pins: Pins(digest: pin), cache: true, offline: true, steps: begin + [
            step(.inspected(cachedOnly, record: nil, recordUnreadable: false), [.announce(.decided(.cached)), .place(size: 100)], .placing),
        ]),
        Row(name: "offline: a pinned file neither the root nor the cache holds fails at once, naming its digest", sources: 2, retries: 3,
            pins: Pins(digest: pin), cache: true, offline: true, steps: begin + [
            step(.inspected(nothing, record: nil, recordUnreadable: false), [
                .announce(.decided(.fail(offlineMissing))), .releaseSlot,
                .finish(.failed(offlineMissing, action: .fail(offlineMissing), inspectPartial: false)),
            ], .done),
        ]),
        Row(name: "offline: a blob found wanting is quarantined, and then the entry fails rather than download", pins: Pins(digest: pin),
            cache: true, offline: true, steps: begin + [
            step(.inspected(cachedOnly, record: nil, recordUnreadable: false), [.announce(.decided(.cached)), .place(size: 100)], .placing),
            step(.placed(.success(.init(sha256: other, sizeOnDisk: 100))), [.removePartial, .quarantineCached], .quarantining),
            step(.quarantined, [.inspect], .inspecting),
            step(.inspected(nothing, record: nil, recordUnreadable: false), [
                .announce(.decided(.fail(offlineMissing))), .releaseSlot,
                .finish(.failed(offlineMissing, action: .fail(offlineMissing), inspectPartial: false)),
            ], .done),
        ]),
        Row(name: "offline: a partial file is placed over from the cache, its record cleared", pins: Pins(digest: pin), cache: true,
            offline: true, steps: begin + [
            step(.inspected(LocalFacts(destination: .missing, partial: .file(size: 50), cached: 100), record: recordOfPartial,
                            recordUnreadable: false),
                 [.removePartial, .record(.clearPartial), .announce(.decided(.cached)), .place(size: 100)], .placing),
        ]),
        Row(name: "offline: a DEST that is not the pinned file is replaced from the cache", pins: Pins(digest: pin), cache: true,
            offline: true, steps: begin + [
            step(.inspected(LocalFacts(destination: .file(size: 100), partial: .missing, cached: 100), record: nil, recordUnreadable: false),
                 [.announce(.decided(.cached)), .place(size: 100)], .placing),
        ]),
        Row(name: "offline: a file the store verified is kept with no request", offline: true, steps: begin + [
            step(.inspected(equalDest, record: recordOfDest, recordUnreadable: false), [
                .announce(.decided(.skip)), .releaseSlot, .finish(.succeeded(.skipped, action: .skip, size: 100, sha256: pin)),
            ], .done),
        ]),
        Row(name: "offline: a pinned file the store verified is kept with no request", pins: Pins(digest: pin), offline: true, steps: begin + [
            step(.inspected(equalDest, record: recordOfDest, recordUnreadable: false), [
                .announce(.decided(.skip)), .releaseSlot, .finish(.succeeded(.skipped, action: .skip, size: 100, sha256: pin)),
            ], .done),
        ]),
        Row(name: "offline: an unpinned file nothing verified fails", offline: true, steps: begin + [
            step(.inspected(nothing, record: nil, recordUnreadable: false), [
                .announce(.decided(.fail(offlineUnpinned))), .releaseSlot,
                .finish(.failed(offlineUnpinned, action: .fail(offlineUnpinned), inspectPartial: false)),
            ], .done),
        ]),
        Row(name: "offline: a DEST the store has no record of fails, named as such", offline: true, steps: begin + [
            step(.inspected(equalDest, record: nil, recordUnreadable: false), [
                .announce(.decided(.fail(.offline("DEST is not a file the state store verified, and with no sha256 or sha512 pin the cache cannot stand in")))),
                .releaseSlot,
                .finish(.failed(.offline("DEST is not a file the state store verified, and with no sha256 or sha512 pin the cache cannot stand in"),
                                action: .fail(.offline("DEST is not a file the state store verified, and with no sha256 or sha512 pin the cache cannot stand in")),
                                inspectPartial: false)),
            ], .done),
        ]),
        Row(name: "offline plan: what cannot be had is a fail row, with no probe", mode: .plan, pins: Pins(digest: pin), offline: true, steps: [
            step(.start(cancelled: false), [.acquireSlot], .waitingForSlot),
            step(.slotGranted(hostTroubled: false), [.inspect], .inspecting),
            step(.inspected(nothing, record: nil, recordUnreadable: false), [
                .announce(.decided(.fail(offlineMissing))), .releaseSlot,
                .finish(.planned(.fail(offlineMissing), localSize: nil, remoteSize: nil)),
            ], .done),
        ]),
    ]

    static let rows: [Row] = conditionalRows + downloadRows + cacheRows + offlineRows + [
        Row(name: "interrupted before it began: nothing is touched", steps: [
            step(.start(cancelled: true), [.finish(.failed(.cancelled, action: .download, inspectPartial: false))], .done),
        ]),
        Row(name: "nothing on disk: download without a probe, hash, commit, record the version", steps: freshDownload + [
            step(.hashed(.success(.init(sha256: pin, sizeOnDisk: 100))), [.commit(validators: validators, sha256: pin)], .committing),
            step(.committed(.success(identity)), [
                .finish(.succeeded(.transferred, action: .download, size: 100, sha256: pin)),
            ], .done),
        ]),
        Row(name: "pinned and verified by the store: skip without a request", pins: Pins(digest: pin), steps: begin + [
            step(.inspected(equalDest, record: recordOfDest, recordUnreadable: false), [
                .announce(.decided(.skip)), .releaseSlot, .finish(.succeeded(.skipped, action: .skip, size: 100, sha256: pin)),
            ], .done),
        ]),
        Row(name: "DEST verified by the store, from an ftp or file: source (no conditions): probe, unchanged, skip", conditional: [],
            steps: begin + [
            step(.inspected(equalDest, record: recordOfDest, recordUnreadable: false), [.probe(source: 0)], .probing),
            step(.probed(.available(file)), [
                .announce(.decided(.skip)), .releaseSlot, .finish(.succeeded(.skipped, action: .skip, size: 100, sha256: pin)),
            ], .done),
        ]),
        Row(name: "DEST adopted at first sight (its date is the server's): hashed and recorded", steps: begin + [
            step(.inspected(equalDest, record: nil, recordUnreadable: false), [.probe(source: 0)], .probing),
            step(.probed(.available(file)), [.announce(.decided(.skip)), .hashDestination], .hashingForRecord),
            step(.destinationHashed(.success(pin)), [
                .record(.complete(verified)), .releaseSlot, .finish(.succeeded(.skipped, action: .skip, size: 100, sha256: pin)),
            ], .done),
        ]),
        Row(name: "DEST cannot be hashed for its record: the attempt fails with that error", retries: 0, steps: begin + [
            step(.inspected(equalDest, record: nil, recordUnreadable: false), [.probe(source: 0)], .probing),
            step(.probed(.available(file)), [.announce(.decided(.skip)), .hashDestination], .hashingForRecord),
            step(.destinationHashed(.failure(full)), [
                .releaseSlot, .finish(.failed(full, action: .fail(full), inspectPartial: true)),
            ], .done),
        ]),
        Row(name: "a pinned DEST is hashed before deciding; a match is skipped and recorded", pins: Pins(digest: pin), steps: begin + [
            step(.inspected(equalDest, record: nil, recordUnreadable: false), [.probe(source: 0)], .probing),
            step(.probed(.available(file)), [.hashDestination], .hashingDestination),
            step(.destinationHashed(.success(pin)), [
                .announce(.decided(.skip)), .record(.complete(verified)), .releaseSlot,
                .finish(.succeeded(.skipped, action: .skip, size: 100, sha256: pin)),
            ], .done),
        ]),
        Row(name: "a sha512 pin over a store record of a sha256: DEST is hashed in SHA-512, skipped and recorded so",
            pins: Pins(digest: pin512), steps: begin + [
            step(.inspected(equalDest, record: recordOfDest, recordUnreadable: false), [.probe(source: 0)], .probing),
            step(.probed(.available(file)), [.hashDestination], .hashingDestination),
            step(.destinationHashed(.success(pin512)), [
                .announce(.decided(.skip)), .record(.complete(CompleteVersion(validators: validators, sha256: pin512, local: identity))),
                .releaseSlot, .finish(.succeeded(.skipped, action: .skip, size: 100, sha256: pin512)),
            ], .done),
        ]),
        Row(name: "a sha512 pin mismatch of a first download deletes the partial file and its record; not retried",
            pins: Pins(digest: pin512), steps: freshDownload + [
            step(.hashed(.success(.init(sha256: other512, sizeOnDisk: 100))), [
                .removePartial, .record(.clearPartial),
                .finish(.failed(.checksumMismatchUnchanged(expected: pin512, actual: other512, served: validators),
                                action: .download, inspectPartial: true)),
            ], .done),
        ]),
        Row(name: "a pinned DEST that cannot be hashed: fail, announced", retries: 0, pins: Pins(digest: pin), steps: begin + [
            step(.inspected(equalDest, record: nil, recordUnreadable: false), [.probe(source: 0)], .probing),
            step(.probed(.available(file)), [.hashDestination], .hashingDestination),
            step(.destinationHashed(.failure(full)), [
                .announce(.decided(.fail(full))), .releaseSlot, .finish(.failed(full, action: .fail(full), inspectPartial: true)),
            ], .done),
        ]),
        Row(name: "a partial file of the recorded version resumes with that record", steps: begin + [
            step(.inspected(halfPartial, record: recordOfPartial, recordUnreadable: false), [.probe(source: 0)], .probing),
            step(.probed(.available(file)), [
                .announce(.decided(.resume(from: 50, source: .partial))),
                download(offset: 50, remote: file, action: .resume(from: 50, source: .partial), startedFrom: validators, hadRecord: true),
            ], .transferring),
        ]),
        Row(name: "a short DEST: its prefix is copied (the record cleared first) and continued", steps: begin + [
            step(.inspected(shortDest, record: recordOfPartial, recordUnreadable: false), [.probe(source: 0)], .probing),
            step(.probed(.available(file)), [
                .announce(.decided(.resume(from: 50, source: .destination))), .prepare(copyLength: 50, clearingRecord: true),
            ], .preparing),
            step(.prepared(nil), [
                download(offset: 50, remote: file, action: .resume(from: 50, source: .destination), hadRecord: true),
            ], .transferring),
        ]),
        Row(name: "a refused preparation fails the attempt", retries: 0, steps: begin + [
            step(.inspected(shortDest, record: nil, recordUnreadable: true), [.probe(source: 0)], .probing),
            step(.probed(.available(file)), [
                .announce(.decided(.resume(from: 50, source: .destination))), .prepare(copyLength: 50, clearingRecord: true),
            ], .preparing),
            step(.prepared(.localConflict("no")), [
                .releaseSlot, .finish(.failed(.localConflict("no"), action: .resume(from: 50, source: .destination), inspectPartial: true)),
            ], .done),
        ]),
        Row(name: "a complete partial file is finished without the network: slot back first", steps: begin + [
            step(.inspected(LocalFacts(destination: .missing, partial: .file(size: 100)), record: recordOfPartial, recordUnreadable: false),
                 [.probe(source: 0)], .probing),
            step(.probed(.available(file)), [
                .announce(.decided(.finish(size: 100))), .releaseSlot, .finishHash(size: 100),
            ], .finishingHash),
            step(.hashed(.success(.init(sha256: pin, sizeOnDisk: 100))), [.commit(validators: validators, sha256: pin)], .committing),
        ]),
        Row(name: "a download over a verified DEST with the same bytes keeps DEST", steps: begin + [
            step(.inspected(equalDest, record: StateRecord(dest: "f", url: "u", complete: CompleteVersion(
                validators: RemoteValidators(etag: "\"old\"", lastModified: nil, size: 100), sha256: pin, local: identity),
                partial: validators), recordUnreadable: false), [.probe(source: 0)], .probing),
            step(.probed(.available(file)), [
                .announce(.decided(.replace(reason: "the remote file changed: ETag changed from \"old\" to \"a\""))), .record(.clearPartial),
                download(remote: file, action: .replace(reason: "the remote file changed: ETag changed from \"old\" to \"a\""), hadRecord: true),
            ], .transferring),
            step(.transferEnded(.written(position: 100, total: 100, bytes: 100, restartedFromZero: false, head: head)),
                 [.releaseSlot, .finishHash(size: 100)], .finishingHash),
            step(.hashed(.success(.init(sha256: pin, sizeOnDisk: 100))), [
                .keepDestination(CompleteVersion(validators: RemoteValidators(etag: "\"old\"", lastModified: nil, size: 100), sha256: pin, local: identity),
                                 validators: validators, sha256: pin),
            ], .keeping),
            step(.kept(identity), [
                .record(.complete(verified)),
                .finish(.succeeded(.skipped, action: .replace(reason: "the remote file changed: ETag changed from \"old\" to \"a\""), size: 100, sha256: pin)),
            ], .done),
        ]),
        Row(name: "DEST changed while the same bytes downloaded (a 200 to the conditional GET): it is replaced after all", steps: begin + [
            step(.inspected(equalDest, record: StateRecord(dest: "f", url: "u", complete: CompleteVersion(
                validators: RemoteValidators(etag: "\"old\"", lastModified: nil, size: 100), sha256: pin, local: identity)),
                recordUnreadable: false),
                 [.conditionalGet(source: 0, ifNoneOf: RemoteValidators(etag: "\"old\"", lastModified: nil, size: 100))], .askingConditionally),
            step(.replied(.available(file)), [
                .announce(.answered(.available(file))),
                .announce(.decided(.replace(reason: "the remote file changed: ETag changed from \"old\" to \"a\""))),
                receive(remote: file, action: .replace(reason: "the remote file changed: ETag changed from \"old\" to \"a\"")),
            ], .transferring),
            step(.transferEnded(.written(position: 100, total: 100, bytes: 100, restartedFromZero: false, head: head)),
                 [.releaseSlot, .finishHash(size: 100)], .finishingHash),
            step(.hashed(.success(.init(sha256: pin, sizeOnDisk: 100))), [
                .keepDestination(CompleteVersion(validators: RemoteValidators(etag: "\"old\"", lastModified: nil, size: 100), sha256: pin, local: identity),
                                 validators: validators, sha256: pin),
            ], .keeping),
            step(.keepRefused, [.commit(validators: validators, sha256: pin)], .committing),
        ]),
        Row(name: "a sha256 pin mismatch of a first download: nothing shows the version moved, so it fails at once",
            pins: Pins(digest: pin), steps: freshDownload + [
            step(.hashed(.success(.init(sha256: other, sizeOnDisk: 100))), [
                .removePartial, .record(.clearPartial),
                .finish(.failed(.checksumMismatchUnchanged(expected: pin, actual: other, served: validators),
                                action: .download, inspectPartial: true)),
            ], .done),
        ]),
        Row(name: "a pin mismatch of a replacement whose reply names the probed version fails at once, falling back to a mirror",
            sources: 2, pins: Pins(digest: pin), steps: begin + [
            step(.inspected(equalDest, record: nil, recordUnreadable: false), [.probe(source: 0)], .probing),
            step(.probed(.available(file)), [.hashDestination], .hashingDestination),
            step(.destinationHashed(.success(other)), [
                .announce(.decided(.replace(reason: "local file does not match its sha256 pin"))),
                download(remote: file, action: .replace(reason: "local file does not match its sha256 pin")),
            ], .transferring),
            step(.transferEnded(.written(position: 100, total: 100, bytes: 100, restartedFromZero: false, head: head)),
                 [.releaseSlot, .finishHash(size: 100)], .finishingHash),
            step(.hashed(.success(.init(sha256: other, sizeOnDisk: 100))), [
                .removePartial, .record(.clearPartial),
                .announce(.fallingBack(source: 1, after: .checksumMismatchUnchanged(expected: pin, actual: other, served: validators))),
                .awaitHost(source: 1),
            ], .waitingForHost),
        ]),
        Row(name: "a pin mismatch whose reply names another version than the probe's is retried: the file moved during the attempt",
            pins: Pins(digest: pin), steps: begin + [
            step(.inspected(equalDest, record: nil, recordUnreadable: false), [.probe(source: 0)], .probing),
            step(.probed(.available(RemoteFile(size: 100, etag: "\"old\"", lastModified: lastModified))), [.hashDestination], .hashingDestination),
            step(.destinationHashed(.success(other)), [
                .announce(.decided(.replace(reason: "local file does not match its sha256 pin"))),
                download(remote: RemoteFile(size: 100, etag: "\"old\"", lastModified: lastModified),
                         action: .replace(reason: "local file does not match its sha256 pin")),
            ], .transferring),
            step(.transferEnded(.written(position: 100, total: 100, bytes: 100, restartedFromZero: false, head: head)),
                 [.releaseSlot, .finishHash(size: 100)], .finishingHash),
            step(.hashed(.success(.init(sha256: other, sizeOnDisk: 100))), [
                .removePartial, .record(.clearPartial),
                .backOff(attempt: 1, failure: .checksumMismatch(expected: pin, actual: other), retryAfter: nil),
            ], .backingOff),
        ]),
        Row(name: "a pin mismatch of a resumed download is retried (from 0); the next one, of the same version, is not",
            pins: Pins(digest: pin), steps: resumedPinMismatch + [
            // No probe for a file with nothing on disk: the reply is compared with the last one.
            step(.inspected(nothing, record: nil, recordUnreadable: false), [.announce(.decided(.download)), download()], .transferring),
            step(.transferEnded(.written(position: 100, total: 100, bytes: 100, restartedFromZero: false, head: head)),
                 [.releaseSlot, .finishHash(size: 100)], .finishingHash),
            step(.hashed(.success(.init(sha256: other, sizeOnDisk: 100))), [
                .removePartial, .record(.clearPartial),
                .finish(.failed(.checksumMismatchUnchanged(expected: pin, actual: other, served: validators),
                                action: .download, inspectPartial: true)),
            ], .done),
        ]),
        Row(name: "a pin mismatch whose reply names another version than the last reply's is retried",
            pins: Pins(digest: pin), steps: resumedPinMismatch + [
            step(.inspected(nothing, record: nil, recordUnreadable: false), [.announce(.decided(.download)), download()], .transferring),
            step(.transferEnded(.written(position: 100, total: 100, bytes: 100, restartedFromZero: false,
                                         head: EntryMachine.ResponseHeadSummary(etag: "\"b\"", lastModified: lastModified))),
                 [.releaseSlot, .finishHash(size: 100)], .finishingHash),
            step(.hashed(.success(.init(sha256: other, sizeOnDisk: 100))), [
                .removePartial, .record(.clearPartial),
                .backOff(attempt: 2, failure: .checksumMismatch(expected: pin, actual: other), retryAfter: nil),
            ], .backingOff),
        ]),
        Row(name: "a size pin mismatch deletes the partial file and its record", pins: Pins(size: 90), steps: begin + [
            step(.inspected(nothing, record: nil, recordUnreadable: false), [.announce(.decided(.download)), download()], .transferring),
            step(.transferEnded(.written(position: 100, total: 100, bytes: 100, restartedFromZero: false, head: head)),
                 [.releaseSlot, .finishHash(size: 100)], .finishingHash),
            step(.hashed(.success(.init(sha256: pin, sizeOnDisk: 100))), [
                .removePartial, .record(.clearPartial), .backOff(attempt: 1, failure: .sizeMismatch(expected: 90, actual: 100), retryAfter: nil),
            ], .backingOff),
        ]),
        Row(name: "a file whose size on disk is not what was written fails, kept", retries: 0, steps: freshDownload + [
            step(.hashed(.success(.init(sha256: pin, sizeOnDisk: 99))), [
                .finish(.failed(.sizeMismatch(expected: 100, actual: 99), action: .download, inspectPartial: true)),
            ], .done),
        ]),
        Row(name: "a full disk while hashing gives the space back", retries: 0, steps: freshDownload + [
            step(.hashed(.failure(full)), [
                .removePartial, .record(.clearPartial), .finish(.failed(full, action: .download, inspectPartial: true)),
            ], .done),
        ]),
        Row(name: "a full disk at the commit gives the space back", retries: 0, steps: freshDownload + [
            step(.hashed(.success(.init(sha256: pin, sizeOnDisk: 100))), [.commit(validators: validators, sha256: pin)], .committing),
            step(.committed(.failure(full)), [
                .removePartial, .record(.clearPartial), .finish(.failed(full, action: .download, inspectPartial: true)),
            ], .done),
        ]),
        Row(name: "a body shorter than its length is kept for a resume and retried", steps: begin + [
            step(.inspected(nothing, record: nil, recordUnreadable: false), [.announce(.decided(.download)), download()], .transferring),
            step(.transferEnded(.written(position: 60, total: 100, bytes: 60, restartedFromZero: false, head: head)), [
                .releaseSlot, .backOff(attempt: 1, failure: .partialBody(received: 60, expected: 100), retryAfter: nil),
            ], .backingOff),
            step(.backOffEnded(cancelled: false), [.awaitHost(source: 0)], .waitingForHost),
        ]),
        Row(name: "a body longer than its length is deleted", retries: 0, steps: begin + [
            step(.inspected(nothing, record: nil, recordUnreadable: false), [.announce(.decided(.download)), download()], .transferring),
            step(.transferEnded(.written(position: 120, total: 100, bytes: 120, restartedFromZero: false, head: head)), [
                .removePartial, .record(.clearPartial), .releaseSlot,
                .finish(.failed(.sizeMismatch(expected: 100, actual: 120), action: .download, inspectPartial: true)),
            ], .done),
        ]),
        Row(name: "a first download that ended with the connection and no length is measured by a probe", retries: 0, steps: begin + [
            step(.inspected(nothing, record: nil, recordUnreadable: false), [.announce(.decided(.download)), download()], .transferring),
            step(.transferEnded(.written(position: 60, total: nil, bytes: 60, restartedFromZero: false, head: head)),
                 [.measureBody(source: 0)], .measuringBody),
            step(.bodyMeasured(.available(file)), [
                .releaseSlot, .finish(.failed(.partialBody(received: 60, expected: 100), action: .download, inspectPartial: true)),
            ], .done),
        ]),
        Row(name: "a chunked body that ended is complete without a probe", steps: begin + [
            step(.inspected(nothing, record: nil, recordUnreadable: false), [.announce(.decided(.download)), download()], .transferring),
            step(.transferEnded(.written(position: 60, total: nil, bytes: 60, restartedFromZero: false,
                                         head: .init(etag: "\"a\"", isChunked: true))),
                 [.releaseSlot, .finishHash(size: 60)], .finishingHash),
        ]),
        Row(name: "a resume answered with the whole file becomes a restart", steps: begin + [
            step(.inspected(halfPartial, record: recordOfPartial, recordUnreadable: false), [.probe(source: 0)], .probing),
            step(.probed(.available(file)), [
                .announce(.decided(.resume(from: 50, source: .partial))),
                download(offset: 50, remote: file, action: .resume(from: 50, source: .partial), startedFrom: validators, hadRecord: true),
            ], .transferring),
            step(.transferEnded(.written(position: 100, total: 100, bytes: 100, restartedFromZero: true, head: head)),
                 [.releaseSlot, .finishHash(size: 100)], .finishingHash),
            step(.hashed(.success(.init(sha256: pin, sizeOnDisk: 100))), [.commit(validators: validators, sha256: pin)], .committing),
            step(.committed(.success(identity)), [
                .finish(.succeeded(.transferred, action: .restart(reason: "the server answered the range request with the whole file"),
                                   size: 100, sha256: pin)),
            ], .done),
        ]),
        Row(name: "an overlap mismatch deletes the partial file; the next attempt restarts, never resumes", steps: begin + [
            step(.inspected(halfPartial, record: nil, recordUnreadable: false), [.probe(source: 0)], .probing),
            step(.probed(.available(file)), [
                .announce(.decided(.resume(from: 50, source: .partial))),
                download(offset: 50, remote: file, action: .resume(from: 50, source: .partial)),
            ], .transferring),
            step(.transferEnded(.failed(.rangeMismatch("differs"), bytes: 0)), [
                .removePartial, .record(.clearPartial), .releaseSlot, .backOff(attempt: 1, failure: .rangeMismatch("differs"), retryAfter: nil),
            ], .backingOff),
            step(.backOffEnded(cancelled: false), [.awaitHost(source: 0)], .waitingForHost),
            step(.hostReady, [.acquireSlot], .waitingForSlot),
            step(.slotGranted(hostTroubled: false), [.inspect], .inspecting),
            // Even if a partial file were found again, it would not be resumed.
            step(.inspected(halfPartial, record: nil, recordUnreadable: false), [.probe(source: 0)], .probing),
            step(.probed(.available(file)), [
                .announce(.decided(.restart(reason: "unusable reply to a range request: differs"))),
                download(remote: file, action: .restart(reason: "unusable reply to a range request: differs")),
            ], .transferring),
        ]),
        Row(name: "a partial file that shrank before the request: the next attempt restarts", retries: 1, steps: begin + [
            step(.inspected(halfPartial, record: recordOfPartial, recordUnreadable: false), [.probe(source: 0)], .probing),
            step(.probed(.available(file)), [
                .announce(.decided(.resume(from: 50, source: .partial))),
                download(offset: 50, remote: file, action: .resume(from: 50, source: .partial), startedFrom: validators, hadRecord: true),
            ], .transferring),
            step(.transferEnded(.notStarted(.rangeMismatch("shrank"), mustRestart: true)), [
                .releaseSlot, .backOff(attempt: 1, failure: .rangeMismatch("shrank"), retryAfter: nil),
            ], .backingOff),
        ]),
        Row(name: "a body past max_size or the size pin is deleted", retries: 0, steps: begin + [
            step(.inspected(nothing, record: nil, recordUnreadable: false), [.announce(.decided(.download)), download()], .transferring),
            step(.transferEnded(.failed(.bodyTooLarge(limit: 10), bytes: 10)), [
                .removePartial, .record(.clearPartial), .releaseSlot, .finish(.failed(.bodyTooLarge(limit: 10), action: .download, inspectPartial: true)),
            ], .done),
        ]),
        Row(name: "a full disk during the transfer gives the space back", retries: 0, steps: begin + [
            step(.inspected(nothing, record: nil, recordUnreadable: false), [.announce(.decided(.download)), download()], .transferring),
            step(.transferEnded(.failed(full, bytes: 10)), [
                .removePartial, .record(.clearPartial), .releaseSlot, .finish(.failed(full, action: .download, inspectPartial: true)),
            ], .done),
        ]),
        Row(name: "no response: an empty partial file goes", retries: 0, steps: begin + [
            step(.inspected(nothing, record: nil, recordUnreadable: false), [.announce(.decided(.download)), download()], .transferring),
            step(.transferEnded(.noResponse(bytes: 0)), [
                .removePartialIfEmpty, .releaseSlot,
                .finish(.failed(.curl(code: 0, message: "the server sent no response", osErrno: 0), action: .download, inspectPartial: true)),
            ], .done),
        ]),
        Row(name: "a refused reply keeps the partial file; a 404 is not retried", steps: begin + [
            step(.inspected(nothing, record: nil, recordUnreadable: false), [.announce(.decided(.download)), download()], .transferring),
            step(.transferEnded(.rejected(notFound, bytes: 0)), [
                .releaseSlot, .finish(.failed(notFound, action: .download, inspectPartial: true)),
            ], .done),
        ]),
        Row(name: "a 503 with Retry-After pauses the host before the slot goes, and sets the back-off", steps: begin + [
            step(.inspected(nothing, record: nil, recordUnreadable: false), [.announce(.decided(.download)), download()], .transferring),
            step(.transferEnded(.failed(unavailable503, bytes: 0)), [
                .removePartialIfEmpty, .pauseHost(source: 0, retryAfter: "5"), .releaseSlot,
                .backOff(attempt: 1, failure: unavailable503, retryAfter: "5"),
            ], .backingOff),
            step(.backOffEnded(cancelled: true), [.finish(.failed(.cancelled, action: .download, inspectPartial: true))], .done),
        ]),
        Row(name: "retries run out on a source, then the next source is tried", sources: 2, retries: 1, steps: begin + [
            step(.inspected(nothing, record: nil, recordUnreadable: false), [.announce(.decided(.download)), download()], .transferring),
            step(.transferEnded(.failed(.httpStatus(500), bytes: 0)), [
                .removePartialIfEmpty, .releaseSlot, .backOff(attempt: 1, failure: .httpStatus(500), retryAfter: nil),
            ], .backingOff),
            step(.backOffEnded(cancelled: false), [.awaitHost(source: 0)], .waitingForHost),
            step(.hostReady, [.acquireSlot], .waitingForSlot),
            step(.slotGranted(hostTroubled: false), [.inspect], .inspecting),
            step(.inspected(nothing, record: nil, recordUnreadable: false), [.announce(.decided(.download)), download()], .transferring),
            step(.transferEnded(.failed(.httpStatus(500), bytes: 0)), [
                .removePartialIfEmpty, .releaseSlot, .announce(.fallingBack(source: 1, after: .httpStatus(500))), .awaitHost(source: 1),
            ], .waitingForHost),
            step(.hostReady, [.acquireSlot], .waitingForSlot),
            step(.slotGranted(hostTroubled: false), [.inspect], .inspecting),
            step(.inspected(nothing, record: nil, recordUnreadable: false), [.announce(.decided(.download)), download(source: 1)], .transferring),
        ]),
        Row(name: "local trouble is not taken to the next source", sources: 2, steps: begin + [
            step(.inspectionFailed(.localConflict("a symlink")), [
                .releaseSlot, .finish(.failed(.localConflict("a symlink"), action: .fail(.localConflict("a symlink")), inspectPartial: true)),
            ], .done),
        ]),
        Row(name: "a network failure asks the gate; an outage that ends is forgiven and retried at once", steps: begin + [
            step(.inspected(nothing, record: nil, recordUnreadable: false), [.announce(.decided(.download)), download()], .transferring),
            step(.transferEnded(.failed(timeout, bytes: 0)), [.removePartialIfEmpty, .releaseSlot, .checkConnectivity(source: 0)],
                 .checkingConnectivity),
            step(.connectivityChecked(.cameBack), [.awaitHost(source: 0)], .waitingForHost),
        ]),
        Row(name: "a network failure with the network up counts as a retry", steps: begin + [
            step(.inspected(nothing, record: nil, recordUnreadable: false), [.announce(.decided(.download)), download()], .transferring),
            step(.transferEnded(.failed(timeout, bytes: 0)), [.removePartialIfEmpty, .releaseSlot, .checkConnectivity(source: 0)],
                 .checkingConnectivity),
            step(.connectivityChecked(.reachable), [.backOff(attempt: 1, failure: timeout, retryAfter: nil)], .backingOff),
        ]),
        Row(name: "an outage that outlasts its wait fails the entry as unreachable", sources: 2, steps: begin + [
            step(.inspected(nothing, record: nil, recordUnreadable: false), [.announce(.decided(.download)), download()], .transferring),
            step(.transferEnded(.failed(timeout, bytes: 0)), [.removePartialIfEmpty, .releaseSlot, .checkConnectivity(source: 0)],
                 .checkingConnectivity),
            step(.connectivityChecked(.gaveUp(.unreachable(host: "h", waited: .seconds(1)))), [
                .announce(.fallingBack(source: 1, after: .unreachable(host: "h", waited: .seconds(1)))), .awaitHost(source: 1),
            ], .waitingForHost),
            step(.hostUnavailable(.unreachable(host: "m", waited: .seconds(1))), [
                .finish(.failed(.unreachable(host: "m", waited: .seconds(1)), action: .download, inspectPartial: true)),
            ], .done),
        ]),
        Row(name: "a refused connection is not an outage: no gate, a retry", steps: begin + [
            step(.inspected(nothing, record: nil, recordUnreadable: false), [.announce(.decided(.download)), download()], .transferring),
            step(.transferEnded(.failed(refused, bytes: 0)), [
                .removePartialIfEmpty, .releaseSlot, .backOff(attempt: 1, failure: refused, retryAfter: nil),
            ], .backingOff),
        ]),
        Row(name: "a pause begun while waiting for a slot: the slot goes back and the host is waited for", steps: [
            step(.start(cancelled: false), [.awaitHost(source: 0)], .waitingForHost),
            step(.hostReady, [.acquireSlot], .waitingForSlot),
            step(.slotGranted(hostTroubled: true), [.releaseSlot, .awaitHost(source: 0)], .waitingForHost),
        ]),
        Row(name: "interrupted while waiting for a slot: cancelled, nothing inspected", steps: [
            step(.start(cancelled: false), [.awaitHost(source: 0)], .waitingForHost),
            step(.hostReady, [.acquireSlot], .waitingForSlot),
            step(.slotDenied, [.finish(.failed(.cancelled, action: .download, inspectPartial: false))], .done),
        ]),
        Row(name: "a transfer cancelled: no retry, no other source", sources: 2, steps: begin + [
            step(.inspected(nothing, record: nil, recordUnreadable: false), [.announce(.decided(.download)), download()], .transferring),
            step(.transferEnded(.failed(.cancelled, bytes: 5)), [
                .removePartialIfEmpty, .releaseSlot, .finish(.failed(.cancelled, action: .download, inspectPartial: true)),
            ], .done),
        ]),
        Row(name: "a probe that fails decides fail; a 404 ends the entry", steps: begin + [
            step(.inspected(halfPartial, record: nil, recordUnreadable: false), [.probe(source: 0)], .probing),
            step(.probed(.unavailable(notFound)), [
                .announce(.decided(.fail(notFound))), .releaseSlot, .finish(.failed(notFound, action: .fail(notFound), inspectPartial: true)),
            ], .done),
        ]),
        Row(name: "a server already complete at the resume point (416) is committed", steps: begin + [
            step(.inspected(halfPartial, record: recordOfPartial, recordUnreadable: false), [.probe(source: 0)], .probing),
            step(.probed(.available(file)), [
                .announce(.decided(.resume(from: 50, source: .partial))),
                download(offset: 50, remote: file, action: .resume(from: 50, source: .partial), startedFrom: validators, hadRecord: true),
            ], .transferring),
            step(.transferEnded(.alreadyComplete(total: 50, head: head)), [.releaseSlot, .finishHash(size: 50)], .finishingHash),
        ]),
        Row(name: "plan: nothing on disk is still probed, for the size the plan shows", mode: .plan, steps: [
            step(.start(cancelled: false), [.acquireSlot], .waitingForSlot),
            step(.slotGranted(hostTroubled: false), [.inspect], .inspecting),
            step(.inspected(nothing, record: nil, recordUnreadable: false), [.probe(source: 0)], .probing),
            step(.probed(.available(file)), [
                .announce(.decided(.download)), .releaseSlot, .finish(.planned(.download, localSize: nil, remoteSize: 100)),
            ], .done),
        ]),
        Row(name: "plan: a source that fails is followed by the next, as sync would, with no retry", mode: .plan, sources: 2, retries: 3, steps: [
            step(.start(cancelled: false), [.acquireSlot], .waitingForSlot),
            step(.slotGranted(hostTroubled: false), [.inspect], .inspecting),
            step(.inspected(nothing, record: nil, recordUnreadable: false), [.probe(source: 0)], .probing),
            step(.probed(.unavailable(notFound)), [
                .releaseSlot, .announce(.fallingBack(source: 1, after: notFound)), .awaitHost(source: 1),
            ], .waitingForHost),
            step(.hostReady, [.acquireSlot], .waitingForSlot),
            step(.slotGranted(hostTroubled: false), [.inspect], .inspecting),
            step(.inspected(nothing, record: nil, recordUnreadable: false), [.probe(source: 1)], .probing),
            step(.probed(.unavailable(notFound)), [
                .announce(.decided(.fail(notFound))), .releaseSlot, .finish(.planned(.fail(notFound), localSize: nil, remoteSize: nil)),
            ], .done),
        ]),
        Row(name: "plan: a partial file is shown as a resume and nothing is touched", mode: .plan, steps: [
            step(.start(cancelled: false), [.acquireSlot], .waitingForSlot),
            step(.slotGranted(hostTroubled: false), [.inspect], .inspecting),
            step(.inspected(halfPartial, record: recordOfPartial, recordUnreadable: false), [.probe(source: 0)], .probing),
            step(.probed(.available(file)), [
                .announce(.decided(.resume(from: 50, source: .partial))), .releaseSlot,
                .finish(.planned(.resume(from: 50, source: .partial), localSize: 50, remoteSize: 100)),
            ], .done),
        ]),
        Row(name: "plan: a first sight of DEST is shown as skip without hashing or recording it", mode: .plan, steps: [
            step(.start(cancelled: false), [.acquireSlot], .waitingForSlot),
            step(.slotGranted(hostTroubled: false), [.inspect], .inspecting),
            step(.inspected(equalDest, record: nil, recordUnreadable: false), [.probe(source: 0)], .probing),
            step(.probed(.available(file)), [
                .announce(.decided(.skip)), .releaseSlot, .finish(.planned(.skip, localSize: 100, remoteSize: 100)),
            ], .done),
        ]),
        Row(name: "plan: pinned and verified needs no request", mode: .plan, pins: Pins(digest: pin), steps: [
            step(.start(cancelled: false), [.acquireSlot], .waitingForSlot),
            step(.slotGranted(hostTroubled: false), [.inspect], .inspecting),
            step(.inspected(equalDest, record: recordOfDest, recordUnreadable: false), [
                .announce(.decided(.skip)), .releaseSlot, .finish(.planned(.skip, localSize: 100, remoteSize: 100)),
            ], .done),
        ]),
        Row(name: "plan: an unreadable destination is a fail row, not retried", mode: .plan, steps: [
            step(.start(cancelled: false), [.acquireSlot], .waitingForSlot),
            step(.slotGranted(hostTroubled: false), [.inspect], .inspecting),
            step(.inspectionFailed(.localConflict("a symlink")), [
                .releaseSlot, .finish(.planned(.fail(.localConflict("a symlink")), localSize: nil, remoteSize: nil)),
            ], .done),
        ]),
        Row(name: "plan: a pinned DEST that cannot be hashed is a fail row", mode: .plan, pins: Pins(digest: pin), steps: [
            step(.start(cancelled: false), [.acquireSlot], .waitingForSlot),
            step(.slotGranted(hostTroubled: false), [.inspect], .inspecting),
            step(.inspected(equalDest, record: nil, recordUnreadable: false), [.probe(source: 0)], .probing),
            step(.probed(.available(file)), [.hashDestination], .hashingDestination),
            step(.destinationHashed(.failure(full)), [
                .announce(.decided(.fail(full))), .releaseSlot, .finish(.planned(.fail(full), localSize: 100, remoteSize: 100)),
            ], .done),
        ]),
        Row(name: "once the run is interrupted, a failure ends the entry as cancelled: no other source, no notice", sources: 2, steps: begin + [
            step(.inspected(nothing, record: nil, recordUnreadable: false), [.announce(.decided(.download)), download()], .transferring),
            step(.runCancelled, [], .transferring),
            step(.transferEnded(.failed(.httpStatus(500), bytes: 0)), [
                .removePartialIfEmpty, .releaseSlot, .finish(.failed(.cancelled, action: .download, inspectPartial: true)),
            ], .done),
        ]),
        Row(name: "an outage given up after the interruption is reported as cancelled, not unreachable", sources: 2, steps: [
            step(.start(cancelled: false), [.awaitHost(source: 0)], .waitingForHost),
            step(.runCancelled, [], .waitingForHost),
            step(.hostUnavailable(.unreachable(host: "h", waited: .seconds(1))), [
                .finish(.failed(.cancelled, action: .download, inspectPartial: false)),
            ], .done),
        ]),
        Row(name: "a resume answered with the whole file that then fails is reported as a restart", retries: 0, steps: begin + [
            step(.inspected(halfPartial, record: recordOfPartial, recordUnreadable: false), [.probe(source: 0)], .probing),
            step(.probed(.available(file)), [
                .announce(.decided(.resume(from: 50, source: .partial))),
                download(offset: 50, remote: file, action: .resume(from: 50, source: .partial), startedFrom: validators, hadRecord: true),
            ], .transferring),
            step(.transferEnded(.failed(timeout, bytes: 20, restartedFromZero: true)), [
                .removePartialIfEmpty, .releaseSlot, .checkConnectivity(source: 0),
            ], .checkingConnectivity),
            step(.connectivityChecked(.reachable), [
                .finish(.failed(timeout, action: EntryMachine.wholeFileRestart, inspectPartial: true)),
            ], .done),
        ]),
        Row(name: "plan: interrupted while waiting for a slot, the entry is a fail row (never a sync report)", mode: .plan, steps: [
            step(.start(cancelled: false), [.acquireSlot], .waitingForSlot),
            step(.slotDenied, [.finish(.planned(.fail(.cancelled), localSize: nil, remoteSize: nil))], .done),
        ]),
        Row(name: "plan: interrupted before it began, the entry is a fail row", mode: .plan, steps: [
            step(.start(cancelled: true), [.finish(.planned(.fail(.cancelled), localSize: nil, remoteSize: nil))], .done),
        ]),
        Row(name: "an event a phase does not expect fails the entry and frees the slot", steps: begin + [
            step(.backOffEnded(cancelled: false), [
                .releaseSlot, .finish(.failed(.localConflict("internal error: backOffEnded(cancelled: false) while inspecting"),
                                               action: .download, inspectPartial: true)),
            ], .done),
        ]),
    ]

    /// The conditional GET: one request where the store vouches for DEST, judged from its head
    /// by the planner as the probe's answer would have been.
    static let conditionalRows: [Row] = [
        Row(name: "conditional GET answered 304: the recorded facts, a skip; the body (none) is abandoned", steps: askConditionally + [
            step(.replied(.available(file)), [
                .announce(.answered(.available(file))), .announce(.decided(.skip)), .abandonBody,
            ], .abandoningReply),
            step(.transferEnded(.abandoned), [
                .releaseSlot, .finish(.succeeded(.skipped, action: .skip, size: 100, sha256: pin)),
            ], .done),
        ]),
        Row(name: "conditional GET answered 200 with the recorded ETag sent weak: a skip, the body stopped", steps: askConditionally + [
            step(.replied(.available(RemoteFile(size: 100, etag: "W/\"a\"", lastModified: lastModified))), [
                .announce(.answered(.available(RemoteFile(size: 100, etag: "W/\"a\"", lastModified: lastModified)))),
                .announce(.decided(.skip)), .abandonBody,
            ], .abandoningReply),
            step(.transferEnded(.abandoned), [
                .releaseSlot, .finish(.succeeded(.skipped, action: .skip, size: 100, sha256: pin)),
            ], .done),
        ]),
        Row(name: "a skip judged from the head stands when the run is interrupted before the request ends", steps: askConditionally + [
            step(.replied(.available(file)), [
                .announce(.answered(.available(file))), .announce(.decided(.skip)), .abandonBody,
            ], .abandoningReply),
            step(.runCancelled, [], .abandoningReply),
            step(.transferEnded(.failed(.cancelled, bytes: 0)), [
                .releaseSlot, .finish(.succeeded(.skipped, action: .skip, size: 100, sha256: pin)),
            ], .done),
        ]),
        Row(name: "conditional GET answered 200 with another ETag: replace, its body written from 0 and committed", steps: askConditionally + [
            step(.replied(.available(changed)), [
                .announce(.answered(.available(changed))), .announce(.decided(changedReplace)),
                receive(remote: changed, action: changedReplace),
            ], .transferring),
            step(.transferEnded(.written(position: 100, total: 100, bytes: 100, restartedFromZero: false,
                                         head: .init(etag: changed.etag, lastModified: changed.lastModified))),
                 [.releaseSlot, .finishHash(size: 100)], .finishingHash),
            step(.hashed(.success(.init(sha256: other, sizeOnDisk: 100))),
                 [.commit(validators: RemoteValidators(changed), sha256: other)], .committing),
            step(.committed(.success(identity)), [
                .finish(.succeeded(.transferred, action: changedReplace, size: 100, sha256: other)),
            ], .done),
        ]),
        Row(name: "conditional GET answered 200 with no length: a body that ends with its connection is measured, as after no probe",
            steps: askConditionally + [
            step(.replied(.available(RemoteFile(size: nil, etag: "\"b\""))), [
                .announce(.answered(.available(RemoteFile(size: nil, etag: "\"b\"")))),
                .announce(.decided(.replace(reason: "the remote file changed: ETag changed from \"a\" to \"b\""))),
                receive(remote: nil, action: .replace(reason: "the remote file changed: ETag changed from \"a\" to \"b\"")),
            ], .transferring),
            step(.transferEnded(.written(position: 60, total: nil, bytes: 60, restartedFromZero: false, head: .init(etag: "\"b\""))),
                 [.measureBody(source: 0)], .measuringBody),
            step(.bodyMeasured(.available(RemoteFile(size: 100, etag: "\"b\""))), [
                .releaseSlot, .backOff(attempt: 1, failure: .partialBody(received: 60, expected: 100), retryAfter: nil),
            ], .backingOff),
        ]),
        Row(name: "conditional GET answered 200 against the size pin: a failure, nothing written, not retried", retries: 2,
            pins: Pins(size: 100), steps: askConditionally + [
            step(.replied(.available(RemoteFile(size: 150, etag: "\"b\""))), [
                .announce(.answered(.available(RemoteFile(size: 150, etag: "\"b\"")))),
                .announce(.decided(.fail(.sizePinConflict(pinned: 100, remote: 150)))), .abandonBody,
            ], .abandoningReply),
            step(.transferEnded(.abandoned), [
                .releaseSlot,
                .finish(.failed(.sizePinConflict(pinned: 100, remote: 150), action: .fail(.sizePinConflict(pinned: 100, remote: 150)),
                                inspectPartial: true)),
            ], .done),
        ]),
        Row(name: "conditional GET answered 503 with Retry-After: the host paused, retried as a conditional GET", retries: 1,
            steps: askConditionally + [
            step(.replied(.unavailable(unavailable503)), [
                .announce(.answered(.unavailable(unavailable503))), .announce(.decided(.fail(unavailable503))), .abandonBody,
            ], .abandoningReply),
            step(.transferEnded(.abandoned), [
                .pauseHost(source: 0, retryAfter: "5"), .releaseSlot, .backOff(attempt: 1, failure: unavailable503, retryAfter: "5"),
            ], .backingOff),
            step(.backOffEnded(cancelled: false), [.awaitHost(source: 0)], .waitingForHost),
            step(.hostReady, [.acquireSlot], .waitingForSlot),
            step(.slotGranted(hostTroubled: false), [.inspect], .inspecting),
            step(.inspected(equalDest, record: recordOfDest, recordUnreadable: false),
                 [.conditionalGet(source: 0, ifNoneOf: validators)], .askingConditionally),
        ]),
        Row(name: "conditional GET refused: fails as the probe would have, retried", retries: 1,
            steps: askConditionally + [
            step(.transferEnded(.failed(refused, bytes: 0)), [
                .announce(.answered(.unavailable(refused))), .announce(.decided(.fail(refused))), .releaseSlot,
                .backOff(attempt: 1, failure: refused, retryAfter: nil),
            ], .backingOff),
        ]),
        Row(name: "conditional GET timed out: the network is checked, as after a probe", retries: 1,
            steps: askConditionally + [
            step(.transferEnded(.failed(timeout, bytes: 0)), [
                .announce(.answered(.unavailable(timeout))), .announce(.decided(.fail(timeout))), .releaseSlot,
                .checkConnectivity(source: 0),
            ], .checkingConnectivity),
            step(.connectivityChecked(.reachable), [.backOff(attempt: 1, failure: timeout, retryAfter: nil)], .backingOff),
        ]),
        Row(name: "conditional GET that ends with no response at all: a failure, given up after no retries", retries: 0,
            steps: askConditionally + [
            step(.transferEnded(.noResponse(bytes: 0)), [
                .announce(.answered(.unavailable(EntryMachine.noResponse))), .announce(.decided(.fail(EntryMachine.noResponse))),
                .releaseSlot, .finish(.failed(EntryMachine.noResponse, action: .fail(EntryMachine.noResponse), inspectPartial: true)),
            ], .done),
        ]),
        Row(name: "conditional GET interrupted before it was sent: cancelled, never retried", steps: askConditionally + [
            step(.runCancelled, [], .askingConditionally),
            step(.transferEnded(.notStarted(.cancelled, mustRestart: false)), [
                .announce(.answered(.unavailable(.cancelled))), .announce(.decided(.fail(.cancelled))), .releaseSlot,
                .finish(.failed(.cancelled, action: .fail(.cancelled), inspectPartial: true)),
            ], .done),
        ]),
        Row(name: "a verified DEST whose record names no version (no ETag, no Last-Modified) keeps the probe", steps: begin + [
            step(.inspected(equalDest, record: StateRecord(dest: "f", url: "u", complete: CompleteVersion(
                validators: RemoteValidators(etag: nil, lastModified: nil, size: 100), sha256: pin, local: identity)),
                recordUnreadable: false), [.probe(source: 0)], .probing),
        ]),
        Row(name: "a record that names its version by Last-Modified alone keeps the probe (a 304 to If-Modified-Since means only not newer)",
            steps: begin + [
            step(.inspected(equalDest, record: StateRecord(dest: "f", url: "u", complete: CompleteVersion(
                validators: RemoteValidators(etag: nil, lastModified: lastModified, size: 100), sha256: pin, local: identity)),
                recordUnreadable: false), [.probe(source: 0)], .probing),
        ]),
        Row(name: "a recorded ETag that is not one entity-tag (*, a list, unquoted) keeps the probe", steps: begin + [
            step(.inspected(equalDest, record: StateRecord(dest: "f", url: "u", complete: CompleteVersion(
                validators: RemoteValidators(etag: "*", lastModified: lastModified, size: 100), sha256: pin, local: identity)),
                recordUnreadable: false), [.probe(source: 0)], .probing),
        ]),
        Row(name: "a size pin the recorded size contradicts keeps the probe (a 304 says no size)", pins: Pins(size: 99), steps: begin + [
            step(.inspected(equalDest, record: recordOfDest, recordUnreadable: false), [.probe(source: 0)], .probing),
        ]),
        Row(name: "a 304 naming another version proves nothing: once the request ends, a probe asks, and decides as plan would",
            steps: askConditionally + [
            step(.repliedInconclusively, [.abandonBody], .abandoningReply),
            step(.transferEnded(.abandoned), [.probe(source: 0)], .probing),
            step(.probed(.available(changed)), [.announce(.decided(changedReplace)), download(remote: changed, action: changedReplace)],
                 .transferring),
        ]),
        Row(name: "a verified DEST with a record of a partial download keeps the probe", steps: begin + [
            step(.inspected(equalDest, record: StateRecord(dest: "f", url: "u", complete: verified, partial: validators),
                            recordUnreadable: false), [.probe(source: 0)], .probing),
        ]),
        Row(name: "a verified DEST beside a partial file keeps the probe", steps: begin + [
            step(.inspected(LocalFacts(destination: .file(size: 100), partial: .file(size: 10), destinationIdentity: identity),
                            record: recordOfDest, recordUnreadable: false), [.probe(source: 0)], .probing),
        ]),
        Row(name: "a digest pin decides, not the server's validators: a verified DEST that fails it keeps the probe",
            pins: Pins(digest: other), steps: begin + [
            step(.inspected(equalDest, record: recordOfDest, recordUnreadable: false), [.probe(source: 0)], .probing),
        ]),
        Row(name: "an ftp main URL keeps the probe; its http mirror is asked conditionally", sources: 2, retries: 0, conditional: [1],
            steps: begin + [
            step(.inspected(equalDest, record: recordOfDest, recordUnreadable: false), [.probe(source: 0)], .probing),
            step(.probed(.unavailable(notFound)), [
                .announce(.decided(.fail(notFound))), .releaseSlot, .announce(.fallingBack(source: 1, after: notFound)),
                .awaitHost(source: 1),
            ], .waitingForHost),
            step(.hostReady, [.acquireSlot], .waitingForSlot),
            step(.slotGranted(hostTroubled: false), [.inspect], .inspecting),
            step(.inspected(equalDest, record: recordOfDest, recordUnreadable: false),
                 [.conditionalGet(source: 1, ifNoneOf: validators)], .askingConditionally),
        ]),
        Row(name: "plan keeps its HEAD for a DEST the store vouches for", mode: .plan, steps: [
            step(.start(cancelled: false), [.acquireSlot], .waitingForSlot),
            step(.slotGranted(hostTroubled: false), [.inspect], .inspecting),
            step(.inspected(equalDest, record: recordOfDest, recordUnreadable: false), [.probe(source: 0)], .probing),
        ]),
    ]

    @Test(arguments: rows)
    func transitions(_ row: Row) {
        var machine = row.machine
        for (index, step) in row.steps.enumerated() {
            let effects = machine.handle(step.event)
            #expect(effects == step.effects, "step \(index + 1): \(step.event)")
            #expect(machine.phase == step.phase, "step \(index + 1): \(step.event)")
            if effects != step.effects || machine.phase != step.phase { return }
        }
    }

    /// The slot is given back exactly once per grant, on every path in the table.
    @Test(arguments: rows)
    func theSlotIsGivenBackOncePerGrant(_ row: Row) {
        var machine = row.machine
        var held = 0
        for step in row.steps {
            if case .slotGranted = step.event { held += 1 }
            for effect in machine.handle(step.event) where effect == .releaseSlot {
                held -= 1
                #expect(held == 0, "a slot given back that was not held")
            }
            #expect(held == (machine.holdsTransferSlot ? 1 : 0))
        }
        if machine.phase == .done { #expect(held == 0) }
    }

    /// Each phase the machine leaves on some event appears in the table with each event it
    /// takes there.
    @Test func everyHandledTransitionIsInTheTable() {
        var seen = Set<String>()
        for row in Self.rows {
            var machine = row.machine
            for step in row.steps {
                seen.insert("\(machine.phase) \(Self.name(of: step.event))")
                _ = machine.handle(step.event)
            }
        }
        let handled = [
            "idle start", "waitingForHost hostReady", "waitingForHost hostUnavailable", "waitingForSlot slotGranted",
            "waitingForSlot slotDenied", "inspecting inspected", "inspecting inspectionFailed", "probing probed",
            "hashingDestination destinationHashed", "hashingForRecord destinationHashed", "preparing prepared",
            "transferring transferEnded", "measuringBody bodyMeasured", "finishingHash hashed", "keeping kept",
            "keeping keepRefused", "committing committed", "checkingConnectivity connectivityChecked", "backingOff backOffEnded",
            "askingConditionally replied", "askingConditionally transferEnded", "abandoningReply transferEnded",
            "transferring download", "placing placed", "fillingCache cacheFilled", "lockingBlob blobLocked", "quarantining quarantined",
        ]
        for transition in handled {
            #expect(seen.contains(transition), "no row covers \(transition)")
        }
    }

    /// Where the download is (one transfer's `DownloadMachine`), and how its end is taken.
    static let around = DownloadMachine.Surroundings(url: "http://127.0.0.1/f", partialPath: "f.part")
    static let downloadRows: [Row] = [
        Row(name: "the download's events go to its own machine; its end is the entry's", steps: begin + [
            step(.inspected(nothing, record: nil, recordUnreadable: false), [.announce(.decided(.download)), download()], .transferring),
            step(.download(.begin(around)),
                 [.download(.get(DownloadMachine.Get(offset: 0, truncate: false, overlap: 0, ifRange: nil, startedFrom: nil, lead: false,
                                                     opensPartial: true)))],
                 .transferring),
            step(.download(.streamEnded(DownloadMachine.StreamFacts(head: head, placement: .write(from: 0, total: 100), position: 100, bytes: 100))),
                 [.releaseSlot, .finishHash(size: 100)], .finishingHash),
        ]),
        Row(name: "a download that cannot open its partial file fails the attempt", retries: 0, steps: begin + [
            step(.inspected(nothing, record: nil, recordUnreadable: false), [.announce(.decided(.download)), download()], .transferring),
            step(.download(.begin(around)),
                 [.download(.get(DownloadMachine.Get(offset: 0, truncate: false, overlap: 0, ifRange: nil, startedFrom: nil, lead: false,
                                                     opensPartial: true)))],
                 .transferring),
            // A disk too full to make it: any partial file goes, to give back its space.
            step(.download(.streamEnded(DownloadMachine.StreamFacts(refused: full, transport: .cancelled, reportedTransport: .cancelled))),
                 [.removePartial, .record(.clearPartial), .releaseSlot, .finish(.failed(full, action: .download, inspectPartial: true))],
                 .done),
        ]),
        Row(name: "a download's event while nothing downloads is a driver bug", retries: 0, steps: begin + [
            step(.download(.opened(size: 0)), [
                .releaseSlot,
                .finish(.failed(.localConflict("internal error: download(MirrorCore.DownloadMachine.Event.opened(size: 0)) while inspecting"),
                                action: .download, inspectPartial: true)),
            ], .done),
        ]),
    ]

    /// A change of version met in segments spends the entry's one restart for it: the next
    /// attempt's download may not start over again.
    @Test func aChangeOfVersionInSegmentsIsRestartedOnce() {
        let changed = TransferFailure.rangeMismatch("the file changed on the server during a segmented download (412)")
        let version = SegmentVersion(url: "http://127.0.0.1/f", total: 64 << 20, etag: "\"a\"", lastModified: nil)
        // A download from 0 whose lead turns segmented, then meets another version.
        var entry = EntryMachine(sourceCount: 1, retries: 2, pins: Pins(), sizePin: nil)
        for event: Event in [.start(cancelled: false), .hostReady, .slotGranted(hostTroubled: false),
                             .inspected(Self.nothing, record: nil, recordUnreadable: false),
                             .download(.begin(DownloadMachine.Surroundings(url: version.url, partialPath: "f.part", segmentMin: 1,
                                                                          hasStore: true, speaksHTTP: true))),
                             .download(.leadSplittable(version, position: 0))] {
            _ = entry.handle(event)
        }
        #expect(entry.download?.mayRestartSegments == true)
        #expect(entry.download?.segments != nil)
        let ended = entry.handle(.download(.segmentsEnded(.failed(changed, bytes: 5), leadBytes: 5)))
        #expect(ended.contains(.removePartial) && ended.contains(.record(.clearPartial)))
        #expect(entry.phase == .backingOff)
        for event: Event in [.backOffEnded(cancelled: false), .hostReady, .slotGranted(hostTroubled: false),
                             .inspected(Self.nothing, record: nil, recordUnreadable: false)] {
            _ = entry.handle(event)
        }
        #expect(entry.phase == .transferring)
        #expect(entry.download?.mayRestartSegments == false)
    }

    static func name(of event: Event) -> String {
        String(describing: event).prefix { $0 != "(" }.description
    }
}

extension EntryMachineTests.Row {
    var machine: EntryMachine {
        EntryMachine(mode: mode, sourceCount: sources, retries: retries, pins: pins, sizePin: pins.size,
                     conditionalSources: conditional ?? SourceIndexSet(0..<sources), fillsCache: cache && mode == .sync,
                     offline: offline)
    }
}
