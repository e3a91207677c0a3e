import Glibc

/// One entry of `sync` as a state machine: every decision the sync of an entry makes, and
/// nothing else. `handle(_:)` takes what just happened and returns what to do next; it
/// performs no I/O, reads no clock and draws no random number, so it is tested as a table
/// (`EntryMachineTests`). `EntryDriver` carries out the effects and feeds the outcomes back.
///
/// The rules it owns, beside the `Planner`'s decision for each attempt:
/// - whether an attempt probes, or sends one conditional GET whose reply's head stands for the
///   probe's answer (`conditionalValidators`, `replied`), and whether that reply's body is taken;
/// - attempts, retries and back-off, falling back to the next source, giving up;
/// - which failures leave the partial file, which delete it, and which make the next attempt
///   restart rather than resume;
/// - what the state store is told after each step (the `RecordChange`s it emits);
/// - the transfer slot: taken before an attempt, given back as soon as the network part of
///   the attempt is over (before the file is hashed and committed), exactly once.
///
/// The download itself (one stream, a resume, or segments) is a machine of its own,
/// `DownloadMachine`, held while `.transferring`: the download's events (`download(_:)`) go to
/// it, its effects come out as `download(_:)`, and its end is taken here as a `TransferEnd`.
struct EntryMachine {
    /// Where the entry is.
    enum Phase: Equatable {
        case idle
        /// Waiting for the cache's lock of the pinned blob, which another entry or process holds
        /// while it downloads that file.
        case lockingBlob
        case waitingForHost
        case waitingForSlot
        case inspecting
        case probing
        /// The conditional GET is sent; its reply is not judged yet.
        case askingConditionally
        /// The conditional GET's reply was judged without its body (a skip or a failure): the
        /// request is ending.
        case abandoningReply
        case hashingDestination
        case hashingForRecord
        case preparing
        /// The cache's blob is being copied into the partial file and hashed.
        case placing
        /// The blob the placement found wanting is being moved aside.
        case quarantining
        /// A downloaded file, committed, is being copied into the cache.
        case fillingCache
        case transferring
        case measuringBody
        case finishingHash
        case keeping
        case committing
        case checkingConnectivity
        case backingOff
        case done
    }

    /// What just happened, as the driver saw it.
    enum Event: Equatable {
        /// The run reached this entry; `cancelled` when it was interrupted before.
        case start(cancelled: Bool)
        /// Nothing holds back an attempt on the current source (no outage, no Retry-After pause).
        case hostReady
        /// An outage outlasted its wait (`.unreachable`), or the run was interrupted (`.cancelled`).
        case hostUnavailable(TransferFailure)
        /// A transfer slot is held; `hostTroubled` when an outage or a pause began meanwhile.
        case slotGranted(hostTroubled: Bool)
        /// The run was interrupted while waiting for a slot.
        case slotDenied
        /// The run is being interrupted (any phase): whatever fails from now on ends the entry
        /// as cancelled, with no retry, no other source and no notice.
        case runCancelled
        indirect case inspected(LocalFacts, record: StateRecord?, recordUnreadable: Bool)
        case inspectionFailed(TransferFailure)
        case probed(RemoteFacts)
        /// The head of the conditional GET's reply, as the remote facts it stands for
        /// (`ConditionalReply.remoteFacts`); told from the reply sink's `begin`, before any body
        /// byte, on the engine's thread.
        case replied(RemoteFacts)
        /// The conditional GET was answered 304 under another version's validators
        /// (`ConditionalReply.Judgement.inconclusive`): once the request ends, a probe asks.
        case repliedInconclusively
        case destinationHashed(Result<String, TransferFailure>)
        /// The cache's lock of the pinned blob is held (or cannot be had at all, or the wait was
        /// interrupted: the entry goes on either way).
        case blobLocked
        /// The cache's blob was copied into the partial file: its SHA-256 and its size on disk
        /// as read back from there, or why the cache could not give it (a miss).
        case placed(Result<HashedFile, TransferFailure>)
        /// The committed file was offered to the cache (whatever became of it).
        case cacheFilled
        /// The blob found wanting was moved aside (or was gone).
        case quarantined
        /// The partial file is ready for the transfer (a copy of `DEST` made, a record cleared).
        case prepared(TransferFailure?)
        /// The download ended before (or without) its `DownloadMachine`: the run was
        /// interrupted before its request, or the conditional GET's body was never opened.
        case transferEnded(TransferEnd)
        /// What happened to the download in progress, for its `DownloadMachine`.
        case download(DownloadMachine.Event)
        case bodyMeasured(RemoteFacts)
        /// The partial file's SHA-256 and its size on disk.
        case hashed(Result<HashedFile, TransferFailure>)
        /// `DEST` still held the version it held when the attempt began, and was kept.
        case kept(LocalIdentity)
        /// `DEST` changed since the attempt began: it is replaced after all.
        case keepRefused
        case committed(Result<LocalIdentity?, TransferFailure>)
        case connectivityChecked(ConnectivityVerdict)
        case backOffEnded(cancelled: Bool)
    }

    /// What the connectivity gate said after a network-level failure.
    enum ConnectivityVerdict: Equatable {
        /// The network answers: the failure stands.
        case reachable
        /// The network was down and came back: the attempt is not held against the entry.
        case cameBack
        /// It stayed down for the whole wait, or the run was interrupted.
        case gaveUp(TransferFailure)
    }

