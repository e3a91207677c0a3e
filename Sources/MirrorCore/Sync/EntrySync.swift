import Glibc

/// Syncs one entry: plan, act, verify, commit; retries with backoff; falls back to mirrors.
///
/// Data rules kept here: bytes land only in the partial file; `DEST` appears only by renaming
/// a complete, verified, fsync'd partial file over it; an existing `DEST` is never deleted or
/// written in place; cleanup removes only partial files. Bytes on disk are continued only when
/// they are known to be of the server's current version: by the validators recorded when the
/// partial file was started (sent as `If-Range`, and checked on the 206), or, with no record,
/// by re-reading an overlap before the resume point and comparing it.
struct EntrySync {
    let entry: Entry
    let runner: ManifestRunner
    let store: StateStore?
    let conditions: HostConditions

    /// Outages waited out without spending a retry, at most: a server that keeps vanishing
    /// and coming back must still run out of attempts.
    static let maxForgivenOutages = 20

    /// Bytes re-requested before the resume point when no validator vouches for the partial file.
    static let overlapLength: Int64 = 64 * 1024

    private var paths: DestinationPaths { runner.paths(for: entry) }

    /// The result of one attempt.
    private struct Attempt {
        var action: Action
        var bytes: Int64 = 0
        var result: Swift.Result<Success, TransferFailure>
        /// After this failure the bytes on disk must not be continued: the next attempt restarts.
        var mustRestart = false

        /// The attempt fetched the file from byte 0.
        var startedFromZero: Bool {
            switch action {
            case .download, .restart, .replace: return true
            default: return false
            }
        }
    }

    private struct Success {
        var outcome: EntryReport.Outcome
        var size: Int64?
        var sha256: String?
    }

    func run() async -> EntryReport {
        if Task.isCancelled {
            // Interrupted before this entry began: touch nothing.
            return failedReport(.cancelled, source: entry.url, action: .download, bytes: 0, attempts: 0)
        }
        var attempts = 0
        var bytes: Int64 = 0
        var lastAction: Action = .download
        var lastFailure: TransferFailure = .cancelled
        var restartReason: String?
        var forgivenOutages = 0
        let sources = [entry.url] + entry.mirrors
        var lastSource = entry.url

        for (index, source) in sources.enumerated() {
            if index > 0 {
                runner.emit(.fallingBack(dest: entry.dest, to: source.display, after: lastFailure))
            }
            let host = HostKey(source)
            let target = conditions.target(for: source)
            lastSource = source
            var failuresHere = 0
            attempting: while true {
                // Outages and Retry-After pauses are waited out without a transfer slot, so a
                // host that asked for ten minutes' rest does not hold up the others.
                if let host, let target {
                    do {
                        try await conditions.gate.beforeAttempt(talkingTo: target)
                        try await conditions.pauses.waitOut(host)
                    } catch let unreachable as ConnectivityGate.Unreachable {
                        lastFailure = Task.isCancelled ? .cancelled : .unreachable(host: unreachable.target.description, waited: unreachable.waited)
                        break attempting
                    } catch {
                        lastFailure = .cancelled
                        break attempting
                    }
                }
                // Given back once the request is done (see `transfer`).
                guard let slot = await runner.slots.acquire() else {
                    lastFailure = .cancelled
                    break attempting
                }
                // While this entry waited for its turn, a pause or an outage may have begun
                // (the entry that met it holds its slot until it is in force): wait again.
                if let host, let target, conditions.pauses.isPaused(host) || conditions.gate.hasTrouble(target) {
                    slot.release()
                    continue attempting
                }
                attempts += 1
                let attempt = await attemptOnce(source, restartReason: restartReason, slot: slot)
                // A Retry-After is in force before the slot goes to the next entry for this host.
                var serverPause: Duration?
                if case .failure(let failure) = attempt.result, case .httpStatus(_, let header?) = failure,
                   failure.isRetryable, let host,
                   let pause = RetryAfter.delay(header, now: Int(time(nil)), cap: runner.options.retryAfterCap) {
                    serverPause = pause
                    runner.emit(.pausedByServer(host: host.description, pause: pause))
                    conditions.pauses.pause(host, for: pause)
                }
                slot.release()
                bytes += attempt.bytes
                lastAction = attempt.action
                switch attempt.result {
                case .success(let success):
                    return EntryReport(
                        dest: entry.dest, url: source.display, action: attempt.action, outcome: success.outcome,
                        bytesTransferred: bytes, size: success.size, attempts: attempts, sha256: success.sha256
                    )
                case .failure(let failure):
                    lastFailure = failure
                    if attempt.mustRestart {
                        restartReason = failure.description
                    } else if attempt.startedFromZero {
                        // The partial file now holds a fresh download: continue it as usual.
                        restartReason = nil
                    }
                }
                if Task.isCancelled || lastFailure == .cancelled { break attempting }

                if lastFailure.isNetworkLevel, let target {
                    do {
                        if try await conditions.gate.afterFailure(talkingTo: target) == .cameBack,
                           forgivenOutages < Self.maxForgivenOutages {
                            // The network was down, not the server: that attempt is not held
                            // against the entry, and the retry goes out at once.
                            forgivenOutages += 1
                            continue attempting
                        }
                    } catch {
                        lastFailure = Task.isCancelled ? .cancelled : .unreachable(host: error.target.description, waited: error.waited)
                        break attempting
                    }
                }
                guard lastFailure.isRetryable, failuresHere < entry.settings.retries else { break attempting }
                failuresHere += 1
                let delay = serverPause ?? runner.options.retryPolicy.delay(afterAttempt: failuresHere, unitRandom: Double.random(in: 0...1))
                runner.emit(.retrying(dest: entry.dest, failure: lastFailure, attempt: failuresHere, delay: delay))
                do {
                    try await Task.sleep(for: delay)
                } catch {
                    lastFailure = .cancelled
                    break attempting
                }
            }
            if lastFailure == .cancelled || Task.isCancelled {
                return failedReport(.cancelled, source: source, action: lastAction, bytes: bytes, attempts: attempts)
            }
            if !Self.worthAnotherSource(lastFailure) { break }
        }
        return failedReport(lastFailure, source: lastSource, action: lastAction, bytes: bytes, attempts: attempts)
    }

