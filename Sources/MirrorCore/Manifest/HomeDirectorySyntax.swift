/// A leading `~` in a manifest key that names a local path (`root`, `ca_file`), as a shell
/// would read it: `~` and `~/dir` are the home directory (`HOME`). Written into YAML, neither
/// reaches a shell, and taken literally they would name a directory `~` beside the manifest.
enum HomeDirectorySyntax {
    /// `path` with a leading `~` or `~/` replaced by `home`; other paths unchanged.
    static func expand(_ path: String, home: String?) throws(ValueProblem) -> String {
        guard path.hasPrefix("~") else { return path }
        let rest = path.dropFirst()
        guard rest.isEmpty || rest.hasPrefix("/") else {
            let user = rest.prefix { $0 != "/" }
            throw ValueProblem("`~\(user)` (another user's home directory) is not expanded; write that directory's full path")
        }
        guard let home, home.hasPrefix("/") else {
            throw ValueProblem("`\(path)` starts with `~`, but HOME is not set to an absolute path; set HOME, or write the full path")
        }
        return home + rest
    }
}
