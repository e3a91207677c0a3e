/// Fetches one checksum file into memory, with the rules of an entry's download: the same
/// engine, proxies, TLS settings, headers, netrc login and redirect policy (`Fetcher`), a
/// size cap (`ChecksumFileBody.limit`), and retries of retryable failures with the run's
/// back-off. Nothing is written to disk.
///
/// Used on the engine's thread only.
final class ChecksumFileFetch: @unchecked Sendable {
    private let url: RemoteURL
    private let settings: TransferSettings
    private let fetcher: Fetcher
    private let retryPolicy: RetryPolicy
    private var attempts = 0
    private var transferID: UInt64?
    private var waiting: Task<Void, Never>?
    private var cancelled = false
    private var completion: ((Result<ChecksumList, TransferFailure>) -> Void)?

    init(url: RemoteURL, settings: TransferSettings, fetcher: Fetcher, retryPolicy: RetryPolicy) {
        self.url = url
        self.settings = settings
        self.fetcher = fetcher
        self.retryPolicy = retryPolicy
    }

    /// `completion` runs once, on the engine's thread, with the parsed list or why there is
    /// none (`checksumFileUnavailable` or `checksumFileUnusable`).
    func start(completion: @escaping (Result<ChecksumList, TransferFailure>) -> Void) {
        self.completion = completion
        attempt()
    }

    /// Stops the request or the wait in progress; the fetch ends as interrupted.
    func cancel() {
        cancelled = true
        if let transferID { fetcher.engine.cancel(transferID) }
        waiting?.cancel()
    }

    private func attempt() {
        if cancelled { return finish(.failure(.cancelled)) }
        attempts += 1
        let body = ChecksumFileBody()
        let request = TransferRequest(
            get: url, settings: settings, protocols: RedirectRule.protocols(forScheme: RemoteProbe.scheme(of: url.string)))
        fetcher.fetch(request, sink: body, onStart: { [self] in transferID = $0 }) { [self] result in
            transferID = nil
            switch outcome(of: result, body: body) {
            case .success(let list):
                finish(.success(list))
            case .failure(let failure):
                guard !cancelled, failure.isRetryable, attempts <= settings.retries else {
                    // An interrupted run reports its entries as interrupted, as it does any other.
                    let unwrapped = failure == .cancelled || failure.isChecksumFileProblem
                    return finish(.failure(unwrapped ? failure : .checksumFileUnavailable(url: url.display, failure)))
                }
                let delay = retryPolicy.delay(afterAttempt: attempts, unitRandom: Double.random(in: 0...1))
                let engine = fetcher.engine
                waiting = Task { [self] in
                    try? await Task.sleep(for: delay)
                    engine.post { [self] in
                        waiting = nil
                        attempt()
                    }
                }
            }
        }
    }

    private func outcome(of result: Fetcher.Result, body: ChecksumFileBody) -> Result<ChecksumList, TransferFailure> {
        if let failure = result.redirectFailure { return .failure(failure) }
        if let contradiction = body.contradiction { return .failure(.contradictoryReply(contradiction)) }
        if body.tooLarge {
            return .failure(.checksumFileUnusable(url: url.display, reason: "is larger than \(ChecksumFileBody.limit >> 20) MiB, too large for a checksum file"))
        }
        if let failure = result.outcome.transportFailure { return .failure(failure.redactingHost(of: url)) }
        guard let head = body.head ?? result.outcome.head else {
            return .failure(.curl(code: 0, message: "no response", osErrno: 0))
        }
        guard head.isSuccess else { return .failure(.httpStatus(head.status, retryAfter: head["retry-after"])) }
        guard let text = String(validating: body.bytes, as: UTF8.self) else {
            return .failure(.checksumFileUnusable(url: url.display, reason: "is not UTF-8 text"))
        }
        do {
            return .success(try ChecksumList.parse(text))
        } catch {
            return .failure(.checksumFileUnusable(url: url.display, reason: "is not a checksum file: \(error)"))
        }
    }

    private func finish(_ result: Result<ChecksumList, TransferFailure>) {
        guard let completion else { return }
        self.completion = nil
        completion(result)
    }
}

extension TransferFailure {
    /// Already says which checksum file it is about.
    var isChecksumFileProblem: Bool {
        switch self {
        case .checksumFileUnavailable, .checksumFileUnusable, .checksumNotListed: true
        default: false
        }
    }
}
