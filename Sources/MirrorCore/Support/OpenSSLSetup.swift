import CCrypto

/// OpenSSL's libcrypto, loaded (it is not linked: `CCrypto`) and set up for this process once,
/// before anything else uses OpenSSL (libcurl's TLS, SHA-256): without the exit handler
/// OpenSSL registers by default.
///
/// That handler (`OPENSSL_cleanup`) frees OpenSSL's locks and tables while the process exits,
/// and any thread still inside OpenSSL at that moment crashes on them: the engine's thread
/// closing its last TLS connections when the run that owned it is released a moment after the
/// command returned, a hashing thread, a second Ctrl-C's immediate exit in the middle of a
/// handshake. The process is ending anyway, and its memory goes with it; nothing is left for a
/// cleanup to do but race those threads.
enum OpenSSLSetup {
    /// Nil once libcrypto is loaded and set up; otherwise why it cannot be.
    static let failure: String? = mirror_crypto_load().map { String(cString: $0) }

    /// Touch before any call into libcrypto or libssl, and before `curl_global_init`: whichever
    /// call initialises OpenSSL first decides whether it registers its exit handler. A caller
    /// that can report a library that is missing asks `CryptoLibrary.load` first; here it stops
    /// the process, as a linked library that is missing stops it before `main`.
    static var done: Void {
        if let failure { preconditionFailure(CryptoLibraryUnavailable(reason: failure).description) }
    }
}

/// libcrypto, for the digests: loaded where a command first needs it (a sync's on the thread
/// that loads libcurl, `NetworkPreparation`).
public enum CryptoLibrary {
    /// Loads and sets up libcrypto, once; throws when it cannot be loaded.
    public static func load() throws(CryptoLibraryUnavailable) {
        if let failure = OpenSSLSetup.failure { throw CryptoLibraryUnavailable(reason: failure) }
    }
}

/// libcrypto could not be loaded: not installed (Debian: libssl3), or not the one mirror was
/// built against.
public struct CryptoLibraryUnavailable: Error, CustomStringConvertible, Sendable {
    public let reason: String

    public var description: String {
        "cannot load libcrypto (\(reason)); install it (Debian and Ubuntu: apt-get install libssl3)"
    }
}
