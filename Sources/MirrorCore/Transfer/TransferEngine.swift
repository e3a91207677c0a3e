import CCurl
import Glibc
import Synchronization

/// Runs HTTP(S)/FTP requests concurrently on one thread that owns a libcurl multi handle and
/// every easy handle, so probes and downloads share one connection pool. The same thread runs
/// the work posted to it (`post`): the sync of every entry takes its cheap steps there, with no
/// hop to another thread per request.
///
/// From the loop's thread, `start(_:sink:completion:)` adds a request at once and calls
/// `completion` there when it ends; from anywhere else, `post` the work that starts it.
final class TransferEngine: Sendable {
    private let loop: MultiLoop
    private let thread: JoinableThread

    /// `maxHostConnections`: libcurl opens at most this many connections to one host (nil:
    /// no limit), queueing a request that would need another until one is free; see
    /// `MultiLoop.init`. `early`: connections opened before the engine, which its first
    /// requests to their origin wait for and take (`EarlyConnections`).
    init(maxHostConnections: Int? = nil, early: EarlyConnections? = nil) {
        if let failure = curlGlobalInitialization {
            // `NetworkPreparation.finish` says this to a caller that asks first.
            preconditionFailure("libcurl cannot be used: \(failure)")
        }
        loop = MultiLoop(maxHostConnections: maxHostConnections, early: early)
        let loop = self.loop
        thread = JoinableThread { loop.run() }
    }

    /// Stops the loop and waits for its thread to end: its transfers are stopped, libcurl's
    /// handles cleaned up and the thread's own state freed before the engine is gone. (A
    /// process may still exit while that goes on, when the engine's last owner lets go of it on
    /// another thread; OpenSSL has no exit handler to race it, see `OpenSSLSetup`.)
    deinit {
        loop.stop()
        thread.join()
    }

    /// Runs `work` on the loop's thread, after what was posted before it.
    func post(_ work: @escaping @Sendable () -> Void) {
        loop.post(work)
    }

    /// Runs `work` on the loop's thread once the current turn of the loop has sent every request
    /// that transfers finished in it made way for: work that no request waits for (starting
    /// entries that will wait for a permit anyway, freeing what a finished transfer held). Call
    /// only on the loop's thread. Posted work that arrives meanwhile runs before it.
    func afterSends(_ work: @escaping () -> Void) {
        loop.afterSends(work)
    }

    /// Starts `request` now; `completion` runs on the loop's thread when it ends. Call only on
    /// the loop's thread. Returns the transfer's id, for `cancel`.
    /// A request that fails before it is under way (its options refused) completes on a later
    /// turn of the loop, never inside this call: the caller has stored the id first.
    @discardableResult
    func start(
        _ request: consuming TransferRequest, sink: (any ResponseBodySink)?, completion: @escaping (TransferOutcome) -> Void
    ) -> UInt64 {
        loop.start(request: request, sink: sink) { outcome, _ in completion(outcome) }
    }

    /// The same, `completion` told the request too.
    @discardableResult
    func start(
        _ request: consuming TransferRequest, sink: (any ResponseBodySink)?, completion: @escaping (TransferOutcome, TransferRequest) -> Void
    ) -> UInt64 {
        loop.start(request: request, sink: sink, completion: completion)
    }

    /// Stops a transfer started with `start`; its completion runs (cancelled). Call only on the
    /// loop's thread.
    func cancel(_ id: UInt64) {
        loop.cancelNow(id: id)
    }

    /// Opens up to `count` connections to `host`:`port` ahead of requests about to follow,
    /// where the run's early connections went there (`EarlyConnections.openMore`); nothing
    /// otherwise. Returns how many are ready or on their way for them. Call only on the loop's
    /// thread.
    @discardableResult
    func warm(host: String, port: Int, count: Int) -> Int {
        loop.warm(host: host, port: port, count: count)
    }
}

/// libcurl loaded (it is not linked: `CCurl`) and set up (mostly OpenSSL's set-up: its
/// configuration file and algorithms, about 2.4 million instructions) on a thread of its own,
/// while the caller does something else (parses its command line, reads the manifest);
/// `finish` waits for it. An engine made meanwhile waits for it too. A process that exits
/// meanwhile (a usage error) waits in `exit` for the loader to finish, as a process linked
/// with libcurl waited for it before `main`; OpenSSL has no exit handler to race (`OpenSSLSetup`).
public enum NetworkPreparation {
    private static let started = Mutex<JoinableThread?>(nil)

