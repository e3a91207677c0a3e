import Foundation
import Testing

/// Without /proc a Linux process's Swift runtime sees no arguments at all (it reads them from
/// /proc/self/cmdline): mirror must say so and exit 2, not parse an empty command line into the
/// help and exit 0, which a cron job in a chroot would report as a success.
struct WithoutProcTests {
    @Test(arguments: [["sync", "/nonexistent.yaml"], ["plan", "--bogus"]])
    func withoutProcTheRunStopsWithAUsageError(_ arguments: [String]) throws {
        let unshare = try ExternalCommand.executable("unshare", package: "util-linux")
        let quoted = arguments.map { "'\($0)'" }.joined(separator: " ")
        let result = try ExternalCommand.run(
            unshare, ["-m", "--propagation", "private", "/bin/sh", "-c", "umount -l /proc && exec '\(try MirrorBinary.path())' \(quoted)"],
            in: "/")
        #expect(result.status == 2, "\(result)")
        #expect(result.stderr.contains("/proc is not mounted"), "\(result)")
        #expect(result.stdout.isEmpty, "\(result)")
    }
}
