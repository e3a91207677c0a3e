/// Whether an `ftp://` transfer secures its connections with `AUTH TLS` (explicit FTPS), the
/// manifest's `ftp_tls` key. An `ftps://` URL is implicit FTPS, TLS from the first byte,
/// whatever this says; http and https URLs ignore it.
public enum FTPTLS: String, Sendable, CaseIterable {
    /// Plain FTP, as curl without `--ssl`: the default.
    case no
    /// Ask for TLS, and go on in the clear if the server does not offer it (curl `--ssl`).
    case `try`
    /// TLS for the login and the data, or the transfer fails (curl `--ssl-reqd`).
    case required

    /// The manifest's spellings, for messages.
    static let choices = allCases.map { "`\($0.rawValue)`" }.joined(separator: ", ")
}