    /// Starts the preparation, once; later calls do nothing.
    public static func start() {
        started.withLock { thread in
            if thread == nil { thread = JoinableThread { LibraryLoading.during { _ = curlGlobalInitialization } } }
        }
    }

    /// Waits until libcurl is loaded and set up (starting that when `start` was not called);
    /// throws when it cannot be loaded.
    public static func finish() throws(NetworkLibraryUnavailable) {
        start()
        started.withLock { $0 }?.join()
        if let failure = curlGlobalInitialization { throw NetworkLibraryUnavailable(reason: failure) }
    }
}

/// libcurl could not be loaded: not installed (Debian: libcurl4), or not the one mirror was
/// built against.
public struct NetworkLibraryUnavailable: Error, CustomStringConvertible, Sendable {
    public let reason: String

    public var description: String {
        "cannot load libcurl (\(reason)); install it (Debian and Ubuntu: apt-get install libcurl4)"
    }
}

/// libcurl, loaded and set up: `curl_global_init` must run once, before any other thread uses
/// libcurl. Swift initialises globals exactly once, under a lock. Nil when it is ready;
/// otherwise why it cannot be loaded.
let curlGlobalInitialization: String? = {
    // libcurl's libssl needs libcrypto, loaded and set up first.
    if let failure = OpenSSLSetup.failure { return failure }
    if let failure = mirror_curl_load() { return String(cString: failure) }
    mirror_curl_global_init(Int(CURL_GLOBAL_DEFAULT))
    return nil
}()

/// The engine's thread and what it owns. Only `post` and `stop` are called from other threads,
/// and they touch nothing but `inbox` and the wakeup call.
private final class MultiLoop: @unchecked Sendable {
    private struct Inbox {
        var posted: [@Sendable () -> Void] = []
        var stopping = false
    }

    private let multi: UnsafeMutableRawPointer
    private let inbox = Mutex(Inbox())
    /// Set while the loop waits in `curl_multi_poll`: only then does a post need to wake it.
    private let sleeping = Atomic<Bool>(false)
    /// Running transfers by easy handle; touched only on the loop thread.
    private var active: [UnsafeMutableRawPointer: TransferContext] = [:]
    /// The id of the next transfer; touched only on the loop thread.
    private var nextID: UInt64 = 1
    /// The running transfers that have rate limits, the one resumed longest ago first: they
    /// take turns at the bandwidth they share. Touched only on the loop thread.
    private var throttled: [UnsafeMutableRawPointer] = []
    /// Running transfers over TLS (see `pendingInputWait`). Touched only on the loop thread.
    private var overTLS: Set<UnsafeMutableRawPointer> = []
    /// Work that waits until the turn's requests are sent (`afterSends`), in the order it came.
    /// Touched only on the loop thread.
    private var deferred: [() -> Void] = []
    /// Makes the requests' easy handles and cleans them up, off the loop's thread.
    private let keeper = EasyHandleKeeper()
    /// The handles of the turn's finished requests, handed to the keeper after the sends.
    /// Touched only on the loop thread.
    private var retired: [EasyHandleKeeper.Retired] = []
    /// Finished requests' contexts, retired (`TransferContext.retire`) after the turn's
    /// deferred work, so after its sends. Touched only on the loop thread.
    private var retiring: [TransferContext] = []
    /// Connections opened before the engine (`EarlyConnections`), and the requests that wait
    /// for them to their origin, in the order they came: configured, not yet added. Touched
    /// only on the loop thread.
    private let early: EarlyConnections?
    private var held: [(context: TransferContext, host: HostKey)] = []

    /// The longest the loop sleeps while a transfer runs over TLS. libcurl 7.88 (Debian 12's) reads
    /// more from a TLS connection than it hands on, and does not wake its poll for what stays
    /// buffered: with many HTTP/2 streams on one connection the last replies of a run sat there,
    /// complete, until the 1 s timeout (a 2,000-file re-check over HTTPS ended 1.0 s after
    /// its last request in 2 runs of 8 on loopback, 1 of 20 through a 40 ms link). A short sleep bounds that wait; it costs one pass
    /// of `curl_multi_perform` per wake, nothing while no TLS transfer runs.
    static let pendingInputWait: Int64 = 10

