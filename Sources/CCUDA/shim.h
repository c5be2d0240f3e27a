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

/* CUDA's virtual memory management calls, which the ffnvcodec loader does not
 * load, looked up in the same libcuda.so.1: device memory that can be exported
 * as a POSIX file descriptor (for GL_EXT_memory_object_fd). The structs are
 * cuda.h's (CUDA 11/12) layouts. */
typedef struct { int type; int id; } diptych_CUmemLocation;
typedef struct {
    int type;                 /* CU_MEM_ALLOCATION_TYPE_PINNED = 1 */
    int requestedHandleTypes; /* CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1 */
    diptych_CUmemLocation location;
    void *win32HandleMetaData;
    struct { unsigned char compressionType, gpuDirectRDMACapable; unsigned short usage; unsigned char reserved[4]; } allocFlags;
} diptych_CUmemAllocationProp;
typedef struct { diptych_CUmemLocation location; int flags; } diptych_CUmemAccessDesc;
_Static_assert(sizeof(diptych_CUmemAllocationProp) == 32, "CUmemAllocationProp is 32 bytes");
_Static_assert(sizeof(diptych_CUmemAccessDesc) == 12, "CUmemAccessDesc is 12 bytes");

/* One exportable device allocation: its address, size and handle. */
typedef struct { unsigned long long address; size_t size; unsigned long long handle; } diptych_cuda_vmm_block;

typedef struct {
    int (*granularity)(size_t *, const diptych_CUmemAllocationProp *, int);
    int (*create)(unsigned long long *, size_t, const diptych_CUmemAllocationProp *, unsigned long long);
    int (*reserve)(unsigned long long *, size_t, size_t, unsigned long long, unsigned long long);
    int (*map)(unsigned long long, size_t, size_t, unsigned long long, unsigned long long);
    int (*access)(unsigned long long, size_t, const diptych_CUmemAccessDesc *, size_t);
    int (*export_)(void *, unsigned long long, int, unsigned long long);
    int (*unmap)(unsigned long long, size_t);
    int (*addressFree)(unsigned long long, size_t);
    int (*release)(unsigned long long);
} diptych_cuda_vmm_calls;

/* The calls, or NULL with `why` (256 bytes) naming the first one missing. */
static inline const diptych_cuda_vmm_calls *diptych_cuda_vmm(char *why) {
    static diptych_cuda_vmm_calls calls;
    static int state; /* 0 unknown, 1 loaded, -1 missing; the first call runs once (DiptychCUDA's `CUDAExportableMemory.calls`) */
    static char missing[64];
    if (state == 0) {
        void *lib = dlopen("libcuda.so.1", RTLD_NOW);
        const char *names[] = {"cuMemGetAllocationGranularity", "cuMemCreate", "cuMemAddressReserve", "cuMemMap", "cuMemSetAccess",
                               "cuMemExportToShareableHandle", "cuMemUnmap", "cuMemAddressFree", "cuMemRelease"};
        void **slots[] = {(void **)&calls.granularity, (void **)&calls.create, (void **)&calls.reserve, (void **)&calls.map,
                          (void **)&calls.access, (void **)&calls.export_, (void **)&calls.unmap, (void **)&calls.addressFree,
                          (void **)&calls.release};
        int ok = 1;
        for (int i = 0; i < 9 && ok; i++) {
            *slots[i] = lib ? dlsym(lib, names[i]) : NULL;
            if (!*slots[i]) { snprintf(missing, sizeof missing, "%s", lib ? names[i] : "libcuda.so.1"); ok = 0; }
        }
        state = ok ? 1 : -1;
    }
    if (state < 0) { snprintf(why, 256, "%s is missing", missing); return NULL; }
    return &calls;
}

/* Allocates at least `bytes` on `device` (the context current), exportable as
 * a POSIX fd, mapped read-write for that device. 0, or the failing CUresult
 * with its call in `why`. */
static inline int diptych_cuda_vmm_alloc(int device, size_t bytes, diptych_cuda_vmm_block *out, char *why) {
    const diptych_cuda_vmm_calls *c = diptych_cuda_vmm(why);
    if (!c) return -1;
    diptych_CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = 1; prop.requestedHandleTypes = 1; prop.location.type = 1; prop.location.id = device;
    size_t g = 0;
    int r = c->granularity(&g, &prop, 0);
    if (r) { snprintf(why, 256, "cuMemGetAllocationGranularity"); return r; }
    if (g == 0) g = 2 << 20;
    size_t size = (bytes + g - 1) / g * g;
    unsigned long long h = 0, a = 0;
    if ((r = c->create(&h, size, &prop, 0))) { snprintf(why, 256, "cuMemCreate(%zu)", size); return r; }
    if ((r = c->reserve(&a, size, g, 0, 0))) { snprintf(why, 256, "cuMemAddressReserve(%zu)", size); c->release(h); return r; }
    if ((r = c->map(a, size, 0, h, 0))) { snprintf(why, 256, "cuMemMap"); c->addressFree(a, size); c->release(h); return r; }
    diptych_CUmemAccessDesc access = {{1, device}, 3};
    if ((r = c->access(a, size, &access, 1))) {
        snprintf(why, 256, "cuMemSetAccess"); c->unmap(a, size); c->addressFree(a, size); c->release(h); return r;
    }
    out->address = a; out->size = size; out->handle = h;
    return 0;
}

/* A new file descriptor for the block (whoever imports it owns it); -1 on failure. */
static inline int diptych_cuda_vmm_export(const diptych_cuda_vmm_block *b) {
    char why[256];
    const diptych_cuda_vmm_calls *c = diptych_cuda_vmm(why);
    int fd = -1;
    if (!c || c->export_(&fd, b->handle, 1, 0)) return -1;
    return fd;
}

