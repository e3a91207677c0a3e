import CCurl
import Glibc
import Synchronization

/// Runs HTTP(S)/FTP requests concurrently on one thread that owns a libcurl multi handle and
/// every easy handle, so probes and downloads share one connection pool.
///
/// Callers `await perform(_:sink:)` from any task. The request is queued under a lock, the
/// thread is woken with `curl_multi_wakeup`, and the result comes back through a continuation.
/// Cancelling the calling task stops its transfer.
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
        var cancelled: Set<UInt64> = []
        var stopping = false
        var nextID: UInt64 = 1
    }

    private let multi: UnsafeMutableRawPointer
    private let inbox = Mutex(Inbox())
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
        curl_multi_wakeup(multi)
    }

    func cancel(id: UInt64) {
        inbox.withLock { _ = $0.cancelled.insert(id) }
        curl_multi_wakeup(multi)
    }

    func stop() {
        inbox.withLock { $0.stopping = true }
        curl_multi_wakeup(multi)
    }

    func run() {
        while true {
            let (submissions, cancelled, stopping) = inbox.withLock { inbox in
                defer { inbox.submissions.removeAll() }
                return (inbox.submissions, inbox.cancelled, inbox.stopping)
            }
            var matched = Set<UInt64>()
            for submission in submissions {
                let isCancelled = cancelled.contains(submission.id)
                if isCancelled { matched.insert(submission.id) }
                start(submission, alreadyCancelled: isCancelled)
            }
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
            curl_multi_poll(multi, nil, 0, 1000, nil)
        }
        curl_multi_cleanup(multi)
    }

    private func start(_ submission: Submission, alreadyCancelled: Bool) {
        let context = TransferContext(
            id: submission.id, request: submission.request, sink: submission.sink,
            continuation: submission.continuation
        )
        if alreadyCancelled {
            context.finish(code: CURLE_ABORTED_BY_CALLBACK, cancelled: true)
            context.releaseHandle()
            return
        }
        do {
            try context.configure()
        } catch {
            context.finish(code: error.code, cancelled: false)
            context.releaseHandle()
            return
        }
        let added = curl_multi_add_handle(multi, context.easy.raw)
        guard added == CURLM_OK else {
            context.finish(code: CURLE_FAILED_INIT, cancelled: false)
            context.releaseHandle()
            return
        }
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
