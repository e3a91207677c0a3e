// libcurl, loaded when first needed (dlopen) rather than when the process starts: with its
// two dozen libraries (GnuTLS, Kerberos, LDAP, SSH, ...) it took about 9 ms of every start,
// most of it resolving their symbols, before `main` ran. `mirror_curl_load` loads it, once;
// the typed entry points below call it through the table it fills, and are only called once
// it succeeded. One setter per argument kind for the variadic curl_easy_setopt and getinfo,
// which Swift cannot call, as their documentation groups them.
#ifndef MIRROR_CCURL_H
#define MIRROR_CCURL_H

#include <curl/curl.h>

// libcurl's functions, and the few of libssl's (as libcurl loaded it) that the TLS handshake
// watch reads an SSL_CTX with. The libssl ones are NULL when libcurl's TLS is not OpenSSL.
struct mirror_curl_functions {
    CURLcode (*global_init)(long flags);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *handle);
    void (*easy_reset)(CURL *handle);
    CURLcode (*easy_setopt)(CURL *handle, CURLoption option, ...);
    CURLcode (*easy_getinfo)(CURL *handle, CURLINFO info, ...);
    CURLcode (*easy_pause)(CURL *handle, int bitmask);
    const char *(*easy_strerror)(CURLcode code);
    CURLM *(*multi_init)(void);
    CURLMcode (*multi_cleanup)(CURLM *multi);
    CURLMcode (*multi_add_handle)(CURLM *multi, CURL *handle);
    CURLMcode (*multi_remove_handle)(CURLM *multi, CURL *handle);
    CURLMcode (*multi_perform)(CURLM *multi, int *running);
    CURLMcode (*multi_poll)(CURLM *multi, struct curl_waitfd *extra, unsigned int count, int timeout, int *ready);
    CURLMcode (*multi_wakeup)(CURLM *multi);
    CURLMcode (*multi_socket_action)(CURLM *multi, curl_socket_t s, int ev_bitmask, int *running);
    CURLMsg *(*multi_info_read)(CURLM *multi, int *queued);
    CURLMcode (*multi_setopt)(CURLM *multi, CURLMoption option, ...);
    struct curl_slist *(*slist_append)(struct curl_slist *list, const char *text);
    void (*slist_free_all)(struct curl_slist *list);
    curl_version_info_data *(*version_info)(CURLversion age);
    void (*free)(void *pointer);
    CURLU *(*url)(void);
    void (*url_cleanup)(CURLU *url);
    CURLUcode (*url_get)(const CURLU *url, CURLUPart part, char **text, unsigned int flags);
    CURLUcode (*url_set)(CURLU *url, CURLUPart part, const char *text, unsigned int flags);
};

extern struct mirror_curl_functions mirror_curl_table;

// Loads libcurl and resolves its functions, once, from any thread: NULL once they are
// there, otherwise why not (the loader's message). The same answer on every call.
const char *mirror_curl_load(void);

static inline CURLcode mirror_curl_global_init(long flags) { return mirror_curl_table.global_init(flags); }
static inline CURL *mirror_curl_easy_init(void) { return mirror_curl_table.easy_init(); }
static inline void mirror_curl_easy_cleanup(CURL *handle) { mirror_curl_table.easy_cleanup(handle); }
static inline void mirror_curl_easy_reset(CURL *handle) { mirror_curl_table.easy_reset(handle); }
static inline CURLcode mirror_curl_easy_pause(CURL *handle, int bitmask) { return mirror_curl_table.easy_pause(handle, bitmask); }
static inline CURLM *mirror_curl_multi_init(void) { return mirror_curl_table.multi_init(); }
static inline CURLMcode mirror_curl_multi_cleanup(CURLM *multi) { return mirror_curl_table.multi_cleanup(multi); }
static inline CURLMcode mirror_curl_multi_add_handle(CURLM *multi, CURL *handle) { return mirror_curl_table.multi_add_handle(multi, handle); }
static inline CURLMcode mirror_curl_multi_remove_handle(CURLM *multi, CURL *handle) { return mirror_curl_table.multi_remove_handle(multi, handle); }
static inline CURLMcode mirror_curl_multi_perform(CURLM *multi, int *running) { return mirror_curl_table.multi_perform(multi, running); }
static inline CURLMcode mirror_curl_multi_poll(CURLM *multi, struct curl_waitfd *extra, unsigned int count, int timeout, int *ready) {
    return mirror_curl_table.multi_poll(multi, extra, count, timeout, ready);
}
static inline CURLMcode mirror_curl_multi_wakeup(CURLM *multi) { return mirror_curl_table.multi_wakeup(multi); }
static inline CURLMcode mirror_curl_multi_socket_action(CURLM *multi, curl_socket_t s, int ev_bitmask, int *running) {
    return mirror_curl_table.multi_socket_action(multi, s, ev_bitmask, running);
}
static inline CURLMsg *mirror_curl_multi_info_read(CURLM *multi, int *queued) { return mirror_curl_table.multi_info_read(multi, queued); }
static inline struct curl_slist *mirror_curl_slist_append(struct curl_slist *list, const char *text) { return mirror_curl_table.slist_append(list, text); }
static inline void mirror_curl_slist_free_all(struct curl_slist *list) { mirror_curl_table.slist_free_all(list); }
static inline void mirror_curl_free(void *pointer) { mirror_curl_table.free(pointer); }
static inline CURLU *mirror_curl_url(void) { return mirror_curl_table.url(); }
static inline void mirror_curl_url_cleanup(CURLU *url) { mirror_curl_table.url_cleanup(url); }
static inline CURLUcode mirror_curl_url_get(const CURLU *url, CURLUPart part, char **text, unsigned int flags) {
    return mirror_curl_table.url_get(url, part, text, flags);
}
static inline CURLUcode mirror_curl_url_set(CURLU *url, CURLUPart part, const char *text, unsigned int flags) {
    return mirror_curl_table.url_set(url, part, text, flags);
}