    /// Local trouble follows the entry to every source; remote trouble may not.
    private static func worthAnotherSource(_ failure: TransferFailure) -> Bool {
        switch failure {
        case .localIO, .localConflict, .cancelled: return false
        default: return true
        }
    }

    private func failedReport(_ failure: TransferFailure, source: RemoteURL, action: Action, bytes: Int64, attempts: Int) -> EntryReport {
        // What is on disk now, not what an attempt meant to keep: "a partial file is kept"
        // must be true when it is said.
        let partial = attempts == 0 ? nil : (try? LocalFacts.inspect(paths, in: runner.rootDirectory))?.partial.size
        return EntryReport(
            dest: entry.dest, url: source.display, action: action, outcome: .failed(failure),
            bytesTransferred: bytes, size: nil, attempts: attempts, sha256: nil, partialSize: partial
        )
    }

    private func attemptOnce(_ source: RemoteURL, restartReason: String?, slot: TransferSlots.Slot) async -> Attempt {
        let paths = self.paths
        let local: LocalFacts
        do {
            local = try LocalFacts.inspect(paths, in: runner.rootDirectory)
        } catch {
            return Attempt(action: .fail(error), result: .failure(error))
        }
        let (record, recordUnreadable) = runner.readRecord(of: entry, in: store)
        // A store that could not be read may hold a record of another version all the same.
        let hasPartialRecord = record?.partial != nil || recordUnreadable
        if Planner.isPinnedAndVerified(local: local, state: record, pins: entry.pins) {
            runner.emit(.decided(dest: entry.dest, .skip))
            return Attempt(action: .skip, result: .success(Success(
                outcome: .skipped, size: local.destination.size, sha256: entry.sha256)))
        }
        // With nothing on disk the probe would only repeat what the GET's headers say.
        if local.isEmpty {
            runner.emit(.decided(dest: entry.dest, .download))
            return await transfer(source, action: .download, offset: 0, remote: nil, startedFrom: nil, hasPartialRecord: hasPartialRecord, slot: slot)
        }
        let decision = await runner.probeAndDecide(entry, source: source, local: local, record: record)
        let file = decision.remote
        let destinationHash = decision.destinationSHA256
        var action = decision.action
        if let restartReason {
            switch action {
            case .resume, .finish: action = .restart(reason: restartReason)
            default: break
            }
        }
        runner.emit(.decided(dest: entry.dest, action))

        switch action {
        case .skip:
            if local.partial.size != nil {
                runner.rootDirectory.removePartial(paths)
            }
            let verified = Planner.verifiedVersion(local: local, state: record)
            if let file, let identity = local.destinationIdentity, verified == nil || verified?.sha256 == nil {
                // First sight of this DEST (or of its hash): remember what it was found to be,
                // hash included, so later runs and `verify` can tell if it changes.
                var hash = destinationHash ?? ""
                do throws(TransferFailure) {
                    if destinationHash == nil { hash = try runner.hashDestination(paths) }
                } catch {
                    return Attempt(action: .fail(error), result: .failure(error))
                }
                let validators = verified?.validators ?? RemoteValidators(file)
                updateRecord { $0.complete = CompleteVersion(validators: validators, sha256: hash, local: identity); $0.partial = nil }
                return Attempt(action: action, result: .success(Success(outcome: .skipped, size: local.destination.size, sha256: hash)))
            }
            if local.partial.size != nil {
                updateRecord { $0.partial = nil }
            }
            return Attempt(action: action, result: .success(Success(
                outcome: .skipped, size: local.destination.size, sha256: verified?.sha256)))
        case .fail(let failure):
            return Attempt(action: action, result: .failure(failure))
        case .download, .restart, .replace:
            if record?.partial != nil {
                // A new download: what the store said about an earlier partial file is void.
                updateRecord { $0.partial = nil }
            }
            return await transfer(source, action: action, offset: 0, remote: file, startedFrom: nil, hasPartialRecord: hasPartialRecord,
                                  slot: slot, keeping: Planner.verifiedVersion(local: local, state: record))
        case .resume(let from, .partial):
            return await transfer(source, action: action, offset: from, remote: file, startedFrom: record?.partial, hasPartialRecord: hasPartialRecord, slot: slot)
        case .resume(let from, .destination):
            // Continue a copy of the short DEST as the partial file: DEST itself stays as it is
            // until a complete, verified file is renamed over it.
            // The copy is resumed with the overlap check, never with a record: one of another
            // version must go first, even if this attempt fails before any reply.
            if hasPartialRecord, let refused = clearPartialRecord() {
                return Attempt(action: action, result: .failure(refused))
            }
            do {
                try runner.rootDirectory.copyPrefix(paths, length: from, durable: runner.options.durable)
            } catch {
                return Attempt(action: action, result: .failure(error))
            }
            return await transfer(source, action: action, offset: from, remote: file, startedFrom: nil, hasPartialRecord: hasPartialRecord, slot: slot)
        case .finish(let size):
            // Only the disk from here on.
            slot.release()
            return await finishPartial(action: action, size: size, remote: file)
        }
    }