    /// What the driver is to do, in order.
    enum Effect: Equatable {
        case announce(Notice)
        /// Wait until no outage or Retry-After pause holds back the source; answers `hostReady`
        /// or `hostUnavailable`.
        case awaitHost(source: Int)
        case acquireSlot
        case releaseSlot
        /// Answers `inspected` or `inspectionFailed`.
        case inspect
        case probe(source: Int)
        /// GET the file from source `source` on the condition that it is no longer the version
        /// `ifNoneOf` names (`If-None-Match` with its ETag). Its reply's head is told as
        /// `replied` (or `repliedInconclusively`), then its end as `transferEnded`.
        case conditionalGet(source: Int, ifNoneOf: RemoteValidators)
        /// Write the conditional GET's body into the partial file, as `order` says (from byte 0).
        indirect case receiveBody(TransferOrder)
        /// Take no byte of the conditional GET's body: stop it (a 2xx) or read it to its end.
        case abandonBody
        case hashDestination
        /// Copy the first `length` bytes of `DEST` into the partial file; `clearingRecord`
        /// first removes the store's partial record (refusing when that fails). Answers `prepared`.
        case prepare(copyLength: Int64?, clearingRecord: Bool)
        /// Start the download `order` describes: its driver answers `download(.begin(…))`
        /// with what it finds around it, and the `DownloadMachine` goes on from there.
        indirect case transfer(TransferOrder)
        /// Take the cache's lock of the pinned blob, waiting while another holds it; held until
        /// the entry ends. Answers `blobLocked`.
        case lockBlob
        /// Copy the cache's blob of the pinned SHA-256 (`size` bytes) into a new partial file and
        /// hash what landed there. Answers `placed`.
        case place(size: Int64)
        /// The cache's blob of the pinned SHA-256 hashed to something else: move it aside.
        /// Answers `quarantined`.
        case quarantineCached
        /// Copy `DEST`, just committed with `sha256` and `size` as the file `identity` names (when
        /// it could be read), into the cache; nothing when `DEST` is no longer that file.
        /// Answers `cacheFilled`.
        case fillCache(digest: String, size: Int64, identity: LocalIdentity?)
        /// What the download in progress is to do (`DownloadMachine.Effect`).
        case download(DownloadMachine.Effect)
        /// Probe a body that ended with the connection and no length; answers `bodyMeasured`.
        case measureBody(source: Int)
        case finishHash(size: Int64)
        indirect case keepDestination(CompleteVersion, validators: RemoteValidators, sha256: String)
        /// Date, fsync and rename the partial file, and record the version it holds (with no
        /// partial file left), together with other finished files (see `GroupCommit`).
        case commit(validators: RemoteValidators, sha256: String)
        case record(RecordChange)
        case removePartial
        case removePartialIfEmpty
        /// Hold every transfer to the source's host back for what `header` asks.
        case pauseHost(source: Int, retryAfter: String)
        case checkConnectivity(source: Int)
        /// Wait before retry `attempt` on this source; a Retry-After header, when the server
        /// sent one, sets the delay. Answers `backOffEnded`.
        case backOff(attempt: Int, failure: TransferFailure, retryAfter: String?)
        indirect case finish(Outcome)
    }

    /// What the machine tells the run's listeners, beside what the driver sees for itself.
    enum Notice: Equatable {
        case decided(Action)
        /// What the conditional GET's reply (or its failure) says of the remote file: what a
        /// probe would have been told.
        case answered(RemoteFacts)
        case fallingBack(source: Int, after: TransferFailure)
    }

    /// What the machine is run for.
    enum Mode: Equatable {
        /// Carry the entry out.
        case sync
        /// Only decide, as `mirror plan` shows it: inspect, probe (always, for the remote
        /// size), hash `DEST` when the decision needs it; nothing on disk or in the store is
        /// changed, no host is waited for, nothing is retried.
        case plan
    }

    /// How the entry ended.
    enum Outcome: Equatable {
        /// `plan` only: the decision, with the sizes the plan shows.
        case planned(Action, localSize: Int64?, remoteSize: Int64?)
        case succeeded(EntryReport.Outcome, action: Action, size: Int64?, sha256: String?)
        /// `inspectPartial`: the report says how big a partial file is left.
        case failed(TransferFailure, action: Action, inspectPartial: Bool)
    }

    /// What the state store is told. The whole policy: a partial file's record is written
    /// before its first byte (`TransferStartRecord`), cleared whenever that file is deleted or
    /// a new download begins, and the complete version is recorded once `DEST` holds it (by
    /// the commit itself, in its group's transaction, or here when `DEST` was kept or adopted).
    enum RecordChange: Equatable {
        case clearPartial
        /// `DEST` holds this version (none known: nil) and no partial file is left.
        case complete(CompleteVersion?)
    }

    /// One GET into the partial file.
    struct TransferOrder: Equatable {
        var source: Int
        var action: Action
        /// Where the new bytes go; 0 starts the file over.
        var offset: Int64
        var remote: RemoteFile?
        /// Validators of the version the partial file holds, when recorded.
        var startedFrom: RemoteValidators?
        /// The store held a partial record when the attempt began (perhaps of another version).
        var hadPartialRecord: Bool
    }

    /// How a GET ended, as the partial file's writer saw it.
    enum TransferEnd: Equatable {
        /// Refused before any request: the partial file could not be opened or had shrunk.
        case notStarted(TransferFailure, mustRestart: Bool)
        /// A transport failure, a refused redirect or a failure of the writer.
        /// `restartedFromZero`, here and below: a range was asked for and the whole file began
        /// to arrive, so the attempt was a restart, whatever ended it.
        case failed(TransferFailure, bytes: Int64, restartedFromZero: Bool = false)
        case noResponse(bytes: Int64, restartedFromZero: Bool = false)
        case rejected(TransferFailure, bytes: Int64, restartedFromZero: Bool = false)
        /// The conditional GET's body was not taken (`abandonBody`).
        case abandoned
        case alreadyComplete(total: Int64, head: ResponseHeadSummary)
        /// The body was written up to `position`; `total` is what the reply said the file holds;
        /// `restartedFromZero` when a range was asked for and the whole file came.
        case written(position: Int64, total: Int64?, bytes: Int64, restartedFromZero: Bool, head: ResponseHeadSummary)
    }

    /// What of a reply's head the machine needs.
    struct ResponseHeadSummary: Equatable {
        var etag: String?
        var lastModified: String?
        var isChunked = false
    }

