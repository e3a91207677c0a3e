import CCurl

/// Raised when libcurl refuses an option while a transfer is being set up.
struct CurlSetupError: Error, CustomStringConvertible {
    var option: String
    var code: CURLcode

    var description: String {
        "libcurl rejected \(option): \(String(cString: mirror_curl_easy_strerror(code))) (code \(code.rawValue))"
    }
}

/// One libcurl easy handle, which one thread at a time has. `EasyHandleKeeper`
/// makes it and cleans it up on its thread; the transfer engine's thread uses it in between.
final class EasyHandle: @unchecked Sendable {
    let raw: UnsafeMutableRawPointer
    /// An option libcurl refused when the handle was made or reset (`TransferContext.prepare`): the
    /// request that takes the handle fails with it.
    var setupError: CurlSetupError?
    /// Where libcurl writes a failure's message (`CURLOPT_ERRORBUFFER`), for every request the
    /// handle carries; freed with it.
    let errorBuffer: UnsafeMutablePointer<CChar>

    init() {
        guard let handle = mirror_curl_easy_init() else {
            // curl_easy_init fails only when it cannot allocate; nothing sensible follows.
            fatalError("curl_easy_init failed: out of memory")
        }
        raw = handle
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
    }

    func cleanup() {
        mirror_curl_easy_cleanup(raw)
        errorBuffer.deallocate()
    }

    /// Every option back to libcurl's default, as `curl_easy_init` leaves them. Not all state:
    /// libcurl 7.88 keeps the last OS error (`EasyHandleKeeper.reusable`). Only for a handle
    /// outside the multi handle.
    func reset() {
        mirror_curl_easy_reset(raw)
    }

    func set(_ option: CURLoption, _ value: Int, _ name: String) throws(CurlSetupError) {
        try check(mirror_easy_setopt_long(raw, option, value), name)
    }

    func set(_ option: CURLoption, offset value: Int64, _ name: String) throws(CurlSetupError) {
        try check(mirror_easy_setopt_off(raw, option, curl_off_t(value)), name)
    }

    /// libcurl copies string options (since 7.17), so the Swift string need not outlive the call.
    func set(_ option: CURLoption, _ value: String, _ name: String) throws(CurlSetupError) {
        try check(value.withCString { mirror_easy_setopt_string(raw, option, $0) }, name)
    }

    func set(_ option: CURLoption, pointer value: UnsafeMutableRawPointer?, _ name: String) throws(CurlSetupError) {
        try check(mirror_easy_setopt_pointer(raw, option, value), name)
    }

    /// The list must live until the handle is cleaned up: libcurl keeps the pointer.
    func set(_ option: CURLoption, list value: UnsafeMutablePointer<curl_slist>?, _ name: String) throws(CurlSetupError) {
        try check(mirror_easy_setopt_slist(raw, option, value), name)
    }

    func set(_ option: CURLoption, callback: mirror_curl_data_callback, _ name: String) throws(CurlSetupError) {
        try check(mirror_easy_setopt_data_callback(raw, option, callback), name)
    }

    func infoLong(_ info: CURLINFO) -> Int {
        var value = 0
        return mirror_easy_getinfo_long(raw, info, &value) == CURLE_OK ? value : 0
    }

    func infoOffset(_ info: CURLINFO) -> Int64? {
        var value: curl_off_t = -1
        guard mirror_easy_getinfo_off(raw, info, &value) == CURLE_OK, value >= 0 else { return nil }
        return Int64(value)
    }

    func infoString(_ info: CURLINFO) -> String? {
        var value: UnsafeMutablePointer<CChar>?
        guard mirror_easy_getinfo_string(raw, info, &value) == CURLE_OK, let value else { return nil }
        return String(cString: value)
    }

    func check(_ code: CURLcode, _ name: String) throws(CurlSetupError) {
        if code != CURLE_OK { throw CurlSetupError(option: name, code: code) }
    }
}
