import CLinux
import Glibc

/// The engine's thread asks the kernel for a slice shorter than its default, so that it runs
/// soon after a reply wakes it. Since Linux 6.12 (EEVDF's `PREEMPT_SHORT`), a woken task whose
/// slice is shorter than the running task's takes the CPU from it, and gets it back sooner when
/// it is itself preempted; the default slice (6.18) is 0.7 ms × (1 + log2 of the CPUs, at most
/// 8), 1.4 ms on two CPUs and 2.8 ms from eight. A reply's turn (its last byte read to the next
/// request's send) is what a run of small files pays once per round trip, and on a busy machine
/// (the link's other end on the same host, other jobs) the wait for the CPU was most of it.
///
/// The thread's policy, nice value and flags stay as they are (a `nice` or `chrt -b` run keeps
/// them); a real-time, deadline or idle thread is left alone, a slice already as short (one
/// CPU's default) is not lengthened, and a kernel before 6.12 takes the request without
/// effect. Threads the engine's thread starts inherit the slice: the blocking pool's threads it
/// starts on demand, a trailing hasher, libcurl's resolver; the numbers below include them.
enum PromptWakeups {
    /// The slice asked for. The turn measured the same from 0.1 to 3 ms (a 300-file re-check
    /// through a 40 ms link: mean 450 µs, then 263-309); at 0.1 ms a 1 GiB download on loopback
    /// read slower in 4 runs of 5.
    static let slice: UInt64 = 1_000_000

    /// Asks for `slice` on the calling thread (see above for what is left as it is); false when
    /// the kernel refused.
    @discardableResult
    static func request() -> Bool {
        mirror_request_thread_slice(slice) == 0
    }

    /// The calling thread's scheduling as the kernel reports it.
    static func current() -> (policy: UInt32, nice: Int32, slice: UInt64)? {
        var policy: UInt32 = 0
        var nice: Int32 = 0
        var slice: UInt64 = 0
        guard mirror_thread_scheduling(&policy, &nice, &slice) == 0 else { return nil }
        return (policy, nice, slice)
    }
}
