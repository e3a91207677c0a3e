import CCrypto

/// OpenSSL's set-up for this process, done once before anything else uses OpenSSL (libcurl's
/// TLS, SHA-256): without the exit handler OpenSSL registers by default.
///
/// That handler (`OPENSSL_cleanup`) frees OpenSSL's locks and tables while the process exits,
/// and any thread still inside OpenSSL at that moment crashes on them: the engine's thread
/// closing its last TLS connections when the run that owned it is released a moment after the
/// command returned, a hashing thread, a second Ctrl-C's immediate exit in the middle of a
/// handshake. The process is ending anyway, and its memory goes with it; nothing is left for a
/// cleanup to do but race those threads.
enum OpenSSLSetup {
    /// Touch before any call into libcrypto or libssl, and before `curl_global_init`: whichever
    /// call initialises OpenSSL first decides whether it registers its exit handler.
    static let done: Void = {
        _ = OPENSSL_init_crypto(UInt64(OPENSSL_INIT_NO_ATEXIT), nil)
    }()
}
