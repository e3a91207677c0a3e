// Loaded into `mirror` with LD_PRELOAD by the tests: makes the process exit while another
// thread is inside OpenSSL, every time instead of by chance.
//
// `exit` is replaced: before the real one runs, a thread is started that fetches and frees a
// digest in a loop, taking OpenSSL's global locks each round, and the caller waits until it
// has gone round 100 times. The real `exit` then runs the process's exit handlers while that
// thread keeps going. An OpenSSL that registered its clean-up as one of them frees those locks
// under the thread, which crashes the process (SIGSEGV or SIGABRT) in about 1 exit in 3.
// Only for a command that sets OpenSSL up itself (one that reads a manifest: sync, plan, lock,
// verify): in one that never does (report), this thread is the first to set it up, with the exit
// handler, and crashes it the same way.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

static atomic_int rounds;

static void *use_openssl(void *unused) {
    (void)unused;
    for (;;) {
        EVP_MD *digest = EVP_MD_fetch(NULL, "SHA256", NULL);
        EVP_MD_CTX *context = EVP_MD_CTX_new();
        EVP_DigestInit_ex(context, digest, NULL);
        EVP_MD_CTX_free(context);
        EVP_MD_free(digest);
        atomic_fetch_add(&rounds, 1);
    }
    return NULL;
}

void exit(int status) {
    pthread_t thread;
    if (pthread_create(&thread, NULL, use_openssl, NULL) == 0) {
        while (atomic_load(&rounds) < 100) {
        }
    }
    void (*real_exit)(int) = (void (*)(int))dlsym(RTLD_NEXT, "exit");
    real_exit(status);
    abort();
}
