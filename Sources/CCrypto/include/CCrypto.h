// OpenSSL's libcrypto, for SHA-256 and SHA-512, loaded when first needed (dlopen) rather than
// when the process starts: linked, its symbols were resolved before `main` ran, 1.2 to 1.5 ms
// of every start (a program that only links it starts that much later). A sync loads it on the
// thread that loads libcurl, whose libssl needs it anyway, while its command line and manifest
// are read. `mirror_crypto_load` loads and sets it up, once; the entry points below call it
// through the table it fills, and are only called once it succeeded.
#ifndef MIRROR_CCRYPTO_H
#define MIRROR_CCRYPTO_H

#include <openssl/evp.h>
#include <stddef.h>

struct mirror_crypto_functions {
    EVP_MD_CTX *(*md_ctx_new)(void);
    void (*md_ctx_free)(EVP_MD_CTX *context);
    int (*digest_init_ex)(EVP_MD_CTX *context, const EVP_MD *type, ENGINE *engine);
    int (*digest_update)(EVP_MD_CTX *context, const void *data, size_t count);
    int (*digest_final_ex)(EVP_MD_CTX *context, unsigned char *digest, unsigned int *length);
    int (*digest)(const void *data, size_t count, unsigned char *digest, unsigned int *length, const EVP_MD *type, ENGINE *engine);
    // For `mirror_EVP_sha256` and `mirror_EVP_sha512`: OpenSSL 3's fetch (NULL in an older
    // libcrypto) and the legacy getters it falls back on.
    EVP_MD *(*fetch)(OSSL_LIB_CTX *context, const char *algorithm, const char *properties);
    const EVP_MD *(*legacy_sha256)(void);
    const EVP_MD *(*legacy_sha512)(void);
};

extern struct mirror_crypto_functions mirror_crypto_table;

// Loads libcrypto, resolves its functions and initialises OpenSSL without its exit handler
// (see OpenSSLSetup), once, from any thread: NULL once that is done, otherwise why not (the
// loader's message). The same answer on every call.
const char *mirror_crypto_load(void);

static inline EVP_MD_CTX *mirror_EVP_MD_CTX_new(void) { return mirror_crypto_table.md_ctx_new(); }
static inline void mirror_EVP_MD_CTX_free(EVP_MD_CTX *context) { mirror_crypto_table.md_ctx_free(context); }
static inline int mirror_EVP_DigestInit_ex(EVP_MD_CTX *context, const EVP_MD *type) {
    return mirror_crypto_table.digest_init_ex(context, type, NULL);
}
static inline int mirror_EVP_DigestUpdate(EVP_MD_CTX *context, const void *data, size_t count) {
    return mirror_crypto_table.digest_update(context, data, count);
}
static inline int mirror_EVP_DigestFinal_ex(EVP_MD_CTX *context, unsigned char *digest, unsigned int *length) {
    return mirror_crypto_table.digest_final_ex(context, digest, length);
}
static inline int mirror_EVP_Digest(const void *data, size_t count, unsigned char *digest, unsigned int *length, const EVP_MD *type) {
    return mirror_crypto_table.digest(data, count, digest, length, type, NULL);
}
// The algorithm, fetched from the default provider once, at the first call (see CryptoLibrary.c):
// OpenSSL 3 fetches the one behind `EVP_sha256()` again at every digest's start (about 5,000
// instructions; most of the cost of hashing a dest for `--shard`).
const EVP_MD *mirror_EVP_sha256(void);
const EVP_MD *mirror_EVP_sha512(void);

#endif