    struct HashedFile: Equatable {
        /// The digest in the entry's algorithm (SHA-256 unless it is pinned by SHA-512).
        var sha256: String
        var sizeOnDisk: Int64
    }

    // MARK: Configuration

    let mode: Mode
    let sourceCount: Int
    let retries: Int
    let pins: Pins
    let sizePin: Int64?
    /// The sources that answer HTTP conditions (http and https URLs; not ftp or file): an
    /// attempt on one of them whose `DEST` the store vouches for is one conditional GET.
    let conditionalSources: SourceIndexSet
    /// A cache is used: what this run downloads and hashes by SHA-256 goes into it.
    let fillsCache: Bool
    /// `--offline`: no request. What the root holds verified is kept, what the cache holds is
    /// placed; anything else fails at once, saying what is missing.
    let offline: Bool
    /// Outages waited out without spending a retry, at most: a server that keeps vanishing
    /// and coming back must still run out of attempts.
    static let maxForgivenOutages = 20

    // MARK: State

    private(set) var phase: Phase = .idle
    private(set) var source = 0
    private(set) var attempts = 0
    private(set) var bytes: Int64 = 0
    private var failuresHere = 0
    private var forgivenOutages = 0
    private var lastAction: Action = .download
    private var lastFailure: TransferFailure = .cancelled
    /// Set after a failure that forbids continuing the bytes on disk: the next attempt restarts.
    private var restartReason: String?
    private var holdsSlot = false
    private var runCancelled = false
    // The attempt in progress.
    private var local: LocalFacts?
    private var record: StateRecord?
    private var hadPartialRecord = false
    private var remote: RemoteFacts?
    private var destinationHash: String?
    private var action: Action = .download
    private var order: TransferOrder?
    private var pendingEnd: (position: Int64, head: ResponseHeadSummary)?
    private var committing: (size: Int64, validators: RemoteValidators, sha256: String)?
    private var retryAfter: String?
    /// The validators of the last reply whose bytes failed the pin, and its source: what the
    /// next attempt's reply is compared with when that attempt has no probe of its own.
    private var lastServed: (source: Int, validators: RemoteValidators)?
    /// The conditional GET's reply proved nothing: the attempt probes once it has ended.
    private var probeAfterReply = false
    /// The download in progress, while `.transferring`.
    private(set) var download: DownloadMachine?
    /// Segmented downloads of this entry started over because the server's version changed.
    private var segmentRestarts = 0
    /// The attempt's bytes came in ranges sent without a precondition (`DownloadMachine`).
    private var joinedUnnamedRanges = false
    /// A pin failed on such ranges: the next attempts fetch the file as one GET, whose
    /// mismatch, if it comes again, is the server's settled answer (not one more download of
    /// the same wrong file per retry).
    private var segmentsRefused = false
    /// The cache's blob was tried (placed, or found wanting): this entry does not go to the
    /// cache again in this run.
    private var cacheTried = false
    /// The blob's lock was asked for (and is held until the entry ends, by the driver).
    private var holdsBlobLock = false
    /// How the entry ends once its file has gone into the cache.
    private var filledOutcome = EntryReport.Outcome.transferred

    init(
        mode: Mode = .sync, sourceCount: Int, retries: Int, pins: Pins, sizePin: Int64?, conditionalSources: SourceIndexSet = [],
        fillsCache: Bool = false, offline: Bool = false
    ) {
        self.mode = mode
        self.fillsCache = fillsCache
        self.offline = offline
        self.conditionalSources = conditionalSources
        self.sourceCount = max(1, sourceCount)
        self.retries = retries
        self.pins = pins
        self.sizePin = sizePin
    }

    var holdsTransferSlot: Bool { holdsSlot }

    // MARK: Transitions

