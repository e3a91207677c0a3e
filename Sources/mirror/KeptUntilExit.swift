import Synchronization

/// Objects the process exits with rather than frees. Once a command has its runner's reports
/// it prints them and exits; freeing the runner first would stop its engine's thread (closing
/// each connection, a TLS alert on each) and free every entry of the run, work whose only effect
/// is a later exit: 5 ms of a no-op of 2,000 entries over HTTP/2. The exit closes the
/// connections and returns the memory; the state store was closed by the run.
enum KeptUntilExit {
    private static let objects = Mutex<[any AnyObject & Sendable]>([])

    static func keep(_ object: any AnyObject & Sendable) {
        objects.withLock { $0.append(object) }
    }

    /// A value kept so: a command's results, or its manifest, of a million entries each take
    /// a few hundred ms to free one by one.
    static func keep<Value>(value: Value) {
        keep(Held(value))
    }

    private final class Held<Value>: @unchecked Sendable {
        let value: Value
        init(_ value: Value) { self.value = value }
    }
}