// The two that may be asked before anything else loaded libcurl (a failure's description,
// which TLS library libcurl uses): they load it, and answer without it when it cannot be.
static inline const char *mirror_curl_easy_strerror(CURLcode code) {
    return mirror_curl_load() == NULL ? mirror_curl_table.easy_strerror(code) : "libcurl could not be loaded";
}
static inline curl_version_info_data *mirror_curl_version_info(CURLversion age) {
    return mirror_curl_load() == NULL ? mirror_curl_table.version_info(age) : NULL;
}

typedef size_t (*mirror_curl_data_callback)(char *ptr, size_t size, size_t nmemb, void *userdata);
typedef int (*mirror_curl_xferinfo_callback)(void *userdata, curl_off_t dltotal, curl_off_t dlnow,
                                             curl_off_t ultotal, curl_off_t ulnow);
typedef CURLcode (*mirror_curl_ssl_ctx_callback)(CURL *curl, void *ssl_ctx, void *userdata);

static inline CURLcode mirror_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return mirror_curl_table.easy_setopt(handle, option, value);
}

static inline CURLcode mirror_easy_setopt_off(CURL *handle, CURLoption option, curl_off_t value) {
    return mirror_curl_table.easy_setopt(handle, option, value);
}

static inline CURLcode mirror_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return mirror_curl_table.easy_setopt(handle, option, value);
}

static inline CURLcode mirror_easy_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return mirror_curl_table.easy_setopt(handle, option, value);
}

static inline CURLcode mirror_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return mirror_curl_table.easy_setopt(handle, option, value);
}

static inline CURLcode mirror_easy_setopt_data_callback(CURL *handle, CURLoption option,
                                                        mirror_curl_data_callback value) {
    return mirror_curl_table.easy_setopt(handle, option, value);
}

static inline CURLcode mirror_easy_setopt_xferinfo_callback(CURL *handle, mirror_curl_xferinfo_callback value) {
    return mirror_curl_table.easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, value);
}

static inline CURLcode mirror_easy_setopt_ssl_ctx_callback(CURL *handle, mirror_curl_ssl_ctx_callback value) {
    return mirror_curl_table.easy_setopt(handle, CURLOPT_SSL_CTX_FUNCTION, value);
}

typedef curl_socket_t (*mirror_curl_opensocket_callback)(void *clientp, curlsocktype purpose, struct curl_sockaddr *address);
static inline CURLcode mirror_easy_setopt_opensocket_callback(CURL *handle, mirror_curl_opensocket_callback value) {
    return mirror_curl_table.easy_setopt(handle, CURLOPT_OPENSOCKETFUNCTION, value);
}

static inline CURLcode mirror_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return mirror_curl_table.easy_getinfo(handle, info, value);
}

static inline CURLcode mirror_easy_getinfo_off(CURL *handle, CURLINFO info, curl_off_t *value) {
    return mirror_curl_table.easy_getinfo(handle, info, value);
}

static inline CURLcode mirror_easy_getinfo_string(CURL *handle, CURLINFO info, char **value) {
    return mirror_curl_table.easy_getinfo(handle, info, value);
}

static inline CURLcode mirror_easy_getinfo_pointer(CURL *handle, CURLINFO info, void **value) {
    return mirror_curl_table.easy_getinfo(handle, info, value);
}

static inline CURLMcode mirror_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return mirror_curl_table.multi_setopt(multi, option, value);
}

// Tells, once a TLS handshake is done, whether ALPN chose HTTP/2, for a TLS context libcurl
// made for one connection (libcurl 7.88 makes one per connection and hands it to
// CURLOPT_SSL_CTX_FUNCTION before the handshake). `context` is released with the TLS context.
typedef void (*mirror_alpn_heard)(void *context, int http2);
typedef void (*mirror_alpn_release)(void *context);

// Whether handshakes can be watched: libcurl's TLS is the libssl whose functions were found.
int mirror_alpn_available(void);
// The ex_data index that frees a watch with its TLS context; asked for once per process.
int mirror_alpn_index(void);
// Watches `ssl_ctx`'s handshakes; 0 when it could not (nothing is watched, `context` released).
int mirror_alpn_watch(void *ssl_ctx, int index, mirror_alpn_heard heard, mirror_alpn_release release, void *context);

#endif