    mutating func handle(_ event: Event) -> [Effect] {
        if event == .runCancelled {
            runCancelled = true
            return []
        }
        switch (phase, event) {
        case (.idle, .start(let cancelled)):
            if cancelled {
                return end(.failed(.cancelled, action: .download, inspectPartial: false))
            }
            if mode == .plan {
                phase = .waitingForSlot
                return [.acquireSlot]
            }
            return beginAttempt()

        case (.lockingBlob, .blobLocked):
            if runCancelled { return end(.failed(.cancelled, action: .download, inspectPartial: false)) }
            // The attempt that stopped for the lock is not counted: it looks at the disk again
            // (the blob may be there now) as the same attempt.
            attempts -= 1
            return beginAttempt()

        case (.waitingForHost, .hostReady):
            phase = .waitingForSlot
            return [.acquireSlot]
        case (.waitingForHost, .hostUnavailable(let failure)):
            lastFailure = failure
            return afterSource()

        case (.waitingForSlot, .slotGranted(let troubled)):
            holdsSlot = true
            if troubled {
                // While this entry waited for its turn, a pause or an outage began (the entry
                // that met it holds its slot until it is in force): wait again.
                holdsSlot = false
                phase = .waitingForHost
                return [.releaseSlot, .awaitHost(source: source)]
            }
            attempts += 1
            resetAttempt()
            phase = .inspecting
            return [.inspect]
        case (.waitingForSlot, .slotDenied):
            lastFailure = .cancelled
            return afterSource()

        case (.inspecting, .inspectionFailed(let failure)):
            action = .fail(failure)
            if mode == .plan { return end(.planned(action, localSize: nil, remoteSize: nil)) }
            return attemptFailed(failure)
        case (.inspecting, .inspected(let local, let record, let unreadable)):
            self.local = local
            self.record = record
            // A store that could not be read may hold a record of another version all the same.
            hadPartialRecord = record?.partial != nil || unreadable
            if Planner.isPinnedAndVerified(local: local, state: record, pins: pins) {
                // The store vouches for the pinned hash of this very file: no request needed.
                action = .skip
                if mode == .plan {
                    let size = local.destination.size ?? local.partial.size
                    return end(.planned(.skip, localSize: size, remoteSize: size), after: .announce(.decided(.skip)))
                }
                return succeed(.skipped, size: local.destination.size, sha256: pins.digest, after: .announce(.decided(.skip)))
            }
            if let size = local.cached, !cacheTried, local.isEmpty || offline, pins.digest != nil,
               sizePin == nil || sizePin == size {
                // The cache holds the pinned bytes: placed without a request, and checked against
                // the pin like any download before they land under DEST. Not over a partial
                // file, which its record (and a segment map) describe: that one is resumed.
                action = .cached
                if mode == .plan {
                    return end(.planned(.cached, localSize: nil, remoteSize: size), after: .announce(.decided(.cached)))
                }
                cacheTried = true
                committing = (size, RemoteValidators(etag: nil, lastModified: nil, size: size), "")
                phase = .placing
                // Offline, a partial file cannot be finished, and a DEST that is not the pinned
                // file is replaced: the placement goes over both.
                return Self.partialCleared(local, record) + [.announce(.decided(.cached)), .place(size: size)]
            }
            if offline { return offlineEnd(local: local, record: record) }
            if fillsCache, !holdsBlobLock, pins.digest != nil {
                // One download of a pinned file for every root that shares the cache: whoever
                // holds the blob's lock fetches it; the others wait, without a slot, and then
                // look again, finding it in the cache. Asked only of an entry that would fetch.
                holdsBlobLock = true
                phase = .lockingBlob
                return releaseSlot() + [.lockBlob]
            }
            if local.isEmpty, mode == .sync {
                // Nothing on disk: the probe would only repeat what the GET's headers say.
                action = .download
                return [.announce(.decided(.download))] + startTransfer(offset: 0, remote: nil, startedFrom: nil)
            }
            if let recorded = conditionalValidators {
                // The probe's answer would only be compared with these: the GET asks the server
                // to compare them itself, and sends the new version in the same reply.
                phase = .askingConditionally
                return [.conditionalGet(source: source, ifNoneOf: recorded)]
            }
            phase = .probing
            return [.probe(source: source)]

        case (.askingConditionally, .replied(let facts)):
            // The decision a probe answering `facts` would have led to, by the same planner.
            guard let local else { return unexpected(event) }
            remote = facts
            let decided = Planner.decide(local: local, remote: facts, pins: pins, state: record)
            action = decided
            let announce: [Effect] = [.announce(.answered(facts)), .announce(.decided(decided))]
            if decided.startsFromZero {
                // A reply with no length has said no size: as after no probe, a body that ends
                // with its connection is measured before it is accepted (`measureBody`).
                let told = remoteFile?.size == nil ? nil : remoteFile
                let order = TransferOrder(source: source, action: decided, offset: 0, remote: told, startedFrom: nil,
                                          hadPartialRecord: hadPartialRecord)
                self.order = order
                phase = .transferring
                download = .receiving(order, mayRestartSegments: segmentRestarts == 0, maySegment: !segmentsRefused)
                return announce + [.receiveBody(order)]
            }
            // A skip or a failure: the body is not wanted, and what follows waits for the end
            // of the request.
            phase = .abandoningReply
            return announce + [.abandonBody]
        case (.askingConditionally, .transferEnded(let end)):
            // No reply was judged: the request failed as the probe would have.
            let failure: TransferFailure
            switch end {
            case .notStarted(let refused, _): failure = refused
            case .failed(let failed, _, _), .rejected(let failed, _, _): failure = failed
            case .noResponse: failure = Self.noResponse
            case .abandoned, .alreadyComplete, .written: return unexpected(event)
            }
            remote = .unavailable(failure)
            action = .fail(failure)
            return [.announce(.answered(.unavailable(failure))), .announce(.decided(action))] + attemptFailed(failure)
        case (.askingConditionally, .repliedInconclusively):
            probeAfterReply = true
            phase = .abandoningReply
            return [.abandonBody]
        case (.abandoningReply, .transferEnded) where probeAfterReply:
            // The same question a probe answers on the plan's path, equality of every validator.
            probeAfterReply = false
            phase = .probing
            return [.probe(source: source)]
        case (.abandoningReply, .transferEnded):
            // Judged from the head: however the abandoned body ended, the decision stands.
            return carryOut(action)

        case (.probing, .probed(let facts)):
            remote = facts
            guard let local else { return unexpected(event) }
            if Planner.needsDestinationHash(local: local, remote: facts, pins: pins, state: record) {
                phase = .hashingDestination
                return [.hashDestination]
            }
            return decide()
        case (.hashingDestination, .destinationHashed(let result)):
            switch result {
            case .success(let hash):
                destinationHash = hash
                return decide()
            case .failure(let failure):
                action = .fail(failure)
                if mode == .plan { return planned() }
                return [.announce(.decided(action))] + attemptFailed(failure)
            }

        case (.hashingForRecord, .destinationHashed(let result)):
            switch result {
            case .success(let hash):
                destinationHash = hash
                return recordFirstSight()
            case .failure(let failure):
                action = .fail(failure)
                return attemptFailed(failure)
            }

        case (.preparing, .prepared(let refusal)):
            if let refusal { return attemptFailed(refusal) }
            guard let order else { return unexpected(event) }
            return startTransfer(order)

        case (.transferring, .transferEnded(let end)):
            download = nil
            joinedUnnamedRanges = false
            return transferEnded(end)
        case (.transferring, .download(let inner)):
            guard var machine = download else { return unexpected(event) }
            var effects: [Effect] = []
            for effect in machine.handle(inner) {
                guard case .ended(let end, let versionChanged) = effect else {
                    effects.append(.download(effect))
                    continue
                }
                // The entry's logic after a transfer, whatever shape the download had.
                if versionChanged { segmentRestarts += 1 }
                joinedUnnamedRanges = machine.joinedUnnamedRanges
                download = nil
                return effects + transferEnded(end)
            }
            download = machine
            return effects

        case (.measuringBody, .bodyMeasured(let facts)):
            guard let pendingEnd else { return unexpected(event) }
            var total: Int64?
            if case .available(let file) = facts { total = file.size }
            return checkLength(position: pendingEnd.position, total: total, head: pendingEnd.head)

        case (.finishingHash, .hashed(let result)):
            guard let pending = committing else { return unexpected(event) }
            switch result {
            case .failure(let failure):
                return attemptFailed(failure, cleanup: Self.cleanupAfterLocalFailure(failure))
            case .success(let file):
                if file.sizeOnDisk != pending.size {
                    return attemptFailed(.sizeMismatch(expected: pending.size, actual: file.sizeOnDisk))
                }
                // A file that fails a pin must never land under DEST, and keeping it would
                // only resume bad bytes.
                if let pinned = sizePin, pinned != pending.size {
                    return attemptFailed(.sizeMismatch(expected: pinned, actual: pending.size), cleanup: [.removePartial, .record(.clearPartial)])
                }
                if let pin = pins.digest, file.sha256 != pin {
                    // Ranges no precondition tied to one version are not one whole file: the
                    // file may have changed between them, and another attempt may get it right.
                    let failure = TransferFailure.pinMismatch(
                        expected: pin, actual: file.sha256, served: pending.validators, before: versionBeforeReply,
                        wholeFile: action.startsFromZero && !joinedUnnamedRanges)
                    if joinedUnnamedRanges { segmentsRefused = true }
                    lastServed = (source, pending.validators)
                    return attemptFailed(failure, cleanup: [.removePartial, .record(.clearPartial)])
                }
                committing = (pending.size, pending.validators, file.sha256)
                if let keeping = keptVersion, keeping.sha256 == file.sha256, keeping.local.size == pending.size {
                    phase = .keeping
                    return [.keepDestination(keeping, validators: pending.validators, sha256: file.sha256)]
                }
                phase = .committing
                return [.commit(validators: pending.validators, sha256: file.sha256)]
            }

        case (.placing, .placed(let result)):
            guard let pending = committing else { return unexpected(event) }
            committing = nil
            switch result {
            case .failure:
                // The cache could not give the blob (gone, or unreadable): a miss. The attempt
                // looks at the disk again and goes on without the cache.
                phase = .inspecting
                return [.removePartial, .inspect]
            case .success(let file):
                guard file.sizeOnDisk == pending.size, file.sha256 == pins.digest else {
                    // The blob is not the file its name says: never placed, and never again;
                    // moved aside before the download that follows fills its name anew.
                    phase = .quarantining
                    return [.removePartial, .quarantineCached]
                }
                committing = (pending.size, pending.validators, file.sha256)
                phase = .committing
                return releaseSlot() + [.commit(validators: pending.validators, sha256: file.sha256)]
            }

        case (.quarantining, .quarantined):
            phase = .inspecting
            return [.inspect]

        case (.fillingCache, .cacheFilled):
            guard let pending = committing else { return unexpected(event) }
            return succeed(filledOutcome, size: pending.size, sha256: pending.sha256)

        case (.keeping, .kept(let identity)):
            guard let pending = committing else { return unexpected(event) }
            return [.record(.complete(CompleteVersion(validators: pending.validators, sha256: pending.sha256, local: identity)))]
                + succeedFillingCache(.skipped, size: pending.size, sha256: pending.sha256, identity: identity)
        case (.keeping, .keepRefused):
            guard let pending = committing else { return unexpected(event) }
            phase = .committing
            return [.commit(validators: pending.validators, sha256: pending.sha256)]

        case (.committing, .committed(let result)):
            guard let pending = committing else { return unexpected(event) }
            switch result {
            case .success(let identity):
                // The commit recorded the version (see `Effect.commit`).
                if action == .cached { return succeed(.transferred, size: pending.size, sha256: pending.sha256) }
                return succeedFillingCache(.transferred, size: pending.size, sha256: pending.sha256, identity: identity)
            case .failure(let failure):
                return attemptFailed(failure, cleanup: Self.cleanupAfterLocalFailure(failure))
            }

        case (.checkingConnectivity, .connectivityChecked(let verdict)):
            switch verdict {
            case .cameBack where forgivenOutages < Self.maxForgivenOutages:
                // The network was down, not the server: that attempt is not held against the
                // entry, and the retry goes out at once.
                forgivenOutages += 1
                phase = .waitingForHost
                return [.awaitHost(source: source)]
            case .cameBack, .reachable:
                return retryOrGiveUp()
            case .gaveUp(let failure):
                lastFailure = failure
                return afterSource()
            }

        case (.backingOff, .backOffEnded(let cancelled)):
            if cancelled {
                lastFailure = .cancelled
                return afterSource()
            }
            phase = .waitingForHost
            return [.awaitHost(source: source)]

        default:
            return unexpected(event)
        }
    }