    /// GETs the file from `offset` into the partial file, then verifies and commits it.
    /// - Parameters:
    ///   - startedFrom: validators of the version the partial file holds, if recorded.
    ///   - hasPartialRecord: the store held a partial-file record for this entry when the
    ///     attempt began (perhaps of another version, perhaps cleared since).
    ///   - keeping: the version `DEST` is known to hold; a download of the same bytes leaves
    ///     `DEST` as it is (see `verifyAndCommitNow`).
    private func transfer(
        _ source: RemoteURL, action: Action, offset: Int64, remote: RemoteFile?, startedFrom: RemoteValidators?,
        hasPartialRecord: Bool, slot: TransferSlots.Slot, keeping: CompleteVersion? = nil
    ) async -> Attempt {
        let paths = self.paths
        var attempt = Attempt(action: action, result: .failure(.cancelled))
        let fd: Int32
        do {
            fd = try runner.rootDirectory.openPartial(paths, truncate: offset == 0, durable: runner.options.durable)
        } catch {
            attempt.result = .failure(error)
            return attempt
        }
        let hasher = TrailingHasher(fd: fd, path: paths.partial, startWriteback: runner.options.durable)
        var committed = false
        defer {
            if !committed {
                hasher.abandon()
                close(fd)
            }
        }

        let resumeGuard = offset > 0 ? ResumeGuard.choose(recorded: startedFrom, current: remote) : nil
        let validator = resumeGuard?.ifRange
        var overlap: [UInt8] = []
        do throws(TransferFailure) {
            let size = try FileSystem.size(of: fd, path: paths.partial)
            if size < offset {
                attempt.mustRestart = true
                attempt.result = .failure(.rangeMismatch("partial file shrank to \(size) bytes while resuming from \(offset)"))
                return attempt
            }
            if size > offset, ftruncate(fd, off_t(offset)) != 0 {
                throw .localIO(path: paths.partial, operation: "truncate", errno: errno)
            }
            if offset > 0 { hasher.advance(to: offset) }
            if resumeGuard?.checksOverlap == true {
                overlap = try FileSystem.read(fd: fd, path: paths.partial, at: offset - min(Self.overlapLength, offset), count: Int(min(Self.overlapLength, offset)))
            }
        } catch {
            attempt.result = .failure(error)
            return attempt
        }
        let firstByte = offset - Int64(overlap.count)

        let ticket = runner.options.progress?.startTransfer(dest: entry.dest, total: remote?.size.map { $0 - offset })
        let store = self.store
        let dest = entry.dest, url = source.display, partialPath = paths.partial, rootDirectory = runner.rootDirectory
        let writer = PartialFileWriter(
            fd: fd, path: paths.partial, requestedOffset: firstByte, expectedTotal: remote?.size,
            pinnedSize: entry.size, maxSize: entry.settings.maxSize, hasher: hasher, progress: ticket,
            startedFrom: validator == nil ? nil : startedFrom, overlap: overlap,
            onStart: { head, from in
                // Record which version the partial file holds before its first byte is written,
                // so a later run (even after kill -9) resumes only that version.
                guard let store else { return nil }
                // Continuing the recorded version: the record already says so.
                if from > 0 && startedFrom != nil { return nil }
                // A file no longer than the overlap needs no record (a resume re-reads all of
                // it), but a record of another version must go.
                let small = head.totalSize.map { $0 <= Self.overlapLength } ?? false
                if small && !hasPartialRecord { return nil }
                let validators = small ? nil : RemoteValidators(etag: head.etag, lastModified: head.lastModified, size: head.totalSize)
                do {
                    try store.update(dest: dest, url: url) { $0.partial = validators }
                } catch {
                    // With no record at all, the next run checks the overlap: nothing is at
                    // risk. A record of another version would vouch for these bytes and let a
                    // resume splice that version onto them: write none, and keep no partial
                    // file for that record to vouch for.
                    guard hasPartialRecord else { return nil }
                    rootDirectory.removePartial(paths)
                    return .localConflict("cannot record in \(store.path) which version \(partialPath) holds (\(error)), and the record there is of another version; not writing to it")
                }
                return nil
            }
        )
        let request = TransferRequest(
            url: source.string, method: .get, headers: entry.settings.headers,
            rangeFirst: firstByte > 0 || offset > 0 ? firstByte : nil, ifRange: validator,
            timeout: entry.settings.timeout, minSpeed: entry.settings.minSpeed,
            minSpeedTime: entry.settings.minSpeedTime, insecure: entry.settings.insecure,
            certificateAuthorities: entry.settings.certificateAuthorities, login: source.login, ftpTLS: entry.settings.ftpTLS,
            protocols: RedirectRule.protocols(forScheme: RemoteProbe.scheme(of: source.string))
        )
        let fetched = await runner.fetcher.fetch(request, sink: writer)
        ticket?.finish()
        attempt.bytes = writer.bytesWritten
        if case .write(from: 0, _)? = writer.placement, firstByte > 0 {
            attempt.action = .restart(reason: "the server answered the range request with the whole file")
        }

        if let failure = fetched.redirectFailure ?? writer.failure ?? fetched.outcome.transportFailure?.redactingHost(of: source) {
            switch failure {
            case .rangeMismatch:
                // The bytes on disk are not (or not provably) the server's: never resume them,
                // in this run or the next.
                attempt.mustRestart = true
                discardPartial()
            case .bodyTooLarge, .sizePinConflict:
                discardPartial()
            case .localIO(_, _, let code) where code == ENOSPC || code == EDQUOT:
                // Give the space back, so the entries after this one can still be written.
                discardPartial()
            default:
                removeIfEmpty(fd)
            }
            attempt.result = .failure(failure)
            return attempt
        }
        guard let head = writer.head, let placement = writer.placement else {
            removeIfEmpty(fd)
            attempt.result = .failure(.curl(code: 0, message: "the server sent no response", osErrno: 0))
            return attempt
        }
        let size: Int64
        switch placement {
        case .alreadyComplete(let total):
            size = total
        case .write(_, var total):
            if total == nil, remote == nil, !head.isChunked,
               case .available(let probed) = await runner.probe.probe(source, settings: entry.settings) {
                // The body ended when the connection closed and nothing said how long it is:
                // ask, as the probe skipped for a new file would have.
                total = probed.size
            }
            if let total, writer.position < total {
                attempt.result = .failure(.partialBody(received: writer.position, expected: total))
                return attempt
            }
            if let total, writer.position > total {
                // Longer than the server's own size: nothing in it is worth resuming.
                discardPartial()
                attempt.result = .failure(.sizeMismatch(expected: total, actual: writer.position))
                return attempt
            }
            size = writer.position
        case .reject(let failure):
            attempt.result = .failure(failure)
            return attempt
        }
        let validators = RemoteValidators(
            etag: head.etag ?? remote?.etag, lastModified: head.lastModified ?? remote?.lastModified, size: size)
        // The network part is over: the next entry may start its request while this file is
        // checked, fsync'd and renamed. (A failed attempt keeps the slot until its Retry-After,
        // if any, is in force; see `run`.)
        slot.release()
        attempt.result = await verifyAndCommit(
            fd: fd, size: size, digest: { () throws(TransferFailure) in try hasher.finish(size: size) }, validators: validators,
            keeping: keeping)
        if case .success = attempt.result { committed = true }
        return attempt
    }

