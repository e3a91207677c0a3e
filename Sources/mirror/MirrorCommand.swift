import ArgumentParser
import FoundationEssentials
import Glibc
import MirrorCore

@main
struct MirrorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mirror",
        abstract: "Mirror the remote files a YAML manifest lists into local destinations.",
        discussion: """
            `mirror plan` shows what each entry needs without touching anything; `mirror sync` \
            carries it out, resuming partial files and never leaving a half-written file under \
            its final name; `mirror verify` checks local files offline; `mirror lock` pins every \
            entry's sha256 and size in the manifest; `mirror report` merges the `sync --report` files of \
            the shards of a run (`--shard K/N`, one per machine or array task) into one result.

            EXIT STATUS
              0    every entry is in its wanted state
              1    at least one entry failed; the others were still completed (sync --prune:
                   or the prune was refused or incomplete)
              2    usage or manifest error; nothing was transferred
              3    another mirror run holds the lock on this root
              4    the network stayed unreachable past connectivity.wait
              5    plan --exit-code: changes are pending
              130  interrupted (SIGINT); 143 terminated (SIGTERM): partial work is kept
            """,
        version: MirrorVersion.string,
        subcommands: [PlanCommand.self, SyncCommand.self, VerifyCommand.self, LockCommand.self, ReportCommand.self]
    )

    /// Parses and runs, mapping every outcome onto the documented exit codes: argument errors
    /// exit 2 (not ArgumentParser's 64), so scripts see one code for every usage problem.
    static func main() async {
        if CommandLine.arguments.count == 1 {
            // No command at all is a usage error for scripts, not a request for help.
            Console.writeToStandardError(helpMessage() + "\n")
            Glibc.exit(ExitStatus.usage.rawValue)
        }
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
            Glibc.exit(ExitStatus.success.rawValue)
        } catch let exitWith as ExitWith {
            Glibc.exit(exitWith.status.rawValue)
        } catch {
            let code = exitCode(for: error)
            if code == .success {
                // --help and --version.
                print(fullMessage(for: error))
                Glibc.exit(0)
            }
            Console.writeToStandardError(fullMessage(for: error) + "\n")
            Glibc.exit(ExitStatus.usage.rawValue)
        }
    }
}