    // MARK: Steps

    private mutating func beginAttempt() -> [Effect] {
        phase = .waitingForHost
        return [.awaitHost(source: source)]
    }

    private mutating func resetAttempt() {
        probeAfterReply = false
        local = nil
        record = nil
        hadPartialRecord = false
        remote = nil
        destinationHash = nil
        order = nil
        download = nil
        pendingEnd = nil
        committing = nil
        retryAfter = nil
    }

    /// The version `DEST` held when the attempt began, if one was verified: a download of the
    /// same bytes leaves `DEST` as it is.
    private var keptVersion: CompleteVersion? {
        guard let order, order.offset == 0, let local else { return nil }
        switch order.action {
        case .download, .restart, .replace: return Planner.verifiedVersion(local: local, state: record)
        default: return nil
        }
    }

    /// The newest version known before this attempt's reply: its probe's, else that of the
    /// reply before on this source (`TransferFailure.pinMismatch`).
    private var versionBeforeReply: RemoteValidators? {
        if let probed = order?.remote { return RemoteValidators(probed) }
        if let lastServed, lastServed.source == source { return lastServed.validators }
        return nil
    }

    private var remoteFile: RemoteFile? {
        if case .available(let file)? = remote { return file }
        return nil
    }

    private mutating func decide() -> [Effect] {
        guard let local, let remote else { return unexpected(.probed(.unavailable(.cancelled))) }
        var decided = Planner.decide(local: local, remote: remote, pins: pins, state: record, destinationSHA256: destinationHash)
        if let restartReason {
            switch decided {
            case .resume, .finish: decided = .restart(reason: restartReason)
            default: break
            }
        }
        action = decided
        if mode == .plan {
            if case .unavailable(let failure) = remote, Self.worthAnotherSource(failure), source + 1 < sourceCount {
                // `sync` would go on to the next source (a mirror, or the original after its
                // rewrite): so does the plan, which retries nothing.
                lastFailure = failure
                source += 1
                phase = .waitingForHost
                return releaseSlot() + [.announce(.fallingBack(source: source, after: failure)), .awaitHost(source: source)]
            }
            return planned()
        }
        return [.announce(.decided(decided))] + carryOut(decided)
    }