    /// `DEST.part` already holds the whole file of the recorded version: check it like a
    /// finished download.
    private func finishPartial(action: Action, size: Int64, remote: RemoteFile?) async -> Attempt {
        let paths = self.paths
        var attempt = Attempt(action: action, result: .failure(.cancelled))
        let fd: Int32
        do {
            fd = try runner.rootDirectory.openPartial(paths, truncate: false, durable: runner.options.durable)
        } catch {
            attempt.result = .failure(error)
            return attempt
        }
        let hasher = SHA256Hasher()
        do {
            try hasher.update(fileDescriptor: fd, length: size, path: paths.partial)
        } catch {
            close(fd)
            attempt.result = .failure(error)
            return attempt
        }
        let validators = RemoteValidators(etag: remote?.etag, lastModified: remote?.lastModified, size: size)
        let digest = hasher.finalize()
        attempt.result = await verifyAndCommit(fd: fd, size: size, digest: { digest }, validators: validators)
        if case .failure = attempt.result { close(fd) }
        return attempt
    }

    /// Checks the pins, then renames the partial file into place and records the version. A
    /// file that fails a pin is deleted: it must never land under `DEST`, and keeping it would
    /// only resume bad bytes. Closes `fd` on success.
    ///
    /// Runs on the run's blocking pool: `digest` may wait for the hashing thread, and the
    /// fsyncs wait for the disk.
    private func verifyAndCommit(
        fd: Int32, size: Int64, digest: @escaping @Sendable () throws(TransferFailure) -> String, validators: RemoteValidators,
        keeping: CompleteVersion? = nil
    ) async -> Swift.Result<Success, TransferFailure> {
        await runner.blocking.run { [self] in
            verifyAndCommitNow(fd: fd, size: size, digest: digest, validators: validators, keeping: keeping)
        }
    }

