// Can memory that CUDA allocates be a GL buffer with no cuGraphics* calls at all? CUDA allocates
// with the virtual memory management API (cuMemCreate, POSIX fd handle type, cuMemAddressReserve,
// cuMemMap, cuMemSetAccess) and exports an fd (cuMemExportToShareableHandle); a headless GLES 3.2
// context on the first EGL device imports it (GL_EXT_memory_object_fd: glImportMemoryFdEXT,
// glBufferStorageMemEXT) as an SSBO. Check: CUDA writes A, a compute shader writes B = A ^ 0x5a5a5a5a,
// CUDA reads B and every word is compared. Then 1080p NV12 frames (3,110,400 bytes) written by a
// compute shader into a ring of 8 imported slots are read back:
//   gl-readback    glCopyBufferSubData into a persistently mapped READ|PERSISTENT|COHERENT buffer,
//                  a fence per frame, 4 frames in flight
//   cuda-readback  a fence per dispatch; once it signals, cuMemcpyDtoHAsync of the slot into
//                  cuMemHostAlloc memory; GL runs 4 frames ahead of CUDA, 4 copies in flight
//   compute-only   the dispatches with a fence per frame (the GL queue's own rate)
// Word 0 of each frame read back is checked ("stale" counts mismatches). Single-threaded;
// libcuda.so.1 is loaded at run time (no CUDA toolkit needed).
// Build: gcc -O2 cuda_gl_extmem.c -ldl -lEGL -lGLESv2 -lpthread -o cuda_gl_extmem
// Run:   ./cuda_gl_extmem [frames=2000] [dedicated]
//        "dedicated" sets GL_DEDICATED_MEMORY_OBJECT_EXT before each import.
#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <GLES3/gl32.h>
#include <GLES2/gl2ext.h>
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifndef GL_HANDLE_TYPE_OPAQUE_FD_EXT   // values as in Khronos gl2ext.h
#define GL_HANDLE_TYPE_OPAQUE_FD_EXT 0x9586
#endif
#ifndef GL_DEDICATED_MEMORY_OBJECT_EXT
#define GL_DEDICATED_MEMORY_OBJECT_EXT 0x9581
#define GL_DEVICE_UUID_EXT 0x9597
#endif
#ifndef GL_MAP_PERSISTENT_BIT_EXT
#define GL_MAP_PERSISTENT_BIT_EXT 0x0040
#define GL_MAP_COHERENT_BIT_EXT 0x0080
#endif

// CUDA driver API, by hand (layouts as in cuda.h of CUDA 11.x/12.x; enums are 4-byte ints)
typedef int CUresult, CUdevice;
typedef void *CUcontext, *CUstream, *CUevent;
typedef unsigned long long CUdeviceptr, CUmemGenericAllocationHandle;
typedef struct { int type; int id; } CUmemLocation;   // CUmemLocationType type; int id
typedef struct {
    int type;                   // CUmemAllocationType
    int requestedHandleTypes;   // CUmemAllocationHandleType
    CUmemLocation location;
    void *win32HandleMetaData;
    struct { unsigned char compressionType, gpuDirectRDMACapable; unsigned short usage; unsigned char reserved[4]; } allocFlags;
} CUmemAllocationProp;
typedef struct { CUmemLocation location; int flags; } CUmemAccessDesc;   // flags: CUmemAccess_flags
_Static_assert(sizeof(CUmemLocation) == 8 && sizeof(CUmemAccessDesc) == 12, "CUmemLocation/CUmemAccessDesc layout");
_Static_assert(sizeof(CUmemAllocationProp) == 32 && offsetof(CUmemAllocationProp, win32HandleMetaData) == 16 &&
               offsetof(CUmemAllocationProp, allocFlags) == 24, "CUmemAllocationProp layout");
enum { CU_MEM_ALLOCATION_TYPE_PINNED = 1, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1, CU_MEM_LOCATION_TYPE_DEVICE = 1,
       CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3, CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0, CU_STREAM_NON_BLOCKING = 1,
       CU_EVENT_DISABLE_TIMING = 2, CUDA_ERROR_NOT_READY = 600 };