    /// Streams share an HTTP/2 connection up to `RequestBudget.streamCap` (libcurl keeps to
    /// the server's own limit when it is lower). The run's permits keep connections and large
    /// transfers to `concurrency`; light requests that ride on streams are many more, and when a
    /// server allows fewer streams than that, or a redirect takes them to a server that does not
    /// multiplex, `maxHostConnections` keeps libcurl from opening a connection for each.
    init(maxHostConnections: Int?, early: EarlyConnections?) {
        guard let handle = mirror_curl_multi_init() else { fatalError("curl_multi_init failed: out of memory") }
        multi = handle
        self.early = early
        mirror_multi_setopt_long(handle, CURLMOPT_MAX_CONCURRENT_STREAMS, RequestBudget.streamCap)
        if let maxHostConnections {
            mirror_multi_setopt_long(handle, CURLMOPT_MAX_HOST_CONNECTIONS, max(1, maxHostConnections))
        }
    }

    func post(_ work: @escaping @Sendable () -> Void) {
        inbox.withLock { $0.posted.append(work) }
        wake()
    }

    func afterSends(_ work: @escaping () -> Void) {
        deferred.append(work)
    }

    func stop() {
        inbox.withLock { $0.stopping = true }
        mirror_curl_multi_wakeup(multi)
    }

    /// Wakes the loop if it sleeps. The loop says it sleeps before it looks at the inbox a last
    /// time, and this looks after adding to it: either the loop sees the new item or this sees
    /// it sleeping.
    private func wake() {
        if sleeping.load(ordering: .sequentiallyConsistent) {
            mirror_curl_multi_wakeup(multi)
        }
    }

    func warm(host: String, port: Int, count: Int) -> Int {
        guard let early, count > 0, early.target.host == host, early.target.port == port else { return 0 }
        return early.openMore(count)
    }

    /// Stops a running transfer now; on the loop's thread only.
    func cancelNow(id: UInt64) {
        if let position = held.firstIndex(where: { $0.context.id == id }) {
            return completeHeld(held.remove(at: position).context)
        }
        guard let handle = active.first(where: { $0.value.id == id })?.key else { return }
        complete(handle, code: CURLE_ABORTED_BY_CALLBACK, cancelled: true)
    }

    func run() {
        PromptWakeups.request()
        // A name looked up on a thread of its own: the turn its end wakes releases the
        // requests held for it.
        early?.onResolved { [weak self] in self?.post {} }
        while true {
            let (posted, stopping) = takePosted()
            for work in posted { work() }
            if stopping {
                for handle in Array(active.keys) { complete(handle, code: CURLE_ABORTED_BY_CALLBACK, cancelled: true) }
                // A held request's completion may cancel or start another: each ends once.
                while !held.isEmpty {
                    let pending = held
                    held.removeAll()
                    for (context, _) in pending { completeHeld(context) }
                }
                runDeferred()
                break
            }
            if let early {
                if !early.isSettled { early.update() }
                if !held.isEmpty { releaseHeld() }
            }
            var running: Int32 = 0
            mirror_curl_multi_perform(multi, &running)
            let (endedOverTLS, finishedLeft) = drainFinished()
            runDeferred()
            let longest: Int64 = overTLS.isEmpty ? 1000 : Self.pendingInputWait
            var timeout = throttled.isEmpty ? longest : resumeThrottled(longest: longest)
            // While requests wait for early connections, their handshakes wake the loop too.
            var waitFor: (descriptors: [curl_waitfd], wakeIn: Int64?) = early?.waiting() ?? ([], nil)
            if let wakeIn = waitFor.wakeIn { timeout = min(timeout, wakeIn) }
            sleeping.store(true, ordering: .sequentiallyConsistent)
            // Finished transfers not handled yet, and deferred work that deferred more, go round
            // at once: libcurl's poll would not wake for them. So does a turn that a TLS
            // transfer ended in over TLS: the record its reply came in may hold others' replies
            // too, which libcurl 7.88 keeps without waking its poll (`pendingInputWait`).
            let idle = !finishedLeft && !endedOverTLS && deferred.isEmpty && inbox.withLock { $0.posted.isEmpty && !$0.stopping }
            if idle {
                waitFor.descriptors.withUnsafeMutableBufferPointer { extra in
                    _ = mirror_curl_multi_poll(multi, extra.baseAddress, UInt32(extra.count), Int32(timeout), nil)
                }
            }
            sleeping.store(false, ordering: .sequentiallyConsistent)
        }
        // The stopping turn's `runDeferred` handed the keeper every finished handle.
        keeper.stop()
        mirror_curl_multi_cleanup(multi)
        early?.close()
    }