    /// `--offline`, with neither a pinned file the store vouches for nor the cache's blob: a
    /// file the store verified (and no pin it fails) is kept; anything else fails now, with no
    /// retry and no other source, since every one of them would need a request.
    private mutating func offlineEnd(local: LocalFacts, record: StateRecord?) -> [Effect] {
        if let verified = Planner.verifiedVersion(local: local, state: record),
           pins.digest == nil, sizePin == nil || sizePin == verified.local.size {
            action = .skip
            let size = local.destination.size
            if mode == .plan { return end(.planned(.skip, localSize: size, remoteSize: size), after: .announce(.decided(.skip))) }
            // A partial file left beside a verified DEST goes, as online.
            return Self.partialCleared(local, record) + succeed(.skipped, size: size, sha256: verified.sha256, after: .announce(.decided(.skip)))
        }
        let missing: String
        if let pin = pins.digest {
            let name = pins.algorithm.key
            missing = local.destination == .missing
                ? "neither the root nor the cache holds \(name) \(pin)"
                : "DEST is not a file the state store verified as \(name) \(pin), and the cache does not hold it"
        } else {
            missing = local.destination == .missing
                ? "the root does not hold it, and with no sha256 or sha512 pin the cache cannot stand in"
                : "DEST is not a file the state store verified, and with no sha256 or sha512 pin the cache cannot stand in"
        }
        let failure = TransferFailure.offline(missing)
        action = .fail(failure)
        if mode == .plan {
            return end(.planned(action, localSize: local.destination.size, remoteSize: nil), after: .announce(.decided(action)))
        }
        lastAction = action
        return end(.failed(failure, action: action, inspectPartial: false), after: .announce(.decided(action)))
    }

    /// Removes a partial file left on disk and the store's record of one, where there are.
    private static func partialCleared(_ local: LocalFacts, _ record: StateRecord?) -> [Effect] {
        var effects: [Effect] = []
        if local.partial.size != nil { effects.append(.removePartial) }
        if record?.partial != nil { effects.append(.record(.clearPartial)) }
        return effects
    }

    /// What `decided` (already announced) makes the attempt do.
    private mutating func carryOut(_ decided: Action) -> [Effect] {
        guard let local else { return unexpected(.probed(.unavailable(.cancelled))) }
        switch decided {
        case .skip:
            let verified = Planner.verifiedVersion(local: local, state: record)
            var effects: [Effect] = []
            if local.partial.size != nil { effects.append(.removePartial) }
            if remoteFile != nil, local.destinationIdentity != nil, verified == nil || pins.comparable(verified?.sha256) == nil {
                // First sight of this DEST (or of its hash in the pin's algorithm): remember what
                // it was found to be, hash included, so later runs and `verify` can tell if it changes.
                if destinationHash == nil {
                    phase = .hashingForRecord
                    return effects + [.hashDestination]
                }
                return effects + recordFirstSight()
            }
            if local.partial.size != nil { effects.append(.record(.clearPartial)) }
            return effects + succeed(.skipped, size: local.destination.size, sha256: verified?.sha256)
        case .fail(let failure):
            return attemptFailed(failure)
        case .cached:
            // Decided on inspection alone, never by the planner.
            return unexpected(.probed(.unavailable(.cancelled)))
        case .download, .restart, .replace:
            // A new download: what the store said about an earlier partial file is void.
            let clear: [Effect] = record?.partial != nil ? [.record(.clearPartial)] : []
            return clear + startTransfer(offset: 0, remote: remoteFile, startedFrom: nil)
        case .resume(let from, .partial):
            return startTransfer(offset: from, remote: remoteFile, startedFrom: record?.partial)
        case .resume(let from, .destination):
            // Continue a copy of the short DEST as the partial file: DEST itself stays as it is
            // until a complete, verified file is renamed over it. The copy is resumed with the
            // overlap check, never with a record: one of another version must go first, even
            // if this attempt fails before any reply.
            order = TransferOrder(source: source, action: decided, offset: from, remote: remoteFile, startedFrom: nil,
                                  hadPartialRecord: hadPartialRecord)
            phase = .preparing
            return [.prepare(copyLength: from, clearingRecord: hadPartialRecord)]
        case .finish(let size):
            // Only the disk from here on.
            committing = (size, RemoteValidators(etag: remoteFile?.etag, lastModified: remoteFile?.lastModified, size: size), "")
            phase = .finishingHash
            return releaseSlot() + [.finishHash(size: size)]
        }
    }