static CUresult (*cuInit)(unsigned), (*cuDeviceGet)(CUdevice *, int), (*cuGetErrorName)(CUresult, const char **),
    (*cuDeviceGetUuid)(unsigned char *, CUdevice);   // CUuuid is 16 bytes
static CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice), (*cuCtxSetCurrent)(CUcontext), (*cuCtxSynchronize)(void);
static CUresult (*cuMemGetAllocationGranularity)(size_t *, const CUmemAllocationProp *, int);
static CUresult (*cuMemCreate)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
static CUresult (*cuMemAddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
static CUresult (*cuMemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
static CUresult (*cuMemSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
static CUresult (*cuMemExportToShareableHandle)(void *, CUmemGenericAllocationHandle, int, unsigned long long);
static CUresult (*cuMemHostAlloc)(void **, size_t, unsigned), (*cuStreamCreate)(CUstream *, unsigned), (*cuStreamSynchronize)(CUstream);
static CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t), (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
static CUresult (*cuEventCreate)(CUevent *, unsigned), (*cuEventRecord)(CUevent, CUstream), (*cuEventQuery)(CUevent);
static PFNGLCREATEMEMORYOBJECTSEXTPROC glCreateMemoryObjectsEXT_; static PFNGLDELETEMEMORYOBJECTSEXTPROC glDeleteMemoryObjectsEXT_;
static PFNGLMEMORYOBJECTPARAMETERIVEXTPROC glMemoryObjectParameterivEXT_; static PFNGLIMPORTMEMORYFDEXTPROC glImportMemoryFdEXT_;
static PFNGLBUFFERSTORAGEMEMEXTPROC glBufferStorageMemEXT_; static PFNGLBUFFERSTORAGEEXTPROC glBufferStorageEXT_;
static PFNGLGETUNSIGNEDBYTEI_VEXTPROC glGetUnsignedBytei_vEXT_;

#define FRAME (1920 * 1080 * 3 / 2)   // bytes of one NV12 frame
#define WORDS (FRAME / 4)
#define SLOT (3u << 20)                // ring stride: 3 MiB, aligned for any SSBO offset rule
enum { RING = 8, INFLIGHT = 4 };
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static void check(CUresult r, const char *what) {
    const char *s = 0; if (r && cuGetErrorName) cuGetErrorName(r, &s);
    if (r) { fprintf(stderr, "%s: CUDA error %d %s\n", what, r, s ? s : ""); exit(1); }
}
static void egl_die(const char *what) { fprintf(stderr, "%s failed: EGL error 0x%x\n", what, eglGetError()); exit(1); }
static void glcheck(const char *what) { GLenum e = glGetError(); if (e) { fprintf(stderr, "%s: GL error 0x%x\n", what, e); exit(1); } }
static void *sym(void *lib, const char *name) {
    void *p = dlsym(lib, name); if (!p) { fprintf(stderr, "libcuda.so.1 lacks %s\n", name); exit(1); } return p;
}
static void *glsym(const char *name) {
    void *p = (void *)eglGetProcAddress(name); if (!p) { fprintf(stderr, "eglGetProcAddress(%s) returned NULL\n", name); exit(1); } return p;
}
static int has_ext(const char *list, const char *name) {   // whole-token match
    size_t n = strlen(name); const char *p = list;
    for (; p && (p = strstr(p, name)); p += n) if ((p == list || p[-1] == ' ') && (p[n] == ' ' || !p[n])) return 1;
    return 0;
}
static void wait_fence(GLsync s, const char *what) {   // 1 s waits, give up after 5 s
    double t0 = now();
    for (;;) {
        GLenum r = glClientWaitSync(s, GL_SYNC_FLUSH_COMMANDS_BIT, 1000000000ull);
        if (r == GL_ALREADY_SIGNALED || r == GL_CONDITION_SATISFIED) break;
        if (r == GL_WAIT_FAILED) { fprintf(stderr, "%s: glClientWaitSync failed, GL error 0x%x\n", what, glGetError()); exit(1); }
        if (now() - t0 > 5) { fprintf(stderr, "%s: fence not signalled after 5 s\n", what); exit(1); }
    }
    glDeleteSync(s);
}
static void wait_event(CUevent e, const char *what) {   // poll, give up after 5 s
    double t0 = now(); CUresult r;
    while ((r = cuEventQuery(e)) == CUDA_ERROR_NOT_READY)
        if (now() - t0 > 5) { fprintf(stderr, "%s: CUDA event not complete after 5 s\n", what); exit(1); }
    check(r, what);
}
static unsigned touch;
static int retire(const unsigned char *q, int g) {   // one byte per 4 KiB; 1 if word 0 is not frame g's
    for (size_t o = 0; o < FRAME; o += 4096) touch += q[o];
    return *(const unsigned *)q != (unsigned)g;
}
static int dedicated; static size_t gran; static CUdevice dev;
static CUmemAllocationProp prop;   // pinned device memory on dev, exportable as a POSIX fd (set in main)
// CUDA VMM allocation of size bytes (a multiple of gran), exported as an fd and imported as a GL buffer
static GLuint import_cuda(size_t size, CUdeviceptr *dptr, GLuint *memobj) {
    CUmemGenericAllocationHandle h; check(cuMemCreate(&h, size, &prop, 0), "cuMemCreate");
    check(cuMemAddressReserve(dptr, size, gran, 0, 0), "cuMemAddressReserve"); check(cuMemMap(*dptr, size, 0, h, 0), "cuMemMap");
    CUmemAccessDesc a = {{CU_MEM_LOCATION_TYPE_DEVICE, dev}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    check(cuMemSetAccess(*dptr, size, &a, 1), "cuMemSetAccess");
    int fd = -1; check(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), "cuMemExportToShareableHandle");
    GLint one = 1; glCreateMemoryObjectsEXT_(1, memobj); glcheck("glCreateMemoryObjectsEXT");
    if (dedicated) { glMemoryObjectParameterivEXT_(*memobj, GL_DEDICATED_MEMORY_OBJECT_EXT, &one); glcheck("glMemoryObjectParameterivEXT"); }
    glImportMemoryFdEXT_(*memobj, size, GL_HANDLE_TYPE_OPAQUE_FD_EXT, fd); glcheck("glImportMemoryFdEXT");   // GL now owns fd
    GLuint b; glGenBuffers(1, &b); glBindBuffer(GL_SHADER_STORAGE_BUFFER, b);
    glBufferStorageMemEXT_(GL_SHADER_STORAGE_BUFFER, size, *memobj, 0); glcheck("glBufferStorageMemEXT");
    return b;
}
static GLuint program(const char *src) {
    GLuint s = glCreateShader(GL_COMPUTE_SHADER), p = glCreateProgram(); GLint ok; char log[4096];
    glShaderSource(s, 1, &src, 0); glCompileShader(s); glGetShaderiv(s, GL_COMPILE_STATUS, &ok);
    if (!ok) { glGetShaderInfoLog(s, sizeof log, 0, log); fprintf(stderr, "compute shader: %s\n", log); exit(1); }
    glAttachShader(p, s); glLinkProgram(p); glGetProgramiv(p, GL_LINK_STATUS, &ok);
    if (!ok) { glGetProgramInfoLog(p, sizeof log, 0, log); fprintf(stderr, "link: %s\n", log); exit(1); }
    return p;
}
#define CS_HEAD "#version 310 es\nlayout(local_size_x=256) in; uniform uint n, frame; layout(std430, binding=0) "
static const char *CS_XOR = CS_HEAD "readonly buffer I { uint a[]; }; layout(std430, binding=1) writeonly buffer O { uint b[]; };\n"
    "void main(){ uint i=gl_GlobalInvocationID.x; if(i<n) b[i]=a[i]^0x5a5a5a5au; }";
static const char *CS_FRAME = CS_HEAD "writeonly buffer O { uint w[]; };\n"
    "void main(){ uint i=gl_GlobalInvocationID.x; if(i<n) w[i]=(i*2654435761u)^frame; }";   // word 0 = frame

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 2000; if (n < RING) n = RING;
    dedicated = argc > 2 && !strcmp(argv[2], "dedicated");
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) { fprintf(stderr, "cannot load libcuda.so.1: %s\n", dlerror()); return 1; }
    cuInit = sym(lib, "cuInit"); cuDeviceGet = sym(lib, "cuDeviceGet"); cuGetErrorName = sym(lib, "cuGetErrorName");
    cuDeviceGetUuid = sym(lib, "cuDeviceGetUuid"); cuDevicePrimaryCtxRetain = sym(lib, "cuDevicePrimaryCtxRetain");
    cuCtxSetCurrent = sym(lib, "cuCtxSetCurrent"); cuCtxSynchronize = sym(lib, "cuCtxSynchronize");
    cuMemGetAllocationGranularity = sym(lib, "cuMemGetAllocationGranularity"); cuMemCreate = sym(lib, "cuMemCreate");
    cuMemAddressReserve = sym(lib, "cuMemAddressReserve"); cuMemMap = sym(lib, "cuMemMap"); cuMemSetAccess = sym(lib, "cuMemSetAccess");
    cuMemExportToShareableHandle = sym(lib, "cuMemExportToShareableHandle"); cuMemHostAlloc = sym(lib, "cuMemHostAlloc");
    cuStreamCreate = sym(lib, "cuStreamCreate"); cuStreamSynchronize = sym(lib, "cuStreamSynchronize");
    cuMemcpyHtoD = sym(lib, "cuMemcpyHtoD_v2"); cuMemcpyDtoHAsync = sym(lib, "cuMemcpyDtoHAsync_v2");
    cuEventCreate = sym(lib, "cuEventCreate"); cuEventRecord = sym(lib, "cuEventRecord"); cuEventQuery = sym(lib, "cuEventQuery");
    // headless GLES 3.2 on the first EGL device
    PFNEGLQUERYDEVICESEXTPROC qd = (void *)eglGetProcAddress("eglQueryDevicesEXT");
    PFNEGLGETPLATFORMDISPLAYEXTPROC gpd = (void *)eglGetProcAddress("eglGetPlatformDisplayEXT");
    EGLDeviceEXT devs[8]; EGLint nd = 0;
    if (!qd || !gpd) egl_die("eglGetProcAddress(eglQueryDevicesEXT / eglGetPlatformDisplayEXT)");
    if (!qd(8, devs, &nd) || nd < 1) egl_die("eglQueryDevicesEXT (no devices)");
    EGLDisplay d = gpd(EGL_PLATFORM_DEVICE_EXT, devs[0], 0);
    if (d == EGL_NO_DISPLAY || !eglInitialize(d, 0, 0)) egl_die("eglGetPlatformDisplayEXT / eglInitialize");
    if (!eglBindAPI(EGL_OPENGL_ES_API)) egl_die("eglBindAPI");
    EGLint ca[] = {EGL_CONTEXT_MAJOR_VERSION, 3, EGL_CONTEXT_MINOR_VERSION, 2, EGL_NONE};
    EGLContext c = eglCreateContext(d, EGL_NO_CONFIG_KHR, EGL_NO_CONTEXT, ca);
    if (!c || !eglMakeCurrent(d, EGL_NO_SURFACE, EGL_NO_SURFACE, c)) egl_die("eglCreateContext (GLES 3.2) / eglMakeCurrent");
    const char *ext = (const char *)glGetString(GL_EXTENSIONS);
    printf("GL_RENDERER %s | %s\n", glGetString(GL_RENDERER), glGetString(GL_VERSION));
    int mo = has_ext(ext, "GL_EXT_memory_object"), mofd = has_ext(ext, "GL_EXT_memory_object_fd"), bs = has_ext(ext, "GL_EXT_buffer_storage");
    printf("GL_EXT_memory_object %s, GL_EXT_memory_object_fd %s, GL_EXT_buffer_storage %s\n", mo ? "yes" : "NO", mofd ? "yes" : "NO", bs ? "yes" : "NO");
    if (!mo || !mofd || !bs) { fprintf(stderr, "missing GL extension(s) above: cannot import CUDA memory\n"); return 1; }
    glCreateMemoryObjectsEXT_ = glsym("glCreateMemoryObjectsEXT"); glDeleteMemoryObjectsEXT_ = glsym("glDeleteMemoryObjectsEXT");
    glMemoryObjectParameterivEXT_ = glsym("glMemoryObjectParameterivEXT"); glImportMemoryFdEXT_ = glsym("glImportMemoryFdEXT");
    glBufferStorageMemEXT_ = glsym("glBufferStorageMemEXT"); glBufferStorageEXT_ = glsym("glBufferStorageEXT");
    glGetUnsignedBytei_vEXT_ = glsym("glGetUnsignedBytei_vEXT");
    CUcontext ctx;
    check(cuInit(0), "cuInit"); check(cuDeviceGet(&dev, 0), "cuDeviceGet");
    check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain"); check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    unsigned char gu[16] = {0}, cu[16] = {0};
    glGetUnsignedBytei_vEXT_(GL_DEVICE_UUID_EXT, 0, gu);   // diagnostic only: a GL error here is reported, not fatal
    GLenum ue = glGetError(); if (ue) printf("glGetUnsignedBytei_vEXT(GL_DEVICE_UUID_EXT): GL error 0x%x\n", ue);
    check(cuDeviceGetUuid(cu, dev), "cuDeviceGetUuid");
    printf("device UUID GL "); for (int i = 0; i < 32; i++) printf(i == 16 ? " CUDA %02x" : "%02x", i < 16 ? gu[i] : cu[i - 16]);
    printf(" (%s)\n", memcmp(gu, cu, 16) ? "DIFFER" : "same");
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED; prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE; prop.location.id = dev;
    check(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), "cuMemGetAllocationGranularity");
    size_t tsize = (FRAME + gran - 1) / gran * gran, rsize = ((size_t)SLOT * RING + gran - 1) / gran * gran;
    printf("granularity %zu bytes; A, B %zu bytes each, ring %zu bytes%s\n", gran, tsize, rsize, dedicated ? "; dedicated memory objects" : "");
    void *host; check(cuMemHostAlloc(&host, (size_t)SLOT * RING > tsize ? (size_t)SLOT * RING : tsize, 0), "cuMemHostAlloc");
    CUstream st; check(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING), "cuStreamCreate");

    // 1. correctness: CUDA writes A, GL computes B = A ^ 0x5a5a5a5a, CUDA reads B
    CUdeviceptr da, db, dr; GLuint ma, mb, mr;
    GLuint ba = import_cuda(tsize, &da, &ma), bb = import_cuda(tsize, &db, &mb);
    unsigned *pat = malloc(tsize), tw = (unsigned)(tsize / 4);
    for (unsigned i = 0; i < tw; i++) pat[i] = i * 0x01000193u + 0x12345678u;
    check(cuMemcpyHtoD(da, pat, tsize), "cuMemcpyHtoD"); check(cuCtxSynchronize(), "cuCtxSynchronize");
    GLuint px = program(CS_XOR), pf = program(CS_FRAME);
    glUseProgram(px); glUniform1ui(glGetUniformLocation(px, "n"), tw);
    glBindBufferBase(GL_SHADER_STORAGE_BUFFER, 0, ba); glBindBufferBase(GL_SHADER_STORAGE_BUFFER, 1, bb);
    glDispatchCompute((tw + 255) / 256, 1, 1); glcheck("glDispatchCompute (xor)"); glFinish();
    memset(host, 0, tsize);
    check(cuMemcpyDtoHAsync(host, db, tsize, st), "cuMemcpyDtoHAsync (check)"); check(cuStreamSynchronize(st), "cuStreamSynchronize");
    for (unsigned i = 0, *got = host; i < tw; i++)
        if (got[i] != (pat[i] ^ 0x5a5a5a5au)) {
            printf("bytes checked: MISMATCH at word %u of %u: got 0x%08x want 0x%08x\n", i, tw, got[i], pat[i] ^ 0x5a5a5a5au); return 1;
        }
    printf("bytes checked: ok (%zu bytes, CUDA -> GL compute -> CUDA, no cuGraphics* calls)\n", tsize);

    // 2. rates over a ring of 8 imported frame slots
    GLuint ring = import_cuda(rsize, &dr, &mr), pack;
    glGenBuffers(1, &pack); glBindBuffer(GL_COPY_WRITE_BUFFER, pack);
    GLbitfield mf = GL_MAP_READ_BIT | GL_MAP_PERSISTENT_BIT_EXT | GL_MAP_COHERENT_BIT_EXT;
    glBufferStorageEXT_(GL_COPY_WRITE_BUFFER, (GLsizeiptr)SLOT * RING, 0, mf); glcheck("glBufferStorageEXT (pack)");
    const unsigned char *packmap = glMapBufferRange(GL_COPY_WRITE_BUFFER, 0, (GLsizeiptr)SLOT * RING, mf); glcheck("glMapBufferRange (pack)");
    if (!packmap) { fprintf(stderr, "glMapBufferRange returned NULL\n"); return 1; }
    glBindBuffer(GL_COPY_READ_BUFFER, ring);
    glUseProgram(pf); glUniform1ui(glGetUniformLocation(pf, "n"), WORDS);
    GLint ufr = glGetUniformLocation(pf, "frame");
    CUevent ev[RING]; for (int k = 0; k < RING; k++) check(cuEventCreate(&ev[k], CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    const char *names[] = {"gl-readback", "cuda-readback", "compute-only"};
    for (int mode = 0; mode < 3; mode++) {
        for (int pass = 0; pass < 2; pass++) {   // the first pass warms up
            GLsync fence[RING] = {0}; long stale = 0;
            glFinish(); double t0 = now();
            for (int f = 0; f < n + (mode == 1 ? INFLIGHT : 0); f++) {
                int k = f % RING;
                if (mode != 1 && f >= INFLIGHT) {   // wait for the oldest GL frame before going on
                    int g = f - INFLIGHT, j = g % RING;
                    wait_fence(fence[j], names[mode]); fence[j] = 0;
                    if (mode == 0) stale += retire(packmap + (size_t)j * SLOT, g);
                }
                if (f < n) {
                    if (mode == 1 && f >= RING) wait_event(ev[k], "cuda-readback (slot reuse)");   // CUDA is done with slot k
                    glUniform1ui(ufr, (unsigned)f);
                    glBindBufferRange(GL_SHADER_STORAGE_BUFFER, 0, ring, (GLintptr)k * SLOT, FRAME);
                    glDispatchCompute((WORDS + 255) / 256, 1, 1);
                    if (mode == 0) { glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
                        glCopyBufferSubData(GL_COPY_READ_BUFFER, GL_COPY_WRITE_BUFFER, (GLintptr)k * SLOT, (GLintptr)k * SLOT, FRAME); }
                    fence[k] = glFenceSync(GL_SYNC_GPU_COMMANDS_COMPLETE, 0);
                    if (!fence[k]) { fprintf(stderr, "glFenceSync failed: GL error 0x%x\n", glGetError()); return 1; }
                    if (mode == 1) glFlush();
                }
                if (mode == 1 && f >= INFLIGHT) {   // CUDA copies the frame GL finished INFLIGHT frames ago
                    int h = f - INFLIGHT, j = h % RING;
                    if (h >= INFLIGHT) {   // at most INFLIGHT copies in flight: retire frame h-INFLIGHT
                        int g = h - INFLIGHT, i = g % RING;
                        wait_event(ev[i], "cuda-readback"); stale += retire((const unsigned char *)host + (size_t)i * SLOT, g);
                    }
                    wait_fence(fence[j], "cuda-readback (GL frame)"); fence[j] = 0;
                    check(cuMemcpyDtoHAsync((char *)host + (size_t)j * SLOT, dr + (CUdeviceptr)j * SLOT, FRAME, st), "cuMemcpyDtoHAsync");
                    check(cuEventRecord(ev[j], st), "cuEventRecord");
                }
            }
            for (int j = 0; j < RING; j++) if (fence[j]) wait_fence(fence[j], names[mode]);   // drain
            check(cuStreamSynchronize(st), "cuStreamSynchronize"); glcheck(names[mode]);
            double s = now() - t0;
            if (pass) printf("%-13s %6.0f frames/s  %6.2f GB/s  (%d frames of %d bytes in %.3f s, stale %ld)\n",
                             names[mode], n / s, n * (double)FRAME / s / 1e9, n, FRAME, s, stale);
        }
    }
    glUnmapBuffer(GL_COPY_WRITE_BUFFER);
    GLuint bufs[] = {ba, bb, ring, pack}, mems[] = {ma, mb, mr};
    glDeleteBuffers(4, bufs); glDeleteMemoryObjectsEXT_(3, mems); glcheck("cleanup");
    printf("(touched-byte checksum %u)\n", touch);
    return 0;
}
