#include <openssl/crypto.h>
#include <openssl/evp.h>
