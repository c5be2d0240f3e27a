#ifndef DIPTYCH_CCRYPTO_SHIM_H
#define DIPTYCH_CCRYPTO_SHIM_H
/* Header only: OpenSSL's libcrypto.so.3 is loaded with dlopen at run time,
 * only by a server given --webhook (DiptychServer's WebhookSigner), for
 * HMAC-SHA256. The function pointer types come from the header's prototypes. */
#include <openssl/hmac.h>
#include <openssl/evp.h>
#include <dlfcn.h>

typedef __typeof__(HMAC) *diptych_hmac_fn;
typedef __typeof__(EVP_sha256) *diptych_evp_sha256_fn;
#endif
