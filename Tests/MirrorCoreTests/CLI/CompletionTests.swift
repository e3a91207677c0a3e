import Foundation
import Testing

/// The completion scripts the binary generates (`--generate-completion-script`), loaded into
/// bash, zsh and fish as a person's shell loads them and asked to complete a command line in a
/// directory of files: every argument and option that names a file or directory completes
/// file names there.
@Suite(.serialized)
struct CompletionTests {
    /// A command line being typed, and what completing its last word must offer.
    struct Case: CustomStringConvertible, Sendable {
        var words: [String]
        /// The name that must be offered.
        var offered: String
        /// A name that must not be: a file, where only directories belong.
        var notOffered: String?

        var description: String { words.joined(separator: " ") }
    }

    static let cases: [Case] = ["plan", "sync", "verify", "lock"].flatMap { command in
        [
            Case(words: ["mirror", command, "man"], offered: "manifest.yaml"),
            Case(words: ["mirror", command, "--root", "mirror-"], offered: "mirror-root", notOffered: "mirror-file.txt"),
            Case(words: ["mirror", command, "--state-dir", "mirror-"], offered: "mirror-root", notOffered: "mirror-file.txt"),
        ]
    } + [
        Case(words: ["mirror", "sync", "--report", "rep"], offered: "report.json"),
        Case(words: ["mirror", "sync", "--metrics-file", "met"], offered: "metrics.prom"),
        Case(words: ["mirror", "report", "rep"], offered: "report.json"),
        Case(words: ["mirror", "report", "--failed-manifest", "fai"], offered: "failed.yaml"),
    ]

    /// The directory completion runs in: one name for each case to find.
    static func workDirectory() throws -> TemporaryDirectory {
        let directory = try TemporaryDirectory(prefix: "mirror-completion")
        for name in ["manifest.yaml", "mirror-file.txt", "report.json", "metrics.prom", "failed.yaml"] {
            try directory.write(Data(), to: name)
        }
        try FileManager.default.createDirectory(atPath: directory.path("mirror-root"), withIntermediateDirectories: false)
        return directory
    }

    /// The binary's script for `shell`, written to `directory/name`.
    static func script(for shell: String, in directory: TemporaryDirectory, as name: String) throws -> String {
        let generated = try MirrorBinary.run(["--generate-completion-script", shell], in: directory.path)
        try #require(generated.status == 0, "\(generated)")
        return try directory.write(Data(generated.stdout.utf8), to: name)
    }

    /// Sources the bash `script` in a non-interactive bash, as bash-completion would, and asks
    /// its function, in `directory`, for the words that complete `words` (the last one being
    /// typed); also what `complete -p mirror` says the script registered.
    static func bashCompletions(_ words: [String], script: String, in directory: String,
                                environment: [String: String] = [:]) throws -> (offered: [String], registered: String) {
        let line = words.joined(separator: " ")
        let program = """
            set -u
            source "$1"
            complete -p mirror >&2
            COMP_WORDS=(\(words.map { "'\($0)'" }.joined(separator: " ")))
            COMP_CWORD=\(words.count - 1)
            COMP_LINE='\(line)'
            COMP_POINT=\(line.utf8.count)
            COMPREPLY=()
            _mirror mirror '\(words.last!)' '\(words.dropLast().last!)'
            printf '%s\\n' "${COMPREPLY[@]}"
            """
        let result = try ExternalCommand.run(try ExternalCommand.executable("bash", package: "bash"),
                                             ["-c", program, "bash", script], in: directory, environment: environment)
        try #require(result.status == 0, "\(result)")
        return (result.stdout.split(separator: "\n").map(String.init), result.stderr)
    }