    /// The validators to send with a conditional GET, when this attempt is one: the source
    /// answers HTTP conditions, no partial file or record of one is there to continue, no
    /// digest pin decides (with one, the store's hash or DEST's decides, never the server's
    /// validators), no `size` pin contradicts the recorded size, and the store vouches for
    /// `DEST` as a version it names by one well-formed ETag (`EntityTag.isSingleTag`). Only the
    /// ETag is sent (`If-None-Match`): a 304 then says the tags match weakly, as the probe's
    /// comparison would; a date-only record keeps the probe, whose equality of dates and sizes
    /// a 304 to `If-Modified-Since` ("not newer") cannot stand for (`ConditionalReply`).
    private var conditionalValidators: RemoteValidators? {
        guard mode == .sync, conditionalSources.contains(source), pins.digest == nil, !hadPartialRecord,
              let local, local.partial == .missing,
              let verified = Planner.verifiedVersion(local: local, state: record),
              let etag = verified.validators.etag, EntityTag.isSingleTag(etag),
              // A size pin the record's size contradicts is the probe's to report: a 304 says no size.
              sizePin.map({ $0 == (verified.validators.size ?? verified.local.size) }) ?? true
        else { return nil }
        return verified.validators
    }

    /// `plan`: the decision is all there is.
    private mutating func planned() -> [Effect] {
        let localSize = local?.destination.size ?? local?.partial.size
        return end(.planned(action, localSize: localSize, remoteSize: remoteFile?.size), after: .announce(.decided(action)))
    }

    private mutating func recordFirstSight() -> [Effect] {
        guard let local, let identity = local.destinationIdentity, let file = remoteFile else {
            return unexpected(.destinationHashed(.failure(.cancelled)))
        }
        let hash = destinationHash ?? ""
        let validators = Planner.verifiedVersion(local: local, state: record)?.validators ?? RemoteValidators(file)
        return [.record(.complete(CompleteVersion(validators: validators, sha256: hash, local: identity)))]
            + succeedFillingCache(.skipped, size: local.destination.size, sha256: hash, identity: identity)
    }

    /// The entry's success, once a file whose SHA-256 this run computed (a download, a `DEST`
    /// hashed at first sight or kept as the download's bytes) has gone into the cache, when one
    /// is used: only bytes mirror hashed itself enter. The slot is given back first.
    private mutating func succeedFillingCache(_ outcome: EntryReport.Outcome, size: Int64?, sha256: String, identity: LocalIdentity?) -> [Effect] {
        guard fillsCache, let size, DigestAlgorithm(hexDigest: sha256) != nil else {
            return succeed(outcome, size: size, sha256: sha256)
        }
        committing = (size, committing?.validators ?? RemoteValidators(etag: nil, lastModified: nil, size: size), sha256)
        filledOutcome = outcome
        phase = .fillingCache
        return releaseSlot() + [.fillCache(digest: sha256, size: size, identity: identity)]
    }

    private mutating func startTransfer(offset: Int64, remote: RemoteFile?, startedFrom: RemoteValidators?) -> [Effect] {
        startTransfer(TransferOrder(source: source, action: action, offset: offset, remote: remote, startedFrom: startedFrom,
                                    hadPartialRecord: hadPartialRecord))
    }

    /// The download `order` describes begins, as a `DownloadMachine` of its own.
    private mutating func startTransfer(_ order: TransferOrder) -> [Effect] {
        self.order = order
        phase = .transferring
        download = DownloadMachine(order: order, mayRestartSegments: segmentRestarts == 0, maySegment: !segmentsRefused)
        return [.transfer(order)]
    }

    private mutating func transferEnded(_ end: TransferEnd) -> [Effect] {
        switch end {
        case .notStarted(let failure, let mustRestart):
            if mustRestart { restartReason = failure.description }
            return attemptFailed(failure, restartDecided: mustRestart)
        case .failed(let failure, let bytes, let restartedFromZero):
            self.bytes = self.bytes.saturatingAdding(bytes)
            if restartedFromZero { action = Self.wholeFileRestart }
            switch failure {
            case .rangeMismatch:
                // The bytes on disk are not (or not provably) the server's: never resume them,
                // in this run or the next.
                restartReason = failure.description
                return attemptFailed(failure, cleanup: [.removePartial, .record(.clearPartial)], restartDecided: true)
            case .bodyTooLarge, .sizePinConflict:
                return attemptFailed(failure, cleanup: [.removePartial, .record(.clearPartial)])
            default:
                let cleanup = Self.cleanupAfterLocalFailure(failure)
                return attemptFailed(failure, cleanup: cleanup.isEmpty ? [.removePartialIfEmpty] : cleanup)
            }
        case .noResponse(let bytes, let restartedFromZero):
            self.bytes = self.bytes.saturatingAdding(bytes)
            if restartedFromZero { action = Self.wholeFileRestart }
            return attemptFailed(Self.noResponse, cleanup: [.removePartialIfEmpty])
        case .rejected(let failure, let bytes, let restartedFromZero):
            self.bytes = self.bytes.saturatingAdding(bytes)
            if restartedFromZero { action = Self.wholeFileRestart }
            return attemptFailed(failure)
        case .alreadyComplete(let total, let head):
            return readyToCommit(size: total, head: head)
        case .abandoned:
            return unexpected(.transferEnded(end))
        case .written(let position, let total, let bytes, let restartedFromZero, let head):
            self.bytes = self.bytes.saturatingAdding(bytes)
            if restartedFromZero { action = Self.wholeFileRestart }
            if total == nil, order?.remote == nil, !head.isChunked, let order {
                // The body ended when the connection closed and nothing said how long it is:
                // ask, as the probe skipped for a new file would have.
                pendingEnd = (position, head)
                phase = .measuringBody
                return [.measureBody(source: order.source)]
            }
            return checkLength(position: position, total: total, head: head)
        }
    }

    static let noResponse = TransferFailure.curl(code: 0, message: "the server sent no response", osErrno: 0)

    static let wholeFileRestart = Action.restart(reason: "the server answered the range request with the whole file")

