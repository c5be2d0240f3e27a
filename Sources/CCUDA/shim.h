#ifndef DIPTYCH_CCUDA_SHIM_H
#define DIPTYCH_CCUDA_SHIM_H
/* The CUDA driver API and NVDEC's libnvcuvid, through FFmpeg's ffnvcodec
 * headers (libffmpeg-nvenc-dev): types only at build time, the libraries
 * opened with dlopen at run time, so binaries run where there is no NVIDIA
 * driver. The loader's messages go into the caller's buffer, not stderr. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <dlfcn.h>

static inline void diptych_cuda_log(void *buffer, const char *format, ...) {
    if (!buffer) return;
    va_list ap;
    va_start(ap, format);
    vsnprintf((char *)buffer, 256, format, ap);
    va_end(ap);
}
#define FFNV_LOG_FUNC(logctx, msg, ...) diptych_cuda_log((logctx), (msg), __VA_ARGS__)
#define FFNV_DEBUG_LOG_FUNC(logctx, msg, ...)
#include <ffnvcodec/dynlink_loader.h>

/* On a failed load, dlerror's reason (the library or symbol and why) in
 * place of the loader's own line when there is one. */
static inline void diptych_cuda_load_reason(char *why) {
    const char *e = dlerror();
    if (e) snprintf(why, 256, "%s", e);
    size_t n = strlen(why);
    while (n > 0 && why[n - 1] == '\n') why[--n] = 0;
}

/* Loads libcuda.so.1; on failure `why` (256 bytes) says what was missing. */
static inline int diptych_cuda_load(CudaFunctions **functions, char *why) {
    why[0] = 0;
    int r = cuda_load_functions(functions, why);
    if (r != 0) diptych_cuda_load_reason(why);
    return r;
}

/* Loads libnvcuvid.so.1 (NVDEC); `why` as above. */
static inline int diptych_cuvid_load(CuvidFunctions **functions, char *why) {
    why[0] = 0;
    int r = cuvid_load_functions(functions, why);
    if (r != 0) diptych_cuda_load_reason(why);
    return r;
}
#endif