    /// bash: the script sourced, its function called as bash-completion calls it; the words
    /// it puts in COMPREPLY.
    @Test(arguments: cases)
    func bashCompletesFileNames(_ test: Case) throws {
        let work = try Self.workDirectory()
        let scripts = try TemporaryDirectory(prefix: "mirror-completion-script")
        let script = try Self.script(for: "bash", in: scripts, as: "mirror")
        let offered = try Self.bashCompletions(test.words, script: script, in: work.path).offered
        #expect(offered.contains(test.offered), "\(test): \(offered)")
        if let notOffered = test.notOffered { #expect(!offered.contains(notOffered), "\(test): \(offered)") }
    }

    /// zsh: an interactive zsh on a pseudo-terminal (zsh's own zpty), `_mirror` found through
    /// `$fpath` by `compinit`, the line typed and Tab pressed; what the line then shows.
    @Test(arguments: cases)
    func zshCompletesFileNames(_ test: Case) throws {
        let work = try Self.workDirectory()
        let functions = try TemporaryDirectory(prefix: "mirror-completion-fpath")
        _ = try Self.script(for: "zsh", in: functions, as: "_mirror")
        // Reads until the line shows what is wanted, for at most 15 s; prints what the
        // terminal received, its escape sequences (highlighting, cursor moves) taken out.
        let driver = try functions.write(Data("""
            zmodload zsh/zpty
            setopt extendedglob
            typeset -F SECONDS
            zpty -b z zsh -f -i
            zpty -w z "PS1='> '; fpath=(${(q)1} \\$fpath); autoload -U compinit; compinit -u -D; cd ${(q)2}; echo RE''ADY"
            zpty -r z line '*READY*'
            zpty -w -n z "$3"$'\\t'
            out=""
            deadline=$(( SECONDS + 15 ))
            while (( SECONDS < deadline )); do
                while zpty -r -t z chunk; do out+=$chunk; done
                plain=${out//$'\\e'\\[[0-9;?]#[a-zA-Z]/}
                [[ $plain == *"$4"* ]] && break
                sleep 0.1
            done
            zpty -d z
            print -r -- "$plain"
            """.utf8), to: "drive.zsh")
        let typed = test.words.joined(separator: " ")
        // A name completed alone is inserted whole: a directory with its slash, a file with a space.
        let completed = test.words.dropLast().joined(separator: " ") + " " + test.offered + (test.notOffered == nil ? "" : "/")
        let result = try ExternalCommand.run(try ExternalCommand.executable("zsh", package: "zsh"),
                                             ["-f", driver, functions.path, work.path, typed, completed], in: work.path)
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains(completed), "\(test): the line reads \(result.stdout.debugDescription)")
    }

