#ifndef DIPTYCH_CCURL_SHIM_H
#define DIPTYCH_CCURL_SHIM_H
/* Header only: libcurl.so.4 is loaded with dlopen at run time, only by a
 * server given --webhook (DiptychServer's CurlLibrary), so binaries run where
 * libcurl is not installed. The function pointer types come from the header's
 * own prototypes; curl_easy_setopt and curl_easy_getinfo are variadic, which
 * Swift cannot call, so each use has a typed helper here. */
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>
#include <dlfcn.h>

typedef __typeof__(curl_global_init) *diptych_curl_global_init_fn;
typedef __typeof__(curl_easy_init) *diptych_curl_easy_init_fn;
typedef __typeof__(curl_easy_cleanup) *diptych_curl_easy_cleanup_fn;
typedef __typeof__(curl_easy_perform) *diptych_curl_easy_perform_fn;
typedef __typeof__(curl_easy_strerror) *diptych_curl_easy_strerror_fn;
typedef __typeof__(curl_slist_append) *diptych_curl_slist_append_fn;
typedef __typeof__(curl_slist_free_all) *diptych_curl_slist_free_all_fn;
typedef CURLcode (*diptych_curl_easy_setopt_fn)(CURL *, CURLoption, ...);
typedef CURLcode (*diptych_curl_easy_getinfo_fn)(CURL *, CURLINFO, ...);

static inline CURLcode diptych_curl_setopt_long(diptych_curl_easy_setopt_fn f, CURL *h, CURLoption o, long v) {
    return f(h, o, v);
}
static inline CURLcode diptych_curl_setopt_pointer(diptych_curl_easy_setopt_fn f, CURL *h, CURLoption o, const void *v) {
    return f(h, o, v);
}
static inline CURLcode diptych_curl_setopt_write(diptych_curl_easy_setopt_fn f, CURL *h, curl_write_callback cb) {
    return f(h, CURLOPT_WRITEFUNCTION, cb);
}
static inline CURLcode diptych_curl_setopt_xferinfo(diptych_curl_easy_setopt_fn f, CURL *h, curl_xferinfo_callback cb) {
    return f(h, CURLOPT_XFERINFOFUNCTION, cb);
}
static inline CURLcode diptych_curl_getinfo_long(diptych_curl_easy_getinfo_fn f, CURL *h, CURLINFO i, long *v) {
    return f(h, i, v);
}
#endif
