/// The version `mirror --version` prints and the User-Agent carries.
public enum MirrorVersion {
    public static let string = "0.1.0"
}
