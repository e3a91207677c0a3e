#include "CCurl.h"

#include <dlfcn.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct mirror_curl_functions mirror_curl_table;

static pthread_once_t loading = PTHREAD_ONCE_INIT;
static char failure_text[512];
static const char *failure;

// libssl's functions that the handshake watch calls, from the libssl libcurl loaded.
static struct {
    int (*get_ex_new_index)(int class_index, long argl, void *argp, CRYPTO_EX_new *new_func,
                            CRYPTO_EX_dup *dup_func, CRYPTO_EX_free *free_func);
    int (*ctx_set_ex_data)(SSL_CTX *ctx, int index, void *data);
    void *(*ctx_get_ex_data)(const SSL_CTX *ctx, int index);
    void (*ctx_set_info_callback)(SSL_CTX *ctx, void (*callback)(const SSL *ssl, int where, int ret));
    SSL_CTX *(*get_ssl_ctx)(const SSL *ssl);
    void (*get0_alpn_selected)(const SSL *ssl, const unsigned char **data, unsigned int *length);
} ssl;

struct symbol {
    void **slot;
    const char *name;
};

// Resolves every symbol in `library`; 0 when one is missing, with the reason in `failure` when
// they are `required` (otherwise every slot is emptied: the set is used whole or not at all).
static int resolve(void *library, const char *library_name, struct symbol *symbols, size_t count, int required) {
    for (size_t i = 0; i < count; i++) {
        *symbols[i].slot = dlsym(library, symbols[i].name);
        if (*symbols[i].slot != NULL) continue;
        if (required) {
            snprintf(failure_text, sizeof failure_text, "%s has no %s", library_name, symbols[i].name);
            failure = failure_text;
        } else {
            for (size_t j = 0; j < count; j++) *symbols[j].slot = NULL;
        }
        return 0;
    }
    return 1;
}

static void load(void) {
    // Bound at load: a dependency that lacks a function fails here, as a library that
    // cannot be loaded (exit 2 before any request), not at its first call in the middle of
    // a run. Lazily bound it loads in 8.1 ms instead of 9.0 (most of the libraries it brings
    // are marked to bind at load anyway).
    void *curl = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (curl == NULL) {
        const char *said = dlerror();
        snprintf(failure_text, sizeof failure_text, "%s", said != NULL ? said : "libcurl.so.4 cannot be loaded");
        failure = failure_text;
        return;
    }
    struct symbol functions[] = {
        {(void **)&mirror_curl_table.global_init, "curl_global_init"},
        {(void **)&mirror_curl_table.easy_init, "curl_easy_init"},
        {(void **)&mirror_curl_table.easy_cleanup, "curl_easy_cleanup"},
        {(void **)&mirror_curl_table.easy_reset, "curl_easy_reset"},
        {(void **)&mirror_curl_table.easy_setopt, "curl_easy_setopt"},
        {(void **)&mirror_curl_table.easy_getinfo, "curl_easy_getinfo"},
        {(void **)&mirror_curl_table.easy_pause, "curl_easy_pause"},
        {(void **)&mirror_curl_table.easy_strerror, "curl_easy_strerror"},
        {(void **)&mirror_curl_table.multi_init, "curl_multi_init"},
        {(void **)&mirror_curl_table.multi_cleanup, "curl_multi_cleanup"},
        {(void **)&mirror_curl_table.multi_add_handle, "curl_multi_add_handle"},
        {(void **)&mirror_curl_table.multi_remove_handle, "curl_multi_remove_handle"},
        {(void **)&mirror_curl_table.multi_perform, "curl_multi_perform"},
        {(void **)&mirror_curl_table.multi_poll, "curl_multi_poll"},
        {(void **)&mirror_curl_table.multi_wakeup, "curl_multi_wakeup"},
        {(void **)&mirror_curl_table.multi_socket_action, "curl_multi_socket_action"},
        {(void **)&mirror_curl_table.multi_info_read, "curl_multi_info_read"},
        {(void **)&mirror_curl_table.multi_setopt, "curl_multi_setopt"},
        {(void **)&mirror_curl_table.slist_append, "curl_slist_append"},
        {(void **)&mirror_curl_table.slist_free_all, "curl_slist_free_all"},
        {(void **)&mirror_curl_table.version_info, "curl_version_info"},
        {(void **)&mirror_curl_table.free, "curl_free"},
        {(void **)&mirror_curl_table.url, "curl_url"},
        {(void **)&mirror_curl_table.url_cleanup, "curl_url_cleanup"},
        {(void **)&mirror_curl_table.url_get, "curl_url_get"},
        {(void **)&mirror_curl_table.url_set, "curl_url_set"},
    };
    if (!resolve(curl, "libcurl.so.4", functions, sizeof functions / sizeof functions[0], 1)) return;
    // The libssl libcurl brought (none when its TLS is another library's): the watch reads
    // the contexts libcurl makes with it, so it must be that one.
    void *tls = dlopen("libssl.so.3", RTLD_NOW | RTLD_NOLOAD);
    if (tls == NULL) return;
    struct symbol tls_functions[] = {
        {(void **)&ssl.get_ex_new_index, "CRYPTO_get_ex_new_index"},
        {(void **)&ssl.ctx_set_ex_data, "SSL_CTX_set_ex_data"},
        {(void **)&ssl.ctx_get_ex_data, "SSL_CTX_get_ex_data"},
        {(void **)&ssl.ctx_set_info_callback, "SSL_CTX_set_info_callback"},
        {(void **)&ssl.get_ssl_ctx, "SSL_get_SSL_CTX"},
        {(void **)&ssl.get0_alpn_selected, "SSL_get0_alpn_selected"},
    };
    resolve(tls, "libssl.so.3", tls_functions, sizeof tls_functions / sizeof tls_functions[0], 0);
}

