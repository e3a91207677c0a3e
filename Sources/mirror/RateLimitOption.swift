import ArgumentParser
import MirrorCore

/// `--rate-limit`, for `sync`: the bandwidth of the whole run.
struct RateLimitOption: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "Limit all transfers of the run together to this many bytes per second (512KiB, 5MiB, 10MB), `off`, or a local-time timetable like \"08:00,512KiB 19:00,off\". Replaces the manifest's top-level rate_limit; hosts' and entries' own limits still hold.",
        valueName: "rate"))
    var rateLimit: String?

    func validate() throws {
        if let rateLimit {
            do {
                _ = try RateLimit.parse(rateLimit)
            } catch {
                throw ValidationError("--rate-limit: \(error.message)")
            }
        }
    }

    var limit: RateLimit? { rateLimit.flatMap { try? RateLimit.parse($0) } }
}