    /// Adds the held requests that may go now (`EarlyConnections.admit`, after the turn's
    /// `update`), in the order they came.
    private func releaseHeld() {
        guard let early else { return }
        var still: [(context: TransferContext, host: HostKey)] = []
        for item in held {
            let (admitted, resolve) = early.admit(host: item.host.host, port: item.host.port)
            if admitted {
                add(item.context, resolve: resolve)
            } else {
                still.append(item)
            }
        }
        held = still
    }

    /// A held request's end before it was added: cancelled.
    private func completeHeld(_ context: TransferContext) {
        context.finish(code: CURLE_ABORTED_BY_CALLBACK, cancelled: true)
        retiring.append(context)
    }

    /// Resumes the first held transfer (longest since its last turn) whose rate limits let it
    /// go on, and returns how long the loop may sleep (0 after a resume: the loop goes round at
    /// once, and the next one gets its turn then if the limits still allow), at most `longest`
    /// ms. One at a time, because libcurl hands a resumed transfer its bytes on its next
    /// `perform`, in its own order: resuming all at once would let the same one take the
    /// bandwidth every time. A held transfer has nothing for libcurl to wait on, so the loop's
    /// timeout is what wakes it: no busy loop.
    private func resumeThrottled(longest: Int64) -> Int64 {
        let now = MonotonicClock.milliseconds()
        var sleep = longest
        for (position, handle) in throttled.enumerated() {
            guard let context = active[handle], let wait = context.resumeIfAllowed(now: now) else { continue }
            if wait == 0 {
                throttled.remove(at: position)
                throttled.append(handle)
                return 0
            }
            sleep = min(sleep, wait)
        }
        return sleep
    }

    /// See `TransferEngine.start`. A request refused before it is under way completes on the
    /// loop's next turn, never inside this call.
    /// `request` is moved into its context, not copied: a request holds a dozen references.
    func start(request: consuming TransferRequest, sink: (any ResponseBodySink)?, completion: @escaping (TransferOutcome, TransferRequest) -> Void) -> UInt64 {
        let id = nextID
        nextID += 1
        let easy = keeper.take() ?? TransferContext.makeHandle()
        let context = TransferContext(id: id, request: request, sink: sink, easy: easy, completion: completion)
        func fail(_ code: CURLcode) -> UInt64 {
            failLater(context, code)
            return id
        }
        do {
            try context.configure()
            if let early { try context.offer(early) }
        } catch {
            return fail(error.code)
        }
        // Once the early connections are taken or given up and nothing waits, a request goes
        // on as without them.
        if let early, !(held.isEmpty && early.isSettled), context.request.proxy == nil, let host = HostKey(url: context.request.url) {
            // Behind the requests to its origin that wait already, in the order they came.
            let (admitted, resolve) = held.contains { $0.host == host } ? (false, nil) : early.admit(host: host.host, port: host.port)
            if admitted {
                add(context, resolve: resolve)
            } else {
                held.append((context, host))
            }
            return id
        }
        add(context, resolve: nil)
        return id
    }

    /// Hands `context`'s request to libcurl; one it refuses completes on the loop's next turn.
    private func add(_ context: TransferContext, resolve: UnsafeMutablePointer<curl_slist>?) {
        if let resolve {
            // The early connections' lookup, so that libcurl does not look the name up again.
            do {
                try context.easy.set(CURLOPT_RESOLVE, list: resolve, "CURLOPT_RESOLVE")
            } catch {
                return failLater(context, error.code)
            }
        }
        guard mirror_curl_multi_add_handle(multi, context.easy.raw) == CURLM_OK else { return failLater(context, CURLE_FAILED_INIT) }
        active[context.easy.raw] = context
        if context.request.throttle != nil { throttled.append(context.easy.raw) }
        if context.usesTLS { overTLS.insert(context.easy.raw) }
    }

    /// Ends `context`'s request, refused before it was under way, on the loop's next turn.
    private func failLater(_ context: TransferContext, _ code: CURLcode) {
        let failing = UncheckedBox(context)
        post { [self] in
            failing.value.finish(code: code, cancelled: false)
            retired.append(failing.value.retire())
        }
    }

