#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <stdlib.h>
#include <string.h>

// Tells, once a TLS handshake is done, whether ALPN chose HTTP/2, for a TLS context libcurl
// made for one connection (libcurl 7.88 makes one per connection and hands it to
// CURLOPT_SSL_CTX_FUNCTION before the handshake). `context` is released with the TLS context.
typedef void (*mirror_alpn_heard)(void *context, int http2);
typedef void (*mirror_alpn_release)(void *context);

struct mirror_alpn_watch {
    mirror_alpn_heard heard;
    mirror_alpn_release release;
    void *context;
};

static void mirror_alpn_free(void *parent, void *pointer, CRYPTO_EX_DATA *data, int index, long argl, void *argp) {
    struct mirror_alpn_watch *watch = pointer;
    if (watch == NULL) return;
    watch->release(watch->context);
    free(watch);
}

// The ex_data index that frees a watch with its TLS context; asked for once per process.
static inline int mirror_alpn_index(void) {
    return SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, mirror_alpn_free);
}

static void mirror_alpn_info(const SSL *ssl, int where, int ret) {
    if (!(where & SSL_CB_HANDSHAKE_DONE)) return;
    struct mirror_alpn_watch *watch = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
    if (watch == NULL) return;
    const unsigned char *chosen = NULL;
    unsigned int length = 0;
    SSL_get0_alpn_selected(ssl, &chosen, &length);
    watch->heard(watch->context, length == 2 && memcmp(chosen, "h2", 2) == 0);
}

// Watches `ssl_ctx`'s handshakes; 0 when it could not (nothing is watched, `context` released).
static inline int mirror_alpn_watch(void *ssl_ctx, int index, mirror_alpn_heard heard,
                                    mirror_alpn_release release, void *context) {
    SSL_CTX *ctx = ssl_ctx;
    struct mirror_alpn_watch *watch = malloc(sizeof *watch);
    if (watch == NULL || index < 0 || SSL_CTX_get_app_data(ctx) != NULL) {
        free(watch);
        release(context);
        return 0;
    }
    watch->heard = heard;
    watch->release = release;
    watch->context = context;
    if (!SSL_CTX_set_ex_data(ctx, index, watch)) {
        free(watch);
        release(context);
        return 0;
    }
    SSL_CTX_set_app_data(ctx, watch);
    SSL_CTX_set_info_callback(ctx, mirror_alpn_info);
    return 1;
}