/* Unmaps and releases the block (GL's imports keep the memory until they go). */
static inline void diptych_cuda_vmm_free(const diptych_cuda_vmm_block *b) {
    char why[256];
    const diptych_cuda_vmm_calls *c = diptych_cuda_vmm(why);
    if (!c) return;
    c->unmap(b->address, b->size); c->addressFree(b->address, b->size); c->release(b->handle);
}

/* Copies `n` bytes into memory a copy engine reads next (page-locked bounce
 * buffers), with streaming stores where the CPU has them (SSE2): the
 * destination's cache lines are neither read first nor kept, so a copy from
 * ordinary memory moves each byte through memory twice instead of three
 * times. memcpy elsewhere. */
#include <stdint.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
static inline void diptych_stream_copy(void *dst, const void *src, size_t n) {
#if defined(__SSE2__)
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    size_t head = (16 - ((uintptr_t)d & 15)) & 15;
    if (head > n) head = n;
    memcpy(d, s, head);
    d += head; s += head; n -= head;
    for (; n >= 64; n -= 64, d += 64, s += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)s), b = _mm_loadu_si128((const __m128i *)(s + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(s + 32)), e = _mm_loadu_si128((const __m128i *)(s + 48));
        _mm_stream_si128((__m128i *)d, a);
        _mm_stream_si128((__m128i *)(d + 16), b);
        _mm_stream_si128((__m128i *)(d + 32), c);
        _mm_stream_si128((__m128i *)(d + 48), e);
    }
    _mm_sfence();
    memcpy(d, s, n);
#else
    memcpy(dst, src, n);
#endif
}

/* NVENC (libnvidia-encode.so.1), as FFmpeg's h264_nvenc/hevc_nvenc reach it:
 * the library, the highest API version the driver takes against the one the
 * headers (and so FFmpeg) were built for, and an encode session opened on a
 * CUDA context, asked for its codecs and their limits, then closed.
 * `status` is NvEncOpenEncodeSessionEx's NVENCSTATUS (0: it opened). */
typedef struct { int h264, hevc; int max_width, max_height, b_frames, ten_bit; } diptych_nvenc_codec_caps;
typedef struct {
    unsigned driver_version, built_version; /* (major << 4) | minor */
    int status;                             /* -1: the session was not tried */
    diptych_nvenc_codec_caps codecs[4];
    int codec_count;
} diptych_nvenc_report;

/* Loads libnvidia-encode.so.1; `why` (256 bytes) as for CUDA. */
static inline int diptych_nvenc_load(NvencFunctions **functions, char *why) {
    why[0] = 0;
    int r = nvenc_load_functions(functions, why);
    if (r != 0) diptych_cuda_load_reason(why);
    return r;
}

static inline void diptych_nvenc_examine(NvencFunctions *nv, CUcontext context, diptych_nvenc_report *out) {
    memset(out, 0, sizeof *out);
    out->status = -1;
    out->built_version = (NVENCAPI_MAJOR_VERSION << 4) | NVENCAPI_MINOR_VERSION;
    uint32_t max = 0;
    if (nv->NvEncodeAPIGetMaxSupportedVersion(&max) != NV_ENC_SUCCESS) return;
    out->driver_version = max;
    if (max < out->built_version) return;
    NV_ENCODE_API_FUNCTION_LIST fl;
    memset(&fl, 0, sizeof fl);
    fl.version = NV_ENCODE_API_FUNCTION_LIST_VER;
    NVENCSTATUS s = nv->NvEncodeAPICreateInstance(&fl);
    if (s != NV_ENC_SUCCESS) { out->status = s; return; }
    NV_ENC_OPEN_ENCODE_SESSION_EX_PARAMS p;
    memset(&p, 0, sizeof p);
    p.version = NV_ENC_OPEN_ENCODE_SESSION_EX_PARAMS_VER;
    p.deviceType = NV_ENC_DEVICE_TYPE_CUDA;
    p.device = context;
    p.apiVersion = NVENCAPI_VERSION;
    void *encoder = NULL;
    out->status = fl.nvEncOpenEncodeSessionEx(&p, &encoder);
    if (out->status != NV_ENC_SUCCESS) return;
    uint32_t n = 0, got = 0;
    GUID guids[16];
    fl.nvEncGetEncodeGUIDCount(encoder, &n);
    fl.nvEncGetEncodeGUIDs(encoder, guids, n < 16 ? n : 16, &got);
    for (uint32_t i = 0; i < got && out->codec_count < 4; i++) {
        diptych_nvenc_codec_caps c;
        memset(&c, 0, sizeof c);
        c.h264 = !memcmp(&guids[i], &NV_ENC_CODEC_H264_GUID, sizeof(GUID));
        c.hevc = !memcmp(&guids[i], &NV_ENC_CODEC_HEVC_GUID, sizeof(GUID));
        if (!c.h264 && !c.hevc) continue;
        NV_ENC_CAPS which[] = {NV_ENC_CAPS_WIDTH_MAX, NV_ENC_CAPS_HEIGHT_MAX, NV_ENC_CAPS_NUM_MAX_BFRAMES, NV_ENC_CAPS_SUPPORT_10BIT_ENCODE};
        int *into[] = {&c.max_width, &c.max_height, &c.b_frames, &c.ten_bit};
        for (int k = 0; k < 4; k++) {
            NV_ENC_CAPS_PARAM q;
            memset(&q, 0, sizeof q);
            q.version = NV_ENC_CAPS_PARAM_VER;
            q.capsToQuery = which[k];
            fl.nvEncGetEncodeCaps(encoder, guids[i], &q, into[k]);
        }
        out->codecs[out->codec_count++] = c;
    }
    fl.nvEncDestroyEncoder(encoder);
}
#endif
