#include "CCrypto.h"

#include <dlfcn.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>

struct mirror_crypto_functions mirror_crypto_table;

static pthread_once_t loading = PTHREAD_ONCE_INIT;
static char failure_text[512];
static const char *failure;

static void load(void) {
    // Bound at load, as libcurl is: a libcrypto without one of these fails here, before any
    // file is hashed.
    void *crypto = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);
    if (crypto == NULL) {
        const char *said = dlerror();
        snprintf(failure_text, sizeof failure_text, "%s", said != NULL ? said : "libcrypto.so.3 cannot be loaded");
        failure = failure_text;
        return;
    }
    int (*init_crypto)(uint64_t options, const OPENSSL_INIT_SETTINGS *settings);
    const EVP_MD *(*legacy_sha256)(void);
    const EVP_MD *(*legacy_sha512)(void);
    struct {
        void **slot;
        const char *name;
    } symbols[] = {
        {(void **)&init_crypto, "OPENSSL_init_crypto"},
        {(void **)&mirror_crypto_table.md_ctx_new, "EVP_MD_CTX_new"},
        {(void **)&mirror_crypto_table.md_ctx_free, "EVP_MD_CTX_free"},
        {(void **)&mirror_crypto_table.digest_init_ex, "EVP_DigestInit_ex"},
        {(void **)&mirror_crypto_table.digest_update, "EVP_DigestUpdate"},
        {(void **)&mirror_crypto_table.digest_final_ex, "EVP_DigestFinal_ex"},
        {(void **)&mirror_crypto_table.digest, "EVP_Digest"},
        {(void **)&legacy_sha256, "EVP_sha256"},
        {(void **)&legacy_sha512, "EVP_sha512"},
    };
    for (size_t i = 0; i < sizeof symbols / sizeof symbols[0]; i++) {
        *symbols[i].slot = dlsym(crypto, symbols[i].name);
        if (*symbols[i].slot == NULL) {
            snprintf(failure_text, sizeof failure_text, "libcrypto.so.3 has no %s", symbols[i].name);
            failure = failure_text;
            return;
        }
    }
    // Before libcurl's libssl or anything else initialises OpenSSL: the first call decides
    // whether OpenSSL registers its exit handler.
    if (!init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL)) {
        snprintf(failure_text, sizeof failure_text, "OpenSSL could not be initialised (OPENSSL_init_crypto failed)");
        failure = failure_text;
        return;
    }
    mirror_crypto_table.fetch = dlsym(crypto, "EVP_MD_fetch");
    mirror_crypto_table.legacy_sha256 = legacy_sha256;
    mirror_crypto_table.legacy_sha512 = legacy_sha512;
}

const char *mirror_crypto_load(void) {
    pthread_once(&loading, load);
    return failure;
}

// The algorithms fetched once each (OpenSSL 3), when first asked for rather than when the
// library is loaded: the first fetch sets up OpenSSL's default provider, about 5.4 million
// instructions (1.5 to 2 ms), which a run that hashes nothing (a no-op re-check, a plan) need
// not wait for before its first request. Where fetching fails, the legacy ones, fetched again
// at each digest's start as before.
static pthread_once_t fetching_sha256 = PTHREAD_ONCE_INIT;
static pthread_once_t fetching_sha512 = PTHREAD_ONCE_INIT;
static const EVP_MD *sha256;
static const EVP_MD *sha512;

// Called only once the library is loaded (`mirror_crypto_load` returned NULL); otherwise NULL.
static void fetch_sha256(void) {
    const EVP_MD *fetched = mirror_crypto_table.fetch != NULL ? mirror_crypto_table.fetch(NULL, "SHA256", NULL) : NULL;
    if (fetched == NULL && mirror_crypto_table.legacy_sha256 != NULL) fetched = mirror_crypto_table.legacy_sha256();
    sha256 = fetched;
}

static void fetch_sha512(void) {
    const EVP_MD *fetched = mirror_crypto_table.fetch != NULL ? mirror_crypto_table.fetch(NULL, "SHA512", NULL) : NULL;
    if (fetched == NULL && mirror_crypto_table.legacy_sha512 != NULL) fetched = mirror_crypto_table.legacy_sha512();
    sha512 = fetched;
}

const EVP_MD *mirror_EVP_sha256(void) {
    pthread_once(&fetching_sha256, fetch_sha256);
    return sha256;
}

const EVP_MD *mirror_EVP_sha512(void) {
    pthread_once(&fetching_sha512, fetch_sha512);
    return sha512;
}
