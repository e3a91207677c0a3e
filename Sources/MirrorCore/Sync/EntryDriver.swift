import Glibc

/// Carries out what an entry's `EntryMachine` decides: the waits, the requests, the file
/// operations and the store's writes, and hands each outcome back to the machine. Decides
/// nothing itself.
///
/// Data rules kept by what it does: bytes land only in the partial file; `DEST` appears only by
/// renaming a complete, verified, fsync'd partial file over it; an existing `DEST` is never
/// deleted or written in place; cleanup removes only partial files.
struct EntryDriver {
    let entry: Entry
    let runner: ManifestRunner
    let store: StateStore?
    let conditions: HostConditions

    /// Bytes re-requested before the resume point when no validator vouches for the partial file.
    static let overlapLength: Int64 = 64 * 1024

    private var paths: DestinationPaths { runner.paths(for: entry) }
    private var sources: [RemoteURL] { [entry.url] + entry.mirrors }

    /// The partial file of the attempt in progress, open from the transfer (or the finishing
    /// hash) until it is committed or the attempt ends.
    private final class OpenPartial: @unchecked Sendable {
        let fd: Int32
        let hasher: TrailingHasher?
        var committed = false

        init(fd: Int32, hasher: TrailingHasher?) {
            self.fd = fd
            self.hasher = hasher
        }

        func close() {
            if !committed {
                hasher?.abandon()
                _ = Glibc.close(fd)
            }
            committed = true
        }
    }

    func run() async -> EntryReport {
        var machine = EntryMachine(
            sourceCount: sources.count, retries: entry.settings.retries, pins: entry.pins, sizePin: entry.size)
        var slot: TransferSlots.Slot?
        var partial: OpenPartial?
        var pending: [EntryMachine.Effect] = machine.handle(.start(cancelled: Task.isCancelled))
        defer {
            partial?.close()
            slot?.release()
        }
        while !pending.isEmpty {
            let effect = pending.removeFirst()
            if effect.endsAttemptFile {
                partial?.close()
                partial = nil
            }
            var answer: EntryMachine.Event?
            switch effect {
            case .finish(let outcome):
                return report(outcome, machine: machine)
            case .announce(let notice):
                announce(notice)
            case .awaitHost(let index):
                answer = await awaitHost(sources[index])
            case .acquireSlot:
                if let granted = await runner.slots.acquire() {
                    slot = granted
                    answer = .slotGranted(hostTroubled: isTroubled(sources[machine.source]))
                } else {
                    answer = .slotDenied
                }
            case .releaseSlot:
                slot?.release()
                slot = nil
            case .inspect:
                answer = inspect()
            case .probe(let index):
                let facts = await runner.probe.probe(sources[index], settings: entry.settings)
                runner.emit(.probed(dest: entry.dest, url: sources[index].display, facts))
                answer = .probed(facts)
            case .measureBody(let index):
                answer = .bodyMeasured(await runner.probe.probe(sources[index], settings: entry.settings))
            case .hashDestination:
                let paths = self.paths
                let runner = self.runner
                answer = .destinationHashed(await runner.blocking.run {
                    Result { () throws(TransferFailure) in try runner.hashDestination(paths) }
                })
            case .prepare(let length, let clearingRecord):
                answer = .prepared(prepare(copyLength: length, clearingRecord: clearingRecord))
            case .transfer(let order):
                partial?.close()
                let (end, opened) = await transfer(order)
                partial = opened
                answer = .transferEnded(end)
            case .finishHash(let size):
                if partial == nil {
                    do {
                        partial = OpenPartial(fd: try runner.rootDirectory.openPartial(paths, truncate: false, durable: runner.options.durable), hasher: nil)
                    } catch {
                        answer = .hashed(.failure(error))
                        break
                    }
                }
                answer = .hashed(await finishHash(partial!, size: size))
            case .keepDestination(let version, let validators, let sha256):
                let kept = await keepDestination(version, validators: validators)
                if kept != nil {
                    partial?.close()
                    partial = nil
                }
                _ = sha256
                answer = kept.map { .kept($0) } ?? .keepRefused
            case .commit(let validators, _):
                guard let open = partial else {
                    answer = .committed(.failure(.localConflict("internal error: no partial file to commit")))
                    break
                }
                let result = await commit(open, validators: validators)
                if case .success = result {
                    open.committed = true
                    partial = nil
                }
                answer = .committed(result)
            case .record(let change):
                record(change)
            case .removePartial:
                runner.rootDirectory.removePartial(paths)
            case .removePartialIfEmpty:
                // An empty partial file holds nothing worth resuming: leave no trace of a failed start.
                if let partial, (try? FileSystem.size(of: partial.fd, path: paths.partial)) == 0 {
                    runner.rootDirectory.removePartial(paths)
                }
            case .pauseHost(let index, let header):
                if let host = HostKey(sources[index]),
                   let pause = RetryAfter.delay(header, now: Int(time(nil)), cap: runner.options.retryAfterCap) {
                    runner.emit(.pausedByServer(host: host.description, pause: pause))
                    conditions.pauses.pause(host, for: pause)
                }
            case .checkConnectivity(let index):
                answer = .connectivityChecked(await checkConnectivity(sources[index]))
            case .backOff(let attempt, let failure, let header):
                if Task.isCancelled {
                    answer = .backOffEnded(cancelled: true)
                    break
                }
                let serverPause = header.flatMap { RetryAfter.delay($0, now: Int(time(nil)), cap: runner.options.retryAfterCap) }
                let delay = serverPause ?? runner.options.retryPolicy.delay(afterAttempt: attempt, unitRandom: Double.random(in: 0...1))
                runner.emit(.retrying(dest: entry.dest, failure: failure, attempt: attempt, delay: delay))
                do {
                    try await Task.sleep(for: delay)
                    answer = .backOffEnded(cancelled: false)
                } catch {
                    answer = .backOffEnded(cancelled: true)
                }
            }
            if let answer {
                pending = machine.handle(answer) + pending
            }
        }
        return report(.failed(.localConflict("internal error: the entry ended without a result"), action: .download, inspectPartial: true), machine: machine)
    }

