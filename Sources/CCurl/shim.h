// Typed entry points into libcurl's variadic API, which Swift cannot call.
// One setter per argument kind, as curl_easy_setopt's documentation groups them.
#ifndef MIRROR_CCURL_SHIM_H
#define MIRROR_CCURL_SHIM_H

#include <curl/curl.h>

typedef size_t (*mirror_curl_data_callback)(char *ptr, size_t size, size_t nmemb, void *userdata);
typedef int (*mirror_curl_xferinfo_callback)(void *userdata, curl_off_t dltotal, curl_off_t dlnow,
                                             curl_off_t ultotal, curl_off_t ulnow);

static inline CURLcode mirror_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode mirror_easy_setopt_off(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode mirror_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode mirror_easy_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode mirror_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode mirror_easy_setopt_data_callback(CURL *handle, CURLoption option,
                                                        mirror_curl_data_callback value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode mirror_easy_setopt_xferinfo_callback(CURL *handle, mirror_curl_xferinfo_callback value) {
    return curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, value);
}

typedef CURLcode (*mirror_curl_ssl_ctx_callback)(CURL *curl, void *ssl_ctx, void *userdata);

static inline CURLcode mirror_easy_setopt_ssl_ctx_callback(CURL *handle, mirror_curl_ssl_ctx_callback value) {
    return curl_easy_setopt(handle, CURLOPT_SSL_CTX_FUNCTION, value);
}

static inline CURLcode mirror_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode mirror_easy_getinfo_off(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode mirror_easy_getinfo_string(CURL *handle, CURLINFO info, char **value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode mirror_easy_getinfo_pointer(CURL *handle, CURLINFO info, void **value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLMcode mirror_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}

#endif
