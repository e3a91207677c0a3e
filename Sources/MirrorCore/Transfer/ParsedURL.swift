import CCurl

/// An http or https URL as libcurl parses a `CURLOPT_URL` (`CURLU`), made once for an entry's
/// source, on the thread that makes the source (the look-ahead's, nearly always): a request
/// that carries it (`TransferRequest.parsed`) hands libcurl the parts with the text
/// (`TransferContext.configure`), and the engine's thread neither parses the URL nor has
/// libcurl rebuild it from its parts.
///
/// libcurl only reads it (it copies the parts as a request starts), so any number of requests
/// may carry it at once; it is freed with its last holder.
final class ParsedURL: @unchecked Sendable {
    /// The URL it was parsed from.
    let text: String
    let handle: OpaquePointer

    /// Nil when libcurl will not parse `text`: a request with it lets libcurl parse the text
    /// and refuse it with its own error. libcurl must be loaded (any run that makes requests
    /// has it loaded before it makes its first source).
    init?(_ text: String) {
        guard curlGlobalInitialization == nil, let handle = Self.parse(text) else { return nil }
        self.text = text
        self.handle = handle
    }

    deinit { mirror_curl_url_cleanup(handle) }

    /// `text` parsed with the flags libcurl 7.88 parses a `CURLOPT_URL` with (`parseurlandfillconn`
    /// in its url.c), or nil when it will not parse; the caller frees it.
    static func parse(_ text: String) -> OpaquePointer? {
        guard let parsed = mirror_curl_url() else { return nil }
        let flags = UInt32(CURLU_GUESS_SCHEME) | UInt32(CURLU_NON_SUPPORT_SCHEME)
        guard mirror_curl_url_set(parsed, CURLUPART_URL, text, flags) == CURLUE_OK else {
            mirror_curl_url_cleanup(parsed)
            return nil
        }
        return parsed
    }
}
