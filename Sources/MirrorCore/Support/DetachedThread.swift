import Glibc

/// Starts `body` on a new detached POSIX thread: for work that blocks (the curl loop, hashing
/// from disk) and so must stay off Swift's cooperative thread pool.
public enum DetachedThread {
    private final class Body {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }

    public static func start(_ body: @escaping @Sendable () -> Void) {
        let box = Unmanaged.passRetained(Body(body)).toOpaque()
        var thread = pthread_t()
        let created = pthread_create(&thread, nil, { argument in
            Unmanaged<Body>.fromOpaque(argument!).takeRetainedValue().run()
            return nil
        }, box)
        guard created == 0 else { fatalError("pthread_create failed: \(String(cString: strerror(created)))") }
        pthread_detach(thread)
    }
}