const char *mirror_curl_load(void) {
    pthread_once(&loading, load);
    return failure;
}

int mirror_alpn_available(void) {
    return mirror_curl_load() == NULL && ssl.get0_alpn_selected != NULL;
}

struct mirror_alpn_watch {
    mirror_alpn_heard heard;
    mirror_alpn_release release;
    void *context;
};

static void alpn_free(void *parent, void *pointer, CRYPTO_EX_DATA *data, int index, long argl, void *argp) {
    (void)parent, (void)data, (void)index, (void)argl, (void)argp;
    struct mirror_alpn_watch *watch = pointer;
    if (watch == NULL) return;
    watch->release(watch->context);
    free(watch);
}

int mirror_alpn_index(void) {
    if (!mirror_alpn_available()) return -1;
    return ssl.get_ex_new_index(CRYPTO_EX_INDEX_SSL_CTX, 0, NULL, NULL, NULL, alpn_free);
}

static void alpn_info(const SSL *connection, int where, int ret) {
    (void)ret;
    if (!(where & SSL_CB_HANDSHAKE_DONE)) return;
    // The watch is the context's app data (its ex_data slot 0).
    struct mirror_alpn_watch *watch = ssl.ctx_get_ex_data(ssl.get_ssl_ctx(connection), 0);
    if (watch == NULL) return;
    const unsigned char *chosen = NULL;
    unsigned int length = 0;
    ssl.get0_alpn_selected(connection, &chosen, &length);
    watch->heard(watch->context, length == 2 && memcmp(chosen, "h2", 2) == 0);
}

int mirror_alpn_watch(void *ssl_ctx, int index, mirror_alpn_heard heard, mirror_alpn_release release, void *context) {
    SSL_CTX *ctx = ssl_ctx;
    struct mirror_alpn_watch *watch = malloc(sizeof *watch);
    if (watch == NULL || index < 0 || !mirror_alpn_available() || ssl.ctx_get_ex_data(ctx, 0) != NULL) {
        free(watch);
        release(context);
        return 0;
    }
    watch->heard = heard;
    watch->release = release;
    watch->context = context;
    if (!ssl.ctx_set_ex_data(ctx, index, watch)) {
        free(watch);
        release(context);
        return 0;
    }
    ssl.ctx_set_ex_data(ctx, 0, watch);
    ssl.ctx_set_info_callback(ctx, alpn_info);
    return 1;
}
