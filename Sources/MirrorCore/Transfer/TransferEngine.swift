import CCurl
import Glibc
import Synchronization

/// Runs HTTP(S)/FTP requests concurrently on one thread that owns a libcurl multi handle and
/// every easy handle, so probes and downloads share one connection pool. The same thread runs
/// the work posted to it (`post`): the sync of every entry takes its cheap steps there, with no
/// hop to another thread per request.
///
/// From the loop's thread, `start(_:sink:completion:)` adds a request at once and calls
/// `completion` there when it ends. From anywhere else, `await perform(_:sink:)` posts the
/// request and resumes the caller when it is done; cancelling the calling task stops it.
final class TransferEngine: Sendable {
    private let loop: MultiLoop

    init() {
        _ = curlGlobalInitialization
        loop = MultiLoop()
        let loop = self.loop
        DetachedThread.start { loop.run() }
    }

    deinit {
        loop.stop()
    }

    /// Runs `work` on the loop's thread, after what was posted before it.
    func post(_ work: @escaping @Sendable () -> Void) {
        loop.post(work)
    }

    /// Starts `request` now; `completion` runs on the loop's thread when it ends. Call only on
    /// the loop's thread. Returns the transfer's id, for `cancel`.
    /// A request that fails before it is under way (its options refused) completes on a later
    /// turn of the loop, never inside this call: the caller has stored the id first.
    @discardableResult
    func start(
        _ request: TransferRequest, sink: (any ResponseBodySink)?, completion: @escaping (TransferOutcome) -> Void
    ) -> UInt64 {
        let id = loop.makeID()
        loop.start(id: id, request: request, sink: sink, completion: completion, alreadyCancelled: false, deferFailure: true)
        return id
    }

    /// Stops a transfer started with `start`; its completion runs (cancelled). Call only on the
    /// loop's thread.
    func cancel(_ id: UInt64) {
        loop.cancelNow(id: id)
    }

    func perform(_ request: TransferRequest, sink: (any ResponseBodySink)? = nil) async -> TransferOutcome {
        let id = loop.makeID()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                loop.submit(id: id, request: request, sink: sink, continuation: continuation)
            }
        } onCancel: {
            loop.cancel(id: id)
        }
    }
}

/// `curl_global_init` must run once, before any other thread uses libcurl. Swift initialises
/// globals exactly once, under a lock.
private let curlGlobalInitialization: Void = {
    curl_global_init(Int(CURL_GLOBAL_DEFAULT))
}()

/// The engine's thread and what it owns. Only `submit`, `cancel`, `stop` and `makeID` are
/// called from other threads, and they touch nothing but `inbox` and the wakeup call.
private final class MultiLoop: @unchecked Sendable {
    private struct Submission {
        var id: UInt64
        var request: TransferRequest
        var sink: (any ResponseBodySink)?
        var continuation: CheckedContinuation<TransferOutcome, Never>
    }

    private struct Inbox {
        var submissions: [Submission] = []
        var posted: [@Sendable () -> Void] = []
        var cancelled: Set<UInt64> = []
        var stopping = false
        var nextID: UInt64 = 1
    }

    private let multi: UnsafeMutableRawPointer
    private let inbox = Mutex(Inbox())
    /// Set while the loop waits in `curl_multi_poll`: only then does a post need to wake it.
    private let sleeping = Atomic<Bool>(false)
    /// Running transfers by easy handle; touched only on the loop thread.
    private var active: [UnsafeMutableRawPointer: TransferContext] = [:]

    init() {
        guard let handle = curl_multi_init() else { fatalError("curl_multi_init failed: out of memory") }
        multi = handle
    }

    func makeID() -> UInt64 {
        inbox.withLock { inbox in
            defer { inbox.nextID += 1 }
            return inbox.nextID
        }
    }

    func submit(
        id: UInt64, request: TransferRequest, sink: (any ResponseBodySink)?,
        continuation: CheckedContinuation<TransferOutcome, Never>
    ) {
        inbox.withLock { $0.submissions.append(Submission(id: id, request: request, sink: sink, continuation: continuation)) }
        wake()
    }

    func post(_ work: @escaping @Sendable () -> Void) {
        inbox.withLock { $0.posted.append(work) }
        wake()
    }

    func cancel(id: UInt64) {
        inbox.withLock { _ = $0.cancelled.insert(id) }
        // Always: the loop's last look before it sleeps does not count cancellations, which
        // may wait for a submission yet to come.
        curl_multi_wakeup(multi)
    }

