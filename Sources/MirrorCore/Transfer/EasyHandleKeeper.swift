import CCurl
import Dispatch
import Glibc
import Synchronization

/// Makes libcurl easy handles ahead of the requests that take them, and cleans up the handles
/// of finished requests, on a thread of its own. In a re-check over HTTP/2 the engine's thread
/// is what bounds the run, and `curl_easy_init` and `curl_easy_cleanup` were 16,000 of its
/// 317,000 instructions a request; libcurl allows both on any thread once it is set up, and a
/// handle that has left the multi handle points into nothing of the engine's. The options
/// every request sets alike are set here too (`TransferContext.prepare`).
///
/// The engine takes a ready handle (`take`, or makes one itself when none is), and once a turn
/// hands over the handles its finished requests left and how many it took (`exchange`): the
/// keeper resets those for as many requests again, up to `maxReady`, makes what they do not
/// cover and cleans up the rest. A reset (`curl_easy_reset`) costs a third of a cleanup and an
/// init together.
final class EasyHandleKeeper: @unchecked Sendable {
    /// A finished request's handle, with what libcurl points into until it is cleaned up.
    struct Retired: @unchecked Sendable {
        let handle: EasyHandle
        let headerList: UnsafeMutablePointer<curl_slist>?
        /// The request's parsed URL (`CURLOPT_CURLU`), or nil.
        let parsedURL: OpaquePointer?
        /// A `file:` source's descriptor, or -1.
        let fileSource: Int32
        /// The request may have shared its connection (`EasyHandleKeeper.reusable`).
        let mayHaveSharedConnection: Bool

        fileprivate func cleanUp() {
            releaseRequest()
            handle.cleanup()
        }

        /// The handle, reset to libcurl's defaults and given the options every request sets
        /// alike, for another request; nil, and nothing done, when it may not be
        /// (`EasyHandleKeeper.reusable`): then it is to be cleaned up.
        fileprivate func reused() -> EasyHandle? {
            guard EasyHandleKeeper.reusable(
                setupFailed: handle.setupError != nil, osErrno: handle.infoLong(CURLINFO_OS_ERRNO), sharedConnection: mayHaveSharedConnection)
            else {
                return nil
            }
            releaseRequest()
            handle.reset()
            TransferContext.prepare(handle)
            return handle
        }

        /// Frees what the request pointed libcurl at.
        private func releaseRequest() {
            mirror_curl_slist_free_all(headerList)
            if let parsedURL { mirror_curl_url_cleanup(parsedURL) }
            if fileSource >= 0 { close(fileSource) }
        }
    }

    private struct State {
        var ready: [EasyHandle] = []
        var retired: [Retired] = []
        /// Handles taken since the keeper last made some: as many are made again.
        var taken = 0
        var stopping = false
    }

    /// Handles kept ready at most. The keeper is woken when half of them are taken or
    /// `retiredBatch` wait: each wake is a `futex` call on the engine's thread, and on a
    /// virtual machine, where waking a thread on the other CPU is an interrupt between them,
    /// the look-ahead's and the keeper's wakes were 3 % of a 100,000-entry plan's samples with
    /// batches of 16 and 8.
    static let maxReady = 32

    private let state = Mutex(State())
    private let work = DispatchSemaphore(value: 0)
    private var thread: JoinableThread?

    init() {
        thread = JoinableThread { [self] in keep() }
    }

    /// A ready handle, if there is one.
    func take() -> EasyHandle? {
        state.withLock { state in
            state.taken += 1
            return state.ready.popLast()
        }
    }

    /// Hands over the handles of finished requests; the keeper cleans them up and makes again
    /// the handles taken since the last call. It is woken a batch at a time (`wakes`), not at
    /// every turn that finished a request. `idle`: no request is under way.
    func exchange(_ retired: [Retired], idle: Bool) {
        let wake = state.withLock { state -> Bool in
            state.retired += retired
            return Self.wakes(
                retired: state.retired.count, ready: state.ready.count, taken: state.taken,
                idle: idle, holdsDescriptor: state.retired.contains { $0.fileSource >= 0 })
        }
        if wake { work.signal() }
    }

    /// Whether the keeper has something worth a wake: a batch of handles to clean up, the
    /// ready ones running low, or, whatever their number, retired handles once no request is
    /// under way (the run may be over: they are not kept until the engine goes) or when one
    /// holds a `file:` source's descriptor. Woken at every turn of a plan of 100,000 that
    /// finished a request, the keeper was woken about as often as a request ended, a `futex`
    /// call on the engine's thread and a switch to the keeper's each time.
    static func wakes(retired: Int, ready: Int, taken: Int, idle: Bool, holdsDescriptor: Bool) -> Bool {
        if retired >= retiredBatch || (taken > 0 && ready <= maxReady / 2) { return true }
        return retired > 0 && (idle || holdsDescriptor)
    }

    /// Whether a finished request's handle may be reset for another. Not one that libcurl
    /// refused an option of. Not one whose last OS error is set: libcurl 7.88 keeps that error
    /// (`CURLINFO_OS_ERRNO`) across `curl_easy_reset`, and the next request on the handle would
    /// report it as its own (a later request that timed out would read "connection refused").
    /// And not one whose request may have shared its connection (an HTTP/2 stream): libcurl
    /// 7.88 ends such a transfer without freeing its receive buffer while the connection is
    /// still in use, a reset keeps the buffer, and setting `CURLOPT_BUFFERSIZE` on the handle
    /// is then refused (a 2,000-file sync over HTTP/2 failed 576 files so).
    static func reusable(setupFailed: Bool, osErrno: Int, sharedConnection: Bool) -> Bool {
        !setupFailed && osErrno == 0 && !sharedConnection
    }

    /// Retired handles cleaned up in one wake, at least.
    static let retiredBatch = 16

    /// Cleans up what it was handed and every ready handle, then ends its thread; after this,
    /// `exchange` is not called again. Call from one thread, once.
    func stop() {
        state.withLock { $0.stopping = true }
        work.signal()
        thread?.join()
        thread = nil
    }

    private func keep() {
        while true {
            work.wait()
            let (retired, make, stopping) = state.withLock { state in
                defer { state.retired.removeAll(keepingCapacity: true) }
                let make = state.stopping ? 0 : min(state.taken, Self.maxReady - state.ready.count)
                state.taken = 0
                return (state.retired, max(0, make), state.stopping)
            }
            if stopping {
                for handle in retired { handle.cleanUp() }
                let ready = state.withLock { state in
                    defer { state.ready.removeAll() }
                    return state.ready
                }
                for handle in ready { handle.cleanup() }
                return
            }
            // Finished requests' handles are reset for the next ones (no new handle's
            // allocations and set-up), and only what they do not cover is made anew.
            var made: [EasyHandle] = []
            made.reserveCapacity(make)
            for handle in retired {
                if made.count < make, let reused = handle.reused() {
                    made.append(reused)
                } else {
                    handle.cleanUp()
                }
            }
            while made.count < make { made.append(TransferContext.makeHandle()) }
            if !made.isEmpty { state.withLock { $0.ready += made } }
        }
    }
}
