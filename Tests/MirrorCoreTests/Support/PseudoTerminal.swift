import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A real pseudo-terminal (`posix_openpt`) of a given width, whose output side a test reads:
/// what a program writes to its stderr there is what a person's terminal would receive.
final class PseudoTerminal {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private let controller: Int32
    /// The terminal side, for a child's stderr.
    let device: FileHandle
    private let reader: Thread
    private let output = OutputBuffer()

    private final class OutputBuffer: @unchecked Sendable {
        let lock = NSLock()
        var bytes = Data()
        var ended = false
    }

    init(columns: UInt16, rows: UInt16 = 24) throws {
        // /dev/ptmx and its ioctls: glibc declares posix_openpt and friends only for
        // _XOPEN_SOURCE, which Swift's Glibc module does not set.
        controller = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard controller >= 0 else { throw Failure(description: "open /dev/ptmx: \(String(cString: strerror(errno)))") }
        // _IOW('T', 0x31, int) and _IOR('T', 0x30, unsigned int) in asm-generic/ioctls.h (the
        // macros do not import into Swift).
        let TIOCSPTLCK: UInt = 0x4004_5431, TIOCGPTN: UInt = 0x8004_5430
        var unlock: Int32 = 0
        var number: UInt32 = 0
        guard ioctl(controller, TIOCSPTLCK, &unlock) == 0, ioctl(controller, TIOCGPTN, &number) == 0 else {
            close(controller)
            throw Failure(description: "cannot set up the pseudo-terminal: \(String(cString: strerror(errno)))")
        }
        let name = "/dev/pts/\(number)"
        let deviceFD = open(name, O_RDWR | O_NOCTTY)
        guard deviceFD >= 0 else {
            close(controller)
            throw Failure(description: "open \(name): \(String(cString: strerror(errno)))")
        }
        var size = winsize(ws_row: rows, ws_col: columns, ws_xpixel: 0, ws_ypixel: 0)
        _ = ioctl(deviceFD, UInt(TIOCSWINSZ), &size)
        device = FileHandle(fileDescriptor: deviceFD, closeOnDealloc: true)
        let controller = self.controller, output = self.output
        // The terminal's buffer is small: it must be drained while the child writes, or the
        // child blocks.
        reader = Thread {
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = read(controller, &buffer, buffer.count)
                if count < 0 && errno == EINTR { continue }
                // EIO once every holder of the terminal side has closed it.
                if count <= 0 { break }
                output.lock.lock()
                output.bytes.append(contentsOf: buffer[0..<count])
                output.lock.unlock()
            }
            output.lock.lock()
            output.ended = true
            output.lock.unlock()
        }
        reader.start()
    }

    /// Closes this side's copy of the terminal (the child keeps its own) and returns all that
    /// was written to it, once the child has exited and the output is drained (at most 10 s).
    func finish() throws -> Data {
        try device.close()
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            output.lock.lock()
            let ended = output.ended
            output.lock.unlock()
            if ended { break }
            Thread.sleep(forTimeInterval: 0.01)
        }
        output.lock.lock()
        defer { output.lock.unlock() }
        guard output.ended else { throw Failure(description: "the terminal's output did not end within 10 s") }
        return output.bytes
    }

    deinit { close(controller) }
}
