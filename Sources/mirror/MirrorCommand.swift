import ArgumentParser
import FoundationEssentials
import Glibc
import MirrorCore

@main
struct MirrorCommand: AsyncParsableCommand {
    /// Laid out for the width the help is printed at (`HelpText.columns()`): the EXIT STATUS
    /// list is wrapped here, not by the parser. Built once: the parser reads it many times for
    /// every command line, and wrapping the list each time was a measurable part of a short run.
    static let configuration: CommandConfiguration = {
        CommandConfiguration(
            commandName: "mirror",
            abstract: "Mirror the remote files a YAML manifest lists into local destinations.",
            discussion: """
                `mirror plan` shows what each entry needs without touching anything; `mirror sync` \
                carries it out, resuming partial files and never leaving a half-written file under \
                its final name; `mirror verify` checks local files offline; `mirror lock` pins every \
                entry's sha256 (or sha512) and size in the manifest; `mirror report` merges the \
                `sync --report` files of the shards of a run (`--shard K/N`, one per machine or array \
                task) into one result.

                The manifest format is described in `man 5 mirror-manifest`; every command, option \
                and output in `man 1 mirror`.

                \(HelpText.exitStatus(width: HelpText.columns()))
                """,
            version: MirrorVersion.string,
            subcommands: [PlanCommand.self, SyncCommand.self, VerifyCommand.self, LockCommand.self, ReportCommand.self, CacheCommand.self]
        )
    }()

    /// Parses and runs, mapping every outcome onto the documented exit codes: argument errors
    /// exit 2 (not ArgumentParser's 64), so scripts see one code for every usage problem.
    static func main() async {
        // The parser reads COLUMNS itself, for the help and also to work out an exit code: it
        // must lay out at the width the EXIT STATUS list was wrapped for, and never at one it
        // cannot lay its option list out in (below 40 columns, it has no room left for the text).
        setenv("COLUMNS", String(HelpText.columns()), 1)
        if CommandLine.arguments.isEmpty {
            // Swift reads a Linux process's arguments from /proc/self/cmdline: without /proc
            // there are none, and parsing nothing would print the help and exit 0, a cron job
            // that did nothing reported as a success.
            Console.writeToStandardError("mirror: cannot read the command line: /proc is not mounted (mirror reads its arguments and opens its state store through /proc)\n")
            Glibc.exit(ExitStatus.usage.rawValue)
        }
        if CommandLine.arguments.count == 1 {
            // No command at all is a usage error for scripts, not a request for help.
            Console.writeToStandardError(helpMessage() + "\n")
            Glibc.exit(ExitStatus.usage.rawValue)
        }
        // A command that makes requests has libcurl loaded on another thread while its
        // command line is parsed and its manifest read (`NetworkPreparation`). The command
        // runs on a thread of the concurrency pool, made first: a thread made while the loader
        // maps libcurl's libraries waits until it is done (glibc holds its TLS lock through a
        // dlopen), about 5 ms of a sync's start. It is parsed and run on that thread, not back
        // on the main actor: on Linux that is one more thread, made on the way (the main thread
        // is left to `dispatch_main`); a 300-entry sync's first `connect` came 0.8 ms later.
        if let name = CommandLine.arguments.dropFirst().first, fetchingCommands.contains(where: { $0.configuration.commandName == name }) {
            await Task.detached {
                NetworkPreparation.start()
                await runCommandLine()
            }.value
        } else {
            await runCommandLine()
        }
    }

    /// Parses the command line and runs its command, then exits with its status.
    private static func runCommandLine() async {
        do {
            var command = try parsedCommandLine()
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

    /// The commands that make requests: each waits for `CommonOptions.finishNetworkPreparation`
    /// once its manifest is read, and `main` starts the preparation for them.
    static let fetchingCommands: [ParsableCommand.Type] = [SyncCommand.self, PlanCommand.self, LockCommand.self]

    /// The command line, parsed. One that starts with a command's name is parsed with that
    /// command as the root first: the parser then reflects that command's options alone, not
    /// also the root's, the tree of every command and, to see whether the command takes its
    /// input raw, the command's options a second time. Only a parse that yields that command
    /// is taken; anything else (help, `--version`, a usage error, a completion script) is
    /// parsed again from the root, which decides and prints it as it always has.
    ///
    /// Each command names `mirror` as its `_superCommandName`, which read only where that
    /// command is the root, and so only in the first parse: there it makes the parser skip its
    /// search for `--generate-completion-script`, two more parsers built and reflected for every
    /// command line (5.1 M instructions of the 15.9 M `sync`'s parse took). Such a request
    /// fails that parse as an unknown option, and the root's parse finds it.
    static func parsedCommandLine() throws -> ParsableCommand {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if let name = arguments.first,
           let command = configuration.subcommands.first(where: { $0.configuration.commandName == name }),
           let parsed = try? command.parseAsRoot(Array(arguments.dropFirst())),
           ObjectIdentifier(type(of: parsed)) == ObjectIdentifier(command) {
            return parsed
        }
        return try parseAsRoot()
    }
}
