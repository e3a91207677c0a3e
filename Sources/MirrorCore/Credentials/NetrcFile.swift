import Glibc

/// Finds and reads the netrc file curl's `--netrc-optional` would: `$NETRC` when set and not
/// empty, else `.netrc` in `$HOME` (or, without `HOME`, the user's home directory). A file that
/// does not exist means no logins, as in curl.
enum NetrcFile {
    /// No netrc file needs more than this.
    static let maximumSize = 1 << 20

    /// Why the netrc file cannot be used. The message names the file and a line, never a token.
    struct Problem: Error, Equatable {
        var message: String
    }

    /// The path curl would read, or nil when there is no home directory to look in.
    static func path(in environment: [String: String]) -> String? {
        if let path = environment["NETRC"], !path.isEmpty { return path }
        if let home = environment["HOME"], !home.isEmpty { return home + "/.netrc" }
        guard let entry = getpwuid(geteuid()), let directory = entry.pointee.pw_dir else { return nil }
        return String(cString: directory) + "/.netrc"
    }

    /// The netrc in effect for `environment`; nil when there is none.
    static func load(environment: [String: String]) throws(Problem) -> Netrc? {
        guard let path = path(in: environment) else { return nil }
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            if errno == ENOENT { return nil }
            throw Problem(message: "cannot read the netrc file `\(path)`: \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        let bytes: [UInt8]
        do {
            bytes = try WholeFile.read(descriptor, limit: maximumSize)
        } catch {
            switch error {
            case .system: throw Problem(message: "cannot read the netrc file `\(path)`: \(error)")
            case .tooLarge: throw Problem(message: "the netrc file `\(path)` is larger than \(maximumSize >> 20) MiB")
            }
        }
        do {
            return try Netrc.parse(bytes)
        } catch {
            throw Problem(message: "the netrc file `\(path)`, line \(error.line): \(error.message)")
        }
    }
}