    // MARK: Effects

    private func announce(_ notice: EntryMachine.Notice) {
        switch notice {
        case .decided(let action):
            runner.emit(.decided(dest: entry.dest, action))
        case .fallingBack(let index, let failure):
            runner.emit(.fallingBack(dest: entry.dest, to: sources[index].display, after: failure))
        }
    }

    /// Outages and Retry-After pauses are waited out without a transfer slot, so a host that
    /// asked for ten minutes' rest does not hold up the others.
    private func awaitHost(_ source: RemoteURL) async -> EntryMachine.Event {
        if Task.isCancelled { return .hostUnavailable(.cancelled) }
        guard let host = HostKey(source), let target = conditions.target(for: source) else { return .hostReady }
        do {
            try await conditions.gate.beforeAttempt(talkingTo: target)
            try await conditions.pauses.waitOut(host)
            return .hostReady
        } catch let unreachable as ConnectivityGate.Unreachable {
            return .hostUnavailable(Task.isCancelled ? .cancelled : .unreachable(host: unreachable.target.description, waited: unreachable.waited))
        } catch {
            return .hostUnavailable(.cancelled)
        }
    }

    private func isTroubled(_ source: RemoteURL) -> Bool {
        guard let host = HostKey(source), let target = conditions.target(for: source) else { return false }
        return conditions.pauses.isPaused(host) || conditions.gate.hasTrouble(target)
    }

    private func checkConnectivity(_ source: RemoteURL) async -> EntryMachine.ConnectivityVerdict {
        if Task.isCancelled { return .gaveUp(.cancelled) }
        guard let target = conditions.target(for: source) else { return .reachable }
        do {
            return try await conditions.gate.afterFailure(talkingTo: target) == .cameBack ? .cameBack : .reachable
        } catch {
            return .gaveUp(Task.isCancelled ? .cancelled : .unreachable(host: error.target.description, waited: error.waited))
        }
    }

    private func inspect() -> EntryMachine.Event {
        let local: LocalFacts
        do {
            local = try LocalFacts.inspect(paths, in: runner.rootDirectory)
        } catch {
            return .inspectionFailed(error)
        }
        let (record, unreadable) = runner.readRecord(of: entry, in: store)
        return .inspected(local, record: record, recordUnreadable: unreadable)
    }