    /// Runs the work deferred so far (`afterSends`); what it defers in turn waits for the next
    /// turn, after that turn's sends. Then retires the finished requests' contexts and hands
    /// the keeper their handles.
    private func runDeferred() {
        if !deferred.isEmpty {
            let work = deferred
            deferred.removeAll(keepingCapacity: true)
            for item in work { item() }
        }
        for context in retiring { retired.append(context.retire()) }
        retiring.removeAll(keepingCapacity: true)
        keeper.exchange(retired, idle: active.isEmpty)
        retired.removeAll(keepingCapacity: true)
    }

    /// Handles finished transfers, each followed by what it made way for (`sendWhatFollowed`),
    /// those that the sends find finished too, up to `finishedPerTurn`: on a fast link they
    /// would keep coming, and the deferred work (the entries that fill the window again among
    /// it, the handles and contexts to free) would wait for a pause. Returns whether one of them
    /// ran over TLS, and whether it stopped at that bound, when more may be waiting.
    private func drainFinished() -> (overTLS: Bool, more: Bool) {
        var remaining: Int32 = 0
        var handled = 0
        var endedOverTLS = false
        while let message = mirror_curl_multi_info_read(multi, &remaining) {
            guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle else { continue }
            if overTLS.contains(handle) { endedOverTLS = true }
            complete(handle, code: message.pointee.data.result, cancelled: false)
            sendWhatFollowed()
            handled += 1
            if handled == Self.finishedPerTurn { return (endedOverTLS, true) }
        }
        return (endedOverTLS, false)
    }

    /// Finished transfers handled in one turn of the loop, at most (see `drainFinished`): far
    /// more than a round of replies on `concurrency` connections, which it does not split.
    static let finishedPerTurn = 64

    /// The work posted so far, taken out of the inbox, and whether the loop is to stop; with
    /// `unlessStopping`, nothing is taken once it is.
    private func takePosted(unlessStopping: Bool = false) -> (posted: [@Sendable () -> Void], stopping: Bool) {
        inbox.withLock { inbox in
            if unlessStopping, inbox.stopping { return ([], true) }
            defer { inbox.posted.removeAll() }
            return (inbox.posted, inbox.stopping)
        }
    }

    /// Transfers at once below which a finished transfer's successor is sent at once (see
    /// `sendWhatFollowed`): a pass of `curl_multi_perform` visits every transfer, so with
    /// hundreds of HTTP/2 streams the batch is cheaper.
    static let eagerSendLimit = 64

    /// Sends what a finished transfer's completion started (the next entry, on the permit it
    /// gave back, posted here by the grant) before the other transfers that finished in the
    /// same pass are handled: replies on `concurrency` connections tend to arrive together,
    /// and without this the request for the first connection waited for all of them to be
    /// handled and all their successors to be built. What no request waits for is deferred
    /// (`afterSends`) until every finished transfer of the pass has been handled so.
    ///
    /// libcurl runs only the transfers whose timers are due (`curl_multi_socket_action` with
    /// `CURL_SOCKET_TIMEOUT`): a transfer just added is due at once, so its request goes out,
    /// while a pass of `curl_multi_perform` would also visit (and `poll`) every other one. The
    /// loop's next pass of `curl_multi_perform` carries on with all of them as before; libcurl
    /// 7.88 keeps one timer tree for both calls, and neither needs its socket callback.
    private func sendWhatFollowed() {
        guard active.count < Self.eagerSendLimit else { return }
        // Stopping is left to `run`, which runs what was posted first too.
        let (posted, stopping) = takePosted(unlessStopping: true)
        guard !stopping, !posted.isEmpty else { return }
        let before = nextID
        for work in posted { work() }
        if nextID != before {
            var running: Int32 = 0
            mirror_curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &running)
        }
    }

    /// Order matters: leave the multi handle, report (which reads the handle's info), and only
    /// then free the handle and the header list it points to. The freeing, and the release of
    /// the context with what its completion holds, wait until the turn's requests are sent.
    private func complete(_ handle: UnsafeMutableRawPointer, code: CURLcode, cancelled: Bool) {
        guard let context = active.removeValue(forKey: handle) else { return }
        if !throttled.isEmpty { throttled.removeAll { $0 == handle } }
        if !overTLS.isEmpty { overTLS.remove(handle) }
        mirror_curl_multi_remove_handle(multi, handle)
        context.finish(code: code, cancelled: cancelled)
        retiring.append(context)
    }
}

/// Carries a value that is only ever touched on the engine's thread across a `@Sendable` closure
/// posted to that same thread.
private struct UncheckedBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