    func stop() {
        inbox.withLock { $0.stopping = true }
        curl_multi_wakeup(multi)
    }

    /// Wakes the loop if it sleeps. The loop says it sleeps before it looks at the inbox a last
    /// time, and this looks after adding to it: either the loop sees the new item or this sees
    /// it sleeping.
    private func wake() {
        if sleeping.load(ordering: .sequentiallyConsistent) {
            curl_multi_wakeup(multi)
        }
    }

    /// Stops a running transfer now; on the loop's thread only.
    func cancelNow(id: UInt64) {
        guard let handle = active.first(where: { $0.value.id == id })?.key else { return }
        complete(handle, code: CURLE_ABORTED_BY_CALLBACK, cancelled: true)
    }

    func run() {
        while true {
            let (submissions, posted, cancelled, stopping) = inbox.withLock { inbox in
                defer {
                    inbox.submissions.removeAll()
                    inbox.posted.removeAll()
                }
                return (inbox.submissions, inbox.posted, inbox.cancelled, inbox.stopping)
            }
            var matched = Set<UInt64>()
            for submission in submissions {
                let isCancelled = cancelled.contains(submission.id)
                if isCancelled { matched.insert(submission.id) }
                let continuation = submission.continuation
                start(id: submission.id, request: submission.request, sink: submission.sink,
                      completion: { continuation.resume(returning: $0) }, alreadyCancelled: isCancelled)
            }
            for work in posted { work() }
            if !cancelled.isEmpty {
                for (handle, context) in active where cancelled.contains(context.id) {
                    matched.insert(context.id)
                    complete(handle, code: CURLE_ABORTED_BY_CALLBACK, cancelled: true)
                }
                // A cancellation can arrive before its submission (a task cancelled before it
                // asked): keep it until the submission comes, and forget it only once matched.
                inbox.withLock { inbox in inbox.cancelled.subtract(matched) }
            }
            if stopping {
                for handle in Array(active.keys) { complete(handle, code: CURLE_ABORTED_BY_CALLBACK, cancelled: true) }
                break
            }
            var running: Int32 = 0
            curl_multi_perform(multi, &running)
            drainFinished()
            sleeping.store(true, ordering: .sequentiallyConsistent)
            let idle = inbox.withLock { $0.submissions.isEmpty && $0.posted.isEmpty && !$0.stopping }
            if idle {
                curl_multi_poll(multi, nil, 0, 1000, nil)
            }
            sleeping.store(false, ordering: .sequentiallyConsistent)
        }
        curl_multi_cleanup(multi)
    }

    func start(
        id: UInt64, request: TransferRequest, sink: (any ResponseBodySink)?,
        completion: @escaping (TransferOutcome) -> Void, alreadyCancelled: Bool, deferFailure: Bool = false
    ) {
        let context = TransferContext(id: id, request: request, sink: sink, completion: completion)
        if alreadyCancelled {
            context.finish(code: CURLE_ABORTED_BY_CALLBACK, cancelled: true)
            context.releaseHandle()
            return
        }
        func fail(_ code: CURLcode) {
            let failing = UncheckedBox(context)
            let end = { @Sendable in
                failing.value.finish(code: code, cancelled: false)
                failing.value.releaseHandle()
            }
            if deferFailure { post(end) } else { end() }
        }
        do {
            try context.configure()
        } catch {
            return fail(error.code)
        }
        let added = curl_multi_add_handle(multi, context.easy.raw)
        guard added == CURLM_OK else { return fail(CURLE_FAILED_INIT) }
        active[context.easy.raw] = context
    }

    private func drainFinished() {
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(multi, &remaining) {
            guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle else { continue }
            complete(handle, code: message.pointee.data.result, cancelled: false)
        }
    }

    /// Order matters: leave the multi handle, report (which reads the handle's info), and only
    /// then free the handle and the header list it points to.
    private func complete(_ handle: UnsafeMutableRawPointer, code: CURLcode, cancelled: Bool) {
        guard let context = active.removeValue(forKey: handle) else { return }
        // A cancellation that raced with the end of the transfer has nothing left to match.
        if !cancelled { inbox.withLock { _ = $0.cancelled.remove(context.id) } }
        curl_multi_remove_handle(multi, handle)
        context.finish(code: code, cancelled: cancelled)
        context.releaseHandle()
    }
}

/// Carries a value that is only ever touched on the engine's thread across a `@Sendable` closure
/// posted to that same thread.
private struct UncheckedBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
