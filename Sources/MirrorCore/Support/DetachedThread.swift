import Glibc
import Synchronization

/// Starts `body` on a new detached POSIX thread: for work that blocks (hashing
/// from disk) and so must stay off Swift's cooperative thread pool.
public enum DetachedThread {
    public static func start(_ body: @escaping @Sendable () -> Void) {
        pthread_detach(spawn(body))
    }

    private final class Body {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }

    /// A new POSIX thread running `body`, not yet detached.
    fileprivate static func spawn(_ body: @escaping @Sendable () -> Void) -> pthread_t {
        let box = Unmanaged.passRetained(Body(body)).toOpaque()
        var thread = pthread_t()
        let created = pthread_create(&thread, nil, { argument in
            Unmanaged<Body>.fromOpaque(argument!).takeRetainedValue().run()
            return nil
        }, box)
        guard created == 0 else { fatalError("pthread_create failed: \(String(cString: strerror(created)))") }
        return thread
    }
}

/// A thread of its own whose end can be waited for (`join`): the engine's loop, whose libcurl
/// and OpenSSL teardown must be over before the process runs its exit handlers.
final class JoinableThread: @unchecked Sendable {
    private let thread: pthread_t
    private let joined = Mutex(false)

    init(_ body: @escaping @Sendable () -> Void) {
        thread = DetachedThread.spawn(body)
    }

    /// Whether the caller runs on this thread.
    var isCurrent: Bool { pthread_equal(pthread_self(), thread) != 0 }

    /// Waits until the thread has ended, its thread-local destructors included; from the thread
    /// itself, lets it end on its own instead. Once.
    func join() {
        let first = joined.withLock { joined in
            defer { joined = true }
            return !joined
        }
        guard first else { return }
        if isCurrent {
            pthread_detach(thread)
        } else {
            pthread_join(thread, nil)
        }
    }
}
