import Glibc

/// Syncs one entry: plan, act, verify, commit; retries with backoff; falls back to mirrors.
///
/// Data rules kept here: bytes land only in the partial file; `DEST` appears only by renaming
/// a complete, verified, fsync'd partial file over it; an existing `DEST` is never deleted or
/// written in place; cleanup removes only partial files.
struct EntrySync {
    let entry: Entry
    let runner: ManifestRunner

    private var paths: DestinationPaths { runner.paths(for: entry) }
    private var pins: Pins { Pins(size: entry.size, sha256: entry.sha256) }

    /// The result of one attempt.
    private struct Attempt {
        var action: Action
        var bytes: Int64 = 0
        var result: Swift.Result<Success, TransferFailure>
        /// After this failure the bytes on disk must not be continued: the next attempt restarts.
        var mustRestart = false
    }

    private struct Success {
        var outcome: EntryReport.Outcome
        var size: Int64?
        var sha256: String?
    }

    func run() async -> EntryReport {
        var attempts = 0
        var bytes: Int64 = 0
        var lastAction: Action = .download
        var lastFailure: TransferFailure = .cancelled
        var restartReason: String?
        let sources = [entry.url] + entry.mirrors

        for (index, source) in sources.enumerated() {
            if index > 0 {
                runner.emit(.fallingBack(dest: entry.dest, to: source.display, after: lastFailure))
            }
            var failuresHere = 0
            while true {
                attempts += 1
                let attempt = await attemptOnce(source, restartReason: restartReason)
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
                    if attempt.mustRestart { restartReason = failure.description }
                }
                if Task.isCancelled || lastFailure == .cancelled {
                    return failedReport(.cancelled, source: source, action: lastAction, bytes: bytes, attempts: attempts)
                }
                guard lastFailure.isRetryable, failuresHere < entry.settings.retries else { break }
                failuresHere += 1
                let delay = runner.options.retryPolicy.delay(afterAttempt: failuresHere, unitRandom: Double.random(in: 0...1))
                runner.emit(.retrying(dest: entry.dest, failure: lastFailure, attempt: failuresHere, delay: delay))
                do {
                    try await Task.sleep(for: delay)
                } catch {
                    return failedReport(.cancelled, source: source, action: lastAction, bytes: bytes, attempts: attempts)
                }
            }
            if !Self.worthAnotherSource(lastFailure) { break }
        }
        return failedReport(lastFailure, source: sources.last!, action: lastAction, bytes: bytes, attempts: attempts)
    }

    /// Local trouble follows the entry to every source; remote trouble may not.
    private static func worthAnotherSource(_ failure: TransferFailure) -> Bool {
        switch failure {
        case .localIO, .localConflict, .cancelled: return false
        default: return true
        }
    }

    private func failedReport(_ failure: TransferFailure, source: RemoteURL, action: Action, bytes: Int64, attempts: Int) -> EntryReport {
        EntryReport(
            dest: entry.dest, url: source.display, action: action, outcome: .failed(failure),
            bytesTransferred: bytes, size: nil, attempts: attempts, sha256: nil
        )
    }

    private func attemptOnce(_ source: RemoteURL, restartReason: String?) async -> Attempt {
        let paths = self.paths
        let local: LocalFacts
        do {
            local = try LocalFacts.inspect(paths)
        } catch {
            return Attempt(action: .fail(error), result: .failure(error))
        }
        // With nothing on disk the probe would only repeat what the GET's headers say.
        if local.isEmpty {
            runner.emit(.decided(dest: entry.dest, .download))
            return await transfer(source, action: .download, offset: 0, remote: nil)
        }
        let remote = await runner.probe.probe(source, settings: entry.settings)
        runner.emit(.probed(dest: entry.dest, url: source.display, remote))
        var destinationHash: String?
        if Planner.needsDestinationHash(local: local, remote: remote, pins: pins) {
            do {
                destinationHash = try ManifestRunner.hashFile(paths.destination)
            } catch {
                return Attempt(action: .fail(error), result: .failure(error))
            }
        }
        var action = Planner.decide(local: local, remote: remote, pins: pins, destinationSHA256: destinationHash)
        if let restartReason {
            switch action {
            case .resume, .finish: action = .restart(reason: restartReason)
            default: break
            }
        }
        runner.emit(.decided(dest: entry.dest, action))
        var file: RemoteFile?
        if case .available(let available) = remote { file = available }

        switch action {
        case .skip:
            if local.partial.size != nil { FileSystem.remove(paths.partial) }
            return Attempt(action: action, result: .success(Success(
                outcome: .skipped, size: local.destination.size, sha256: destinationHash)))
        case .fail(let failure):
            return Attempt(action: action, result: .failure(failure))
        case .download, .restart, .replace:
            return await transfer(source, action: action, offset: 0, remote: file)
        case .resume(let from, .partial):
            return await transfer(source, action: action, offset: from, remote: file)
        case .resume(let from, .destination):
            // Continue a copy of the short DEST as the partial file: DEST itself stays as it is
            // until a complete, verified file is renamed over it.
            do {
                try FileSystem.makeDirectories(paths.directory)
                try FileSystem.copyPrefix(of: paths.destination, to: paths.partial, length: from)
            } catch {
                return Attempt(action: action, result: .failure(error))
            }
            return await transfer(source, action: action, offset: from, remote: file)
        case .finish(let size):
            return finishPartial(action: action, size: size, remote: file)
        }
    }

    /// GETs the file from `offset` into the partial file, then verifies and commits it.
    private func transfer(_ source: RemoteURL, action: Action, offset: Int64, remote: RemoteFile?) async -> Attempt {
        let paths = self.paths
        var attempt = Attempt(action: action, result: .failure(.cancelled))
        let fd: Int32
        do {
            try FileSystem.makeDirectories(paths.directory)
            fd = try FileSystem.openPartial(paths.partial, truncate: offset == 0)
        } catch {
            attempt.result = .failure(error)
            return attempt
        }
        var committed = false
        defer { if !committed { close(fd) } }

        let hasher = entry.sha256 == nil ? nil : SHA256Hasher()
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
            if offset > 0 { try hasher?.update(fileDescriptor: fd, length: offset, path: paths.partial) }
        } catch {
            attempt.result = .failure(error)
            return attempt
        }

        let ticket = runner.options.progress?.startTransfer(dest: entry.dest, total: remote?.size.map { $0 - offset })
        let writer = PartialFileWriter(
            fd: fd, path: paths.partial, requestedOffset: offset, expectedTotal: remote?.size,
            pinnedSize: entry.size, maxSize: entry.settings.maxSize, hasher: hasher, progress: ticket
        )
        let request = TransferRequest(
            url: source.string, method: .get, headers: entry.settings.headers,
            rangeFirst: offset > 0 ? offset : nil, timeout: entry.settings.timeout,
            insecure: entry.settings.insecure,
            protocols: RedirectRule.protocols(forScheme: RemoteProbe.scheme(of: source.string))
        )
        let fetched = await runner.fetcher.fetch(request, sink: writer)
        ticket?.finish()
        attempt.bytes = writer.bytesWritten
        if case .write(from: 0, _)? = writer.placement, offset > 0 {
            attempt.action = .restart(reason: "the server answered the range request with the whole file")
        }

        if let failure = fetched.redirectFailure ?? writer.failure ?? fetched.outcome.transportFailure {
            switch failure {
            case .rangeMismatch:
                attempt.mustRestart = true
            case .bodyTooLarge, .sizePinConflict, .encodedBody:
                FileSystem.remove(paths.partial)
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
        case .write(_, let total):
            if let total, writer.position < total {
                attempt.result = .failure(.partialBody(received: writer.position, expected: total))
                return attempt
            }
            size = writer.position
        case .reject(let failure):
            attempt.result = .failure(failure)
            return attempt
        }
        let modified = (head.lastModified ?? remote?.lastModified).flatMap(HTTPDate.parse)
        attempt.result = verifyAndCommit(fd: fd, size: size, hasher: hasher, modified: modified)
        if case .success = attempt.result { committed = true }
        return attempt
    }

    /// `DEST.part` already holds the whole file: check it like a finished download.
    private func finishPartial(action: Action, size: Int64, remote: RemoteFile?) -> Attempt {
        let paths = self.paths
        var attempt = Attempt(action: action, result: .failure(.cancelled))
        let fd: Int32
        do {
            fd = try FileSystem.openPartial(paths.partial, truncate: false)
        } catch {
            attempt.result = .failure(error)
            return attempt
        }
        let hasher = entry.sha256 == nil ? nil : SHA256Hasher()
        do {
            try hasher?.update(fileDescriptor: fd, length: size, path: paths.partial)
        } catch {
            close(fd)
            attempt.result = .failure(error)
            return attempt
        }
        attempt.result = verifyAndCommit(fd: fd, size: size, hasher: hasher, modified: remote?.lastModified.flatMap(HTTPDate.parse))
        if case .failure = attempt.result { close(fd) }
        return attempt
    }

    /// Checks the pins, then renames the partial file into place. A file that fails a pin is
    /// deleted: it must never land under `DEST`, and keeping it would only resume bad bytes.
    /// Closes `fd` on success.
    private func verifyAndCommit(fd: Int32, size: Int64, hasher: SHA256Hasher?, modified: Int?) -> Swift.Result<Success, TransferFailure> {
        let paths = self.paths
        do {
            let onDisk = try FileSystem.size(of: fd, path: paths.partial)
            if onDisk != size {
                return .failure(.sizeMismatch(expected: size, actual: onDisk))
            }
            if let pinned = entry.size, pinned != size {
                FileSystem.remove(paths.partial)
                return .failure(.sizeMismatch(expected: pinned, actual: size))
            }
            var digest: String?
            if let hasher, let pin = entry.sha256 {
                let actual = hasher.finalize()
                if actual != pin {
                    FileSystem.remove(paths.partial)
                    return .failure(.checksumMismatch(expected: pin, actual: actual))
                }
                digest = actual
            }
            try FileSystem.commit(
                fd: fd, partial: paths.partial, destination: paths.destination,
                directory: paths.directory, modified: modified
            )
            close(fd)
            return .success(Success(outcome: .transferred, size: size, sha256: digest))
        } catch {
            return .failure(error)
        }
    }

    /// An empty partial file holds nothing worth resuming: leave no trace of a failed start.
    private func removeIfEmpty(_ fd: Int32) {
        if (try? FileSystem.size(of: fd, path: paths.partial)) == 0 {
            FileSystem.remove(paths.partial)
        }
    }
}
