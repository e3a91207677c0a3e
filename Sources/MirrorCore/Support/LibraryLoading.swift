import Synchronization

/// Whether a shared library is being loaded on some thread (libcurl and the libraries it brings,
/// `NetworkPreparation`). glibc holds the lock a new thread's set-up takes for the whole of a
/// `dlopen`, so a thread made meanwhile waits until the load is over (0.3 ms made at once, 2 to
/// 7 ms made during libcurl's load, on this machine): work that could make a thread or do
/// without one asks first, and goes on without it until the load is done.
enum LibraryLoading {
    private static let loads = Atomic<Int>(0)

    /// Whether a load is under way now.
    static var inProgress: Bool { loads.load(ordering: .acquiring) > 0 }

    /// Runs `body`, a load, with `inProgress` true meanwhile.
    static func during<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        loads.add(1, ordering: .releasing)
        defer { loads.subtract(1, ordering: .releasing) }
        return try body()
    }
}
