/// A user name and password from a netrc file, for one URL's host. The password is kept out of
/// `description`.
public struct NetrcLogin: Sendable, Hashable, CustomStringConvertible {
    public var user: String
    public var password: String

    public init(user: String, password: String) {
        self.user = user
        self.password = password
    }

    public var description: String { "\(user):<redacted>" }
}