    /// - Parameter keeping: the version `DEST` held when the attempt began. When the download
    ///   has the same bytes and `DEST` was not touched since, `DEST` stays as it is (its date,
    ///   its inode) and the entry is up to date: a file fetched again only to compare it (the
    ///   server names no version) or one whose server changed its validators but not its bytes.
    private func verifyAndCommitNow(
        fd: Int32, size: Int64, digest: () throws(TransferFailure) -> String, validators: RemoteValidators,
        keeping: CompleteVersion? = nil
    ) -> Swift.Result<Success, TransferFailure> {
        let paths = self.paths
        do {
            let digest = try digest()
            let onDisk = try FileSystem.size(of: fd, path: paths.partial)
            if onDisk != size {
                return .failure(.sizeMismatch(expected: size, actual: onDisk))
            }
            if let pinned = entry.size, pinned != size {
                discardPartial()
                return .failure(.sizeMismatch(expected: pinned, actual: size))
            }
            if let pin = entry.sha256, digest != pin {
                discardPartial()
                return .failure(.checksumMismatch(expected: pin, actual: digest))
            }
            if let keeping, keeping.sha256 == digest, keeping.local.size == size,
               let destination = try? runner.rootDirectory.openDestination(paths) {
                defer { close(destination) }
                if (try? LocalIdentity.of(fd: destination, path: paths.destination)) == keeping.local {
                    close(fd)
                    runner.rootDirectory.removePartial(paths)
                    // The same bytes, perhaps under a new date: DEST takes it, as a download would,
                    // so that its date still names its version if the record is ever lost.
                    var local = keeping.local
                    let modified = validators.lastModified.flatMap(HTTPDate.parse)
                    if modified != nil,
                       (try? FileSystem.prepareForCommit(fd: destination, path: paths.destination, modified: modified, durable: false)) != nil,
                       let identity = try? LocalIdentity.of(fd: destination, path: paths.destination) {
                        local = identity
                    }
                    updateRecord { record in
                        record.partial = nil
                        record.complete = CompleteVersion(validators: validators, sha256: digest, local: local)
                    }
                    return .success(Success(outcome: .skipped, size: size, sha256: digest))
                }
            }
            try runner.rootDirectory.commit(
                fd: fd, paths, modified: validators.lastModified.flatMap(HTTPDate.parse),
                directories: runner.options.durable ? runner.directorySync : nil
            )
            let identity = try? LocalIdentity.of(fd: fd, path: paths.destination)
            close(fd)
            updateRecord { record in
                record.partial = nil
                record.complete = identity.map { CompleteVersion(validators: validators, sha256: digest, local: $0) }
            }
            return .success(Success(outcome: .transferred, size: size, sha256: digest))
        } catch {
            if case .localIO(_, _, let code) = error, code == ENOSPC || code == EDQUOT { discardPartial() }
            return .failure(error)
        }
    }

    /// Removes the store's partial-file record; the refusal to give when that fails.
    private func clearPartialRecord() -> TransferFailure? {
        guard let store else { return nil }
        do {
            try store.update(dest: entry.dest, url: entry.url.display) { $0.partial = nil }
            return nil
        } catch {
            return .localConflict("cannot clear in \(store.path) the record of another version of \(paths.partial) (\(error)); not writing to it")
        }
    }

    /// Deletes the partial file and what the store recorded about it.
    private func discardPartial() {
        runner.rootDirectory.removePartial(paths)
        updateRecord { $0.partial = nil }
    }

    /// An empty partial file holds nothing worth resuming: leave no trace of a failed start.
    private func removeIfEmpty(_ fd: Int32) {
        if (try? FileSystem.size(of: fd, path: paths.partial)) == 0 {
            runner.rootDirectory.removePartial(paths)
        }
    }

    private func updateRecord(_ change: (inout StateRecord) -> Void) {
        guard let store else { return }
        do {
            try store.update(dest: entry.dest, url: entry.url.display, change)
        } catch {
            runner.emit(.stateStoreProblem("writing \(store.path): \(error)"))
        }
    }
}