    private mutating func checkLength(position: Int64, total: Int64?, head: ResponseHeadSummary) -> [Effect] {
        if let total, position < total {
            return attemptFailed(.partialBody(received: position, expected: total))
        }
        if let total, position > total {
            // Longer than the server's own size: nothing in it is worth resuming.
            return attemptFailed(.sizeMismatch(expected: total, actual: position), cleanup: [.removePartial, .record(.clearPartial)])
        }
        return readyToCommit(size: position, head: head)
    }

    private mutating func readyToCommit(size: Int64, head: ResponseHeadSummary) -> [Effect] {
        let remote = order?.remote
        let validators = RemoteValidators(etag: head.etag ?? remote?.etag, lastModified: head.lastModified ?? remote?.lastModified, size: size)
        committing = (size, validators, "")
        phase = .finishingHash
        // The network part is over: the next entry may start its request while this file is
        // checked, fsync'd and renamed.
        return releaseSlot() + [.finishHash(size: size)]
    }

    /// What else goes when a local operation failed: a full disk gets its space back, so the
    /// entries after this one can still be written.
    static func cleanupAfterLocalFailure(_ failure: TransferFailure) -> [Effect] {
        if case .localIO(_, _, let code) = failure, code == ENOSPC || code == EDQUOT {
            return [.removePartial, .record(.clearPartial)]
        }
        return []
    }

    private mutating func releaseSlot() -> [Effect] {
        guard holdsSlot else { return [] }
        holdsSlot = false
        return [.releaseSlot]
    }

    /// The attempt failed: clean up, give the slot back (a Retry-After in force first), and
    /// retry, wait for the network, fall back or give up.
    private mutating func attemptFailed(_ failure: TransferFailure, cleanup: [Effect] = [], restartDecided: Bool = false) -> [Effect] {
        lastFailure = failure
        lastAction = action
        if !restartDecided, action.startsFromZero {
            // The partial file now holds a fresh download: continue it as usual.
            restartReason = nil
        }
        var effects = cleanup
        retryAfter = nil
        if case .httpStatus(_, let header?) = failure, failure.isRetryable {
            // In force before the slot goes to the next entry for this host.
            retryAfter = header
            effects.append(.pauseHost(source: source, retryAfter: header))
        }
        effects += releaseSlot()
        if failure == .cancelled || runCancelled { return effects + afterSource() }
        if failure.isNetworkLevel {
            phase = .checkingConnectivity
            return effects + [.checkConnectivity(source: source)]
        }
        return effects + retryOrGiveUp()
    }

    private mutating func retryOrGiveUp() -> [Effect] {
        guard lastFailure.isRetryable, failuresHere < retries else { return afterSource() }
        failuresHere += 1
        phase = .backingOff
        return [.backOff(attempt: failuresHere, failure: lastFailure, retryAfter: retryAfter)]
    }

    /// This source is done with: the next one, or the end.
    private mutating func afterSource() -> [Effect] {
        if lastFailure == .cancelled || runCancelled {
            return end(.failed(.cancelled, action: lastAction, inspectPartial: attempts > 0))
        }
        guard Self.worthAnotherSource(lastFailure), source + 1 < sourceCount else {
            return end(.failed(lastFailure, action: lastAction, inspectPartial: attempts > 0))
        }
        source += 1
        failuresHere = 0
        phase = .waitingForHost
        return [.announce(.fallingBack(source: source, after: lastFailure)), .awaitHost(source: source)]
    }

    /// Local trouble follows the entry to every source; remote trouble may not.
    static func worthAnotherSource(_ failure: TransferFailure) -> Bool {
        switch failure {
        case .localIO, .localConflict, .cancelled: return false
        default: return true
        }
    }

    private mutating func succeed(_ outcome: EntryReport.Outcome, size: Int64?, sha256: String?, after first: Effect? = nil) -> [Effect] {
        lastAction = action
        return end(.succeeded(outcome, action: action, size: size, sha256: sha256), after: first)
    }

    /// The entry's end: `first` (when given), the slot given back, and `outcome`, in one list
    /// made at its size (every entry ends here: joining lists took four allocations).
    private mutating func end(_ outcome: Outcome, after first: Effect? = nil) -> [Effect] {
        phase = .done
        var effects: [Effect] = []
        effects.reserveCapacity(3)
        if let first { effects.append(first) }
        if holdsSlot {
            holdsSlot = false
            effects.append(.releaseSlot)
        }
        if mode == .plan, case .failed(let failure, _, _) = outcome {
            // A plan reports every entry as a decision, an interrupted one included.
            effects.append(.finish(.planned(.fail(failure), localSize: nil, remoteSize: nil)))
        } else {
            effects.append(.finish(outcome))
        }
        return effects
    }

    /// An event the current phase does not expect: a driver bug. The entry fails rather than
    /// guess, and gives its slot back.
    private mutating func unexpected(_ event: Event) -> [Effect] {
        let failure = TransferFailure.localConflict("internal error: \(event) while \(phase)")
        return releaseSlot() + end(.failed(failure, action: action, inspectPartial: attempts > 0))
    }
}

extension Action {
    var isResume: Bool {
        switch self {
        case .resume, .finish: return true
        default: return false
        }
    }

    /// The attempt fetches the file from byte 0.
    var startsFromZero: Bool {
        switch self {
        case .download, .restart, .replace: return true
        default: return false
        }
    }
}

/// `+` for effect lists, the machine's and its driver's: no new array when one side is empty
/// (most `releaseSlot()`s and clean-ups are, and what is pending when an answer comes), one
/// allocation of the right size otherwise, where the standard `+` grew the left side's
/// exact-size storage.
func + (lhs: [EntryMachine.Effect], rhs: [EntryMachine.Effect]) -> [EntryMachine.Effect] {
    if lhs.isEmpty { return rhs }
    if rhs.isEmpty { return lhs }
    var joined: [EntryMachine.Effect] = []
    joined.reserveCapacity(lhs.count + rhs.count)
    joined.append(contentsOf: lhs)
    joined.append(contentsOf: rhs)
    return joined
}