    /// fish: the script sourced, `complete -C` asked for the line's completions.
    @Test(arguments: cases)
    func fishCompletesFileNames(_ test: Case) throws {
        let work = try Self.workDirectory()
        let scripts = try TemporaryDirectory(prefix: "mirror-completion-script")
        let script = try Self.script(for: "fish", in: scripts, as: "mirror.fish")
        let result = try ExternalCommand.run(try ExternalCommand.executable("fish", package: "fish"),
                                             ["--no-config", "-c", "source $argv[1]; complete -C $argv[2]", script,
                                              test.words.joined(separator: " ")], in: work.path)
        try #require(result.status == 0, "\(result)")
        // One candidate a line, then a tab and its description; a directory ends in a slash.
        let offered = result.stdout.split(separator: "\n").map { line in
            String(line.prefix { $0 != "\t" }).trimmingCharacters(in: CharacterSet(charactersIn: "/"))
        }
        #expect(offered.contains(test.offered), "\(test): \(offered)")
        if let notOffered = test.notOffered { #expect(!offered.contains(notOffered), "\(test): \(offered)") }
    }

    /// Every argument and option whose value names a file or directory (by its value name in
    /// the help) is declared as one, so that each shell's script completes it: an option added
    /// later with such a value is held to the same.
    @Test func everyPathValueIsDeclaredForCompletion() throws {
        let directory = try TemporaryDirectory(prefix: "mirror-completion")
        let dump = try MirrorBinary.run(["--experimental-dump-help"], in: directory.path)
        try #require(dump.status == 0, "\(dump)")
        let root = try #require(try JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [String: Any])
        let pathNames: Set<String> = ["manifest", "file", "dir", "path", "out"]
        var checked: [String] = []
        func visit(_ command: [String: Any]) {
            let name = command["commandName"] as? String ?? "?"
            for argument in command["arguments"] as? [[String: Any]] ?? [] {
                guard let valueName = argument["valueName"] as? String, pathNames.contains(valueName) else { continue }
                let kind = (argument["completionKind"] as? [String: Any])?.keys.first
                #expect(kind == "file" || kind == "directory", "\(name) <\(valueName)> completes \(kind ?? "nothing")")
                checked.append("\(name) <\(valueName)>")
            }
            for subcommand in command["subcommands"] as? [[String: Any]] ?? [] { visit(subcommand) }
        }
        visit(try #require(root["command"] as? [String: Any]))
        #expect(checked.count >= 10, "the value names were found: \(checked)")
    }

    /// `make install` (PREFIX under a temporary directory, the debug binary) run with a home of
    /// its own and without XDG_DATA_DIRS, as Debian's login shells start.
    static func make(_ target: String, _ variables: [String], home: String) throws -> ExternalCommand.Result {
        try ExternalCommand.run("/usr/bin/env", ["-u", "XDG_DATA_DIRS", "HOME=\(home)", try ExternalCommand.executable("make", package: "make"),
                                                 "--no-print-directory", target, "MIRROR_BINARY=\(try MirrorBinary.path())"] + variables,
                                in: InstallTests.packageRoot)
    }

    /// What an interactive fish started in `home` offers for `mirror s`, with `prefix/bin` on
    /// its PATH and XDG_DATA_DIRS as given (nil: unset).
    static func fishOffersSync(home: String, bin: String, xdgDataDirs: String?) throws -> Bool {
        var arguments = ["-u", "XDG_DATA_DIRS", "HOME=\(home)", "PATH=\(bin):/usr/bin:/bin"]
        if let xdgDataDirs { arguments.append("XDG_DATA_DIRS=\(xdgDataDirs)") }
        arguments += [try ExternalCommand.executable("fish", package: "fish"), "-c", "complete -C 'mirror s'"]
        let result = try ExternalCommand.run("/usr/bin/env", arguments, in: home)
        try #require(result.status == 0, "\(result)")
        return result.stdout.split(separator: "\n").contains { $0.hasPrefix("sync\t") }
    }

    /// fish reads PREFIX/share/fish/vendor_completions.d only when PREFIX/share is in
    /// XDG_DATA_DIRS (Debian 12 sets none, so /usr/local is not read): `make install` says so
    /// exactly when the fish here does not read it, and the remedies it names work: the
    /// XDG_DATA_DIRS it names, or FISH_COMPLETIONS_DIR set to a directory fish reads (here the
    /// user's own; /etc/fish/completions for every user).
    @Test func makeInstallPutsTheFishCompletionWhereFishReadsItOrSaysHow() throws {
        let home = try TemporaryDirectory(prefix: "mirror-fish-home")
        let prefix = try TemporaryDirectory(prefix: "mirror-fish-prefix")
        let local = prefix.path("usr/local")
        let install = try Self.make("install", ["PREFIX=\(local)"], home: home.path)
        try #require(install.status == 0, "\(install)")
        let fishDirectory = local + "/share/fish/vendor_completions.d"
        #expect(FileManager.default.fileExists(atPath: fishDirectory + "/mirror.fish"))
        let readWithoutXDG = try Self.fishOffersSync(home: home.path, bin: local + "/bin", xdgDataDirs: nil)
        #expect(install.stderr.contains("note: fish does not read completions from \(fishDirectory)") == !readWithoutXDG, "\(install)")
        #expect(!readWithoutXDG || install.stderr.isEmpty, "\(install)")
        if !readWithoutXDG {
            #expect(install.stderr.contains("export XDG_DATA_DIRS=\(local)/share:/usr/share"), "\(install)")
        }
        #expect(try Self.fishOffersSync(home: home.path, bin: local + "/bin", xdgDataDirs: "\(local)/share:/usr/share"),
                "the XDG_DATA_DIRS the note names makes fish read it")

        let userCompletions = home.path(".config/fish/completions")
        let variables = ["PREFIX=\(prefix.path("opt"))", "FISH_COMPLETIONS_DIR=\(userCompletions)"]
        let elsewhere = try Self.make("install", variables, home: home.path)
        try #require(elsewhere.status == 0, "\(elsewhere)")
        #expect(FileManager.default.fileExists(atPath: userCompletions + "/mirror.fish"))
        #expect(!FileManager.default.fileExists(atPath: prefix.path("opt/share/fish")), "\(elsewhere)")
        #expect(!elsewhere.stderr.contains("note:"), "fish reads that directory: \(elsewhere)")
        #expect(try Self.fishOffersSync(home: home.path, bin: prefix.path("opt/bin"), xdgDataDirs: nil))
        let uninstall = try Self.make("uninstall", variables, home: home.path)
        #expect(uninstall.status == 0, "\(uninstall)")
        #expect(!FileManager.default.fileExists(atPath: userCompletions + "/mirror.fish"), "\(uninstall)")
    }
}
