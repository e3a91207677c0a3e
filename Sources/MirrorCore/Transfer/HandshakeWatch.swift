import CCurl

/// Hears from the TLS handshake of a connection libcurl opens that ALPN chose HTTP/2: the
/// origin's protocol is then known a round trip before its first reply would say it, and the
/// requests waiting for stream permits go out as the connections come up.
///
/// libcurl 7.88 makes a TLS context (`SSL_CTX`) for each connection and hands it to
/// `CURLOPT_SSL_CTX_FUNCTION` before the handshake; the watch lives as long as that context
/// (OpenSSL frees it with the context's ex_data), and its `heard` runs on the engine's thread,
/// inside `curl_multi_perform`.
final class HandshakeWatch: Sendable {
    private let heard: @Sendable (RequestBudget.OriginProtocol) -> Void

    private init(_ heard: @escaping @Sendable (RequestBudget.OriginProtocol) -> Void) {
        self.heard = heard
    }

    /// Whether libcurl's TLS is OpenSSL, whose `SSL_CTX` the watch reads (with the functions of
    /// the libssl libcurl loaded): libcurl hands
    /// `CURLOPT_SSL_CTX_FUNCTION` its own TLS library's context (wolfSSL's, mbedTLS's), or
    /// refuses the option (GnuTLS, NSS).
    static let isAvailable: Bool = {
        guard let info = mirror_curl_version_info(CURLVERSION_FIRST), let version = info.pointee.ssl_version else { return false }
        return String(cString: version).hasPrefix("OpenSSL/") && mirror_alpn_available() != 0
    }()

    /// The ex_data slot that frees a watch with its TLS context.
    private static let index = mirror_alpn_index()

    /// Watches the handshakes of `sslContext` (an `SSL_CTX *`): `heard(.http2)` once one
    /// chose HTTP/2. Any other choice says nothing here; the reply tells it.
    static func watch(_ sslContext: UnsafeMutableRawPointer, heard: @escaping @Sendable (RequestBudget.OriginProtocol) -> Void) {
        let watch = Unmanaged.passRetained(HandshakeWatch(heard)).toOpaque()
        _ = mirror_alpn_watch(sslContext, index, { context, http2 in
            guard http2 != 0, let context else { return }
            Unmanaged<HandshakeWatch>.fromOpaque(context).takeUnretainedValue().heard(.http2)
        }, { context in
            guard let context else { return }
            Unmanaged<HandshakeWatch>.fromOpaque(context).release()
        }, watch)
    }
}