    private func prepare(copyLength: Int64?, clearingRecord: Bool) -> TransferFailure? {
        if clearingRecord, let store {
            do {
                try store.update(dest: entry.dest, url: entry.url.display) { $0.partial = nil }
            } catch {
                return .localConflict("cannot clear in \(store.path) the record of another version of \(paths.partial) (\(error)); not writing to it")
            }
        }
        if let copyLength {
            do {
                try runner.rootDirectory.copyPrefix(paths, length: copyLength, durable: runner.options.durable)
            } catch {
                return error
            }
        }
        return nil
    }

    private func record(_ change: EntryMachine.RecordChange) {
        guard let store else { return }
        do {
            try store.update(dest: entry.dest, url: entry.url.display) { record in
                switch change {
                case .clearPartial:
                    record.partial = nil
                case .complete(let version):
                    record.partial = nil
                    record.complete = version
                }
            }
        } catch {
            runner.emit(.stateStoreProblem("writing \(store.path): \(error)"))
        }
    }

    /// GETs the file from `order.offset` into the partial file. The file stays open for the
    /// hash and the commit that follow.
    private func transfer(_ order: EntryMachine.TransferOrder) async -> (EntryMachine.TransferEnd, OpenPartial?) {
        let paths = self.paths
        let source = sources[order.source]
        let offset = order.offset
        let fd: Int32
        do {
            fd = try runner.rootDirectory.openPartial(paths, truncate: offset == 0, durable: runner.options.durable)
        } catch {
            return (.notStarted(error, mustRestart: false), nil)
        }
        let hasher = TrailingHasher(fd: fd, path: paths.partial, startWriteback: runner.options.durable)
        let open = OpenPartial(fd: fd, hasher: hasher)

        let resumeGuard = offset > 0 ? ResumeGuard.choose(recorded: order.startedFrom, current: order.remote) : nil
        let validator = resumeGuard?.ifRange
        var overlap: [UInt8] = []
        do throws(TransferFailure) {
            let size = try FileSystem.size(of: fd, path: paths.partial)
            if size < offset {
                return (.notStarted(.rangeMismatch("partial file shrank to \(size) bytes while resuming from \(offset)"), mustRestart: true), open)
            }
            if size > offset, ftruncate(fd, off_t(offset)) != 0 {
                throw .localIO(path: paths.partial, operation: "truncate", errno: errno)
            }
            if offset > 0 { hasher.advance(to: offset) }
            if resumeGuard?.checksOverlap == true {
                overlap = try FileSystem.read(fd: fd, path: paths.partial, at: offset - min(Self.overlapLength, offset), count: Int(min(Self.overlapLength, offset)))
            }
        } catch {
            return (.notStarted(error, mustRestart: false), open)
        }
        let firstByte = offset - Int64(overlap.count)

        let ticket = runner.options.progress?.startTransfer(dest: entry.dest, total: order.remote?.size.map { $0 - offset })
        let writer = PartialFileWriter(
            fd: fd, path: paths.partial, requestedOffset: firstByte, expectedTotal: order.remote?.size,
            pinnedSize: entry.size, maxSize: entry.settings.maxSize, hasher: hasher, progress: ticket,
            startedFrom: validator == nil ? nil : order.startedFrom, overlap: overlap,
            onStart: TransferStartRecord(
                store: store, dest: entry.dest, url: source.display, paths: paths, rootDirectory: runner.rootDirectory,
                continuingRecord: order.startedFrom != nil, hadPartialRecord: order.hadPartialRecord
            ).write
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
        let bytes = writer.bytesWritten
        if let failure = fetched.redirectFailure ?? writer.failure ?? fetched.outcome.transportFailure?.redactingHost(of: source) {
            return (.failed(failure, bytes: bytes), open)
        }
        guard let head = writer.head, let placement = writer.placement else {
            return (.noResponse(bytes: bytes), open)
        }
        let summary = EntryMachine.ResponseHeadSummary(etag: head.etag, lastModified: head.lastModified, isChunked: head.isChunked)
        switch placement {
        case .alreadyComplete(let total):
            return (.alreadyComplete(total: total, head: summary), open)
        case .write(let from, let total):
            return (.written(position: writer.position, total: total, bytes: bytes,
                             restartedFromZero: from == 0 && firstByte > 0, head: summary), open)
        case .reject(let failure):
            return (.rejected(failure, bytes: bytes), open)
        }
    }

    /// The partial file's SHA-256 (finished on the run's blocking pool, where waiting for the
    /// hashing thread or reading the file stalls no transfer) and its size on disk.
    private func finishHash(_ open: OpenPartial, size: Int64) async -> Result<EntryMachine.HashedFile, TransferFailure> {
        let path = paths.partial
        return await runner.blocking.run {
            Result { () throws(TransferFailure) -> EntryMachine.HashedFile in
                let digest: String
                if let hasher = open.hasher {
                    digest = try hasher.finish(size: size)
                } else {
                    let hasher = SHA256Hasher()
                    try hasher.update(fileDescriptor: open.fd, length: size, path: path)
                    digest = hasher.finalize()
                }
                return EntryMachine.HashedFile(sha256: digest, sizeOnDisk: try FileSystem.size(of: open.fd, path: path))
            }
        }
    }

    /// When `DEST` is still the file `version` describes (not touched since the attempt
    /// began), it stays as it is (its inode), takes the new date, and the partial file goes:
    /// the download had the same bytes. Nil when `DEST` changed.
    private func keepDestination(_ version: CompleteVersion, validators: RemoteValidators) async -> LocalIdentity? {
        let paths = self.paths
        let rootDirectory = runner.rootDirectory
        return await runner.blocking.run { () -> LocalIdentity? in
            guard let destination = try? rootDirectory.openDestination(paths) else { return nil }
            defer { close(destination) }
            guard (try? LocalIdentity.of(fd: destination, path: paths.destination)) == version.local else { return nil }
            rootDirectory.removePartial(paths)
            // The same bytes, perhaps under a new date: DEST takes it, as a download would, so
            // that its date still names its version if the record is ever lost.
            var local = version.local
            let modified = validators.lastModified.flatMap(HTTPDate.parse)
            if modified != nil,
               (try? FileSystem.prepareForCommit(fd: destination, path: paths.destination, modified: modified, durable: false)) != nil,
               let identity = try? LocalIdentity.of(fd: destination, path: paths.destination) {
                local = identity
            }
            return local
        }
    }

    /// Renames the partial file into place (dated, fsync'd). Its identity after the rename, when
    /// it can be read.
    private func commit(_ open: OpenPartial, validators: RemoteValidators) async -> Result<LocalIdentity?, TransferFailure> {
        let paths = self.paths
        let runner = self.runner
        return await runner.blocking.run {
            Result { () throws(TransferFailure) -> LocalIdentity? in
                try runner.rootDirectory.commit(
                    fd: open.fd, paths, modified: validators.lastModified.flatMap(HTTPDate.parse),
                    directories: runner.options.durable ? runner.directorySync : nil
                )
                let identity = try? LocalIdentity.of(fd: open.fd, path: paths.destination)
                close(open.fd)
                return identity
            }
        }
    }

    private func report(_ outcome: EntryMachine.Outcome, machine: EntryMachine) -> EntryReport {
        let source = sources[machine.source].display
        switch outcome {
        case .succeeded(let result, let action, let size, let sha256):
            return EntryReport(
                dest: entry.dest, url: source, action: action, outcome: result,
                bytesTransferred: machine.bytes, size: size, attempts: machine.attempts, sha256: sha256)
        case .failed(let failure, let action, let inspectPartial):
            // What is on disk now, not what an attempt meant to keep: "a partial file is kept"
            // must be true when it is said.
            let partial = inspectPartial ? (try? LocalFacts.inspect(paths, in: runner.rootDirectory))?.partial.size : nil
            return EntryReport(
                dest: entry.dest, url: source, action: action, outcome: .failed(failure),
                bytesTransferred: machine.bytes, size: nil, attempts: machine.attempts, sha256: nil, partialSize: partial)
        }
    }
}

extension EntryMachine.Effect {
    /// After this effect the attempt's partial file is no longer needed open.
    var endsAttemptFile: Bool {
        switch self {
        case .checkConnectivity, .backOff, .awaitHost, .finish: return true
        default: return false
        }
    }
}
