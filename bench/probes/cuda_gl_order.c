// When a GL compute shader writes a frame into CUDA memory imported into GL (CUDA VMM allocation,
// POSIX fd, GL_EXT_memory_object_fd, bound as an SSBO) and the CPU waits for GL to be done, is every
// byte visible to a cuMemcpyDtoHAsync issued right after the wait? Modes, each over N frames written
// into a ring of 4 imported 1080p NV12-sized slots (3,110,400 bytes each, rounded to granularity):
//   fence-gl   dispatch; glFenceSync; glFlush; glClientWaitSync (1 s waits, give up after 5 s)
//   fence-egl  dispatch; eglCreateSyncKHR(EGL_SYNC_FENCE_KHR); glFlush; eglClientWaitSyncKHR
//   finish     dispatch; glFinish
//   semaphore  dispatch; glSignalSemaphoreEXT(sem, the slot's buffer); glFlush;
//              cuWaitExternalSemaphoresAsync on the stream. The binary semaphore is made by Vulkan
//              (VkDevice on the physical device whose deviceUUID equals CUDA's), exported twice as an
//              opaque fd, imported into GL (GL_EXT_semaphore_fd) and into CUDA (cuImportExternalSemaphore).
// then, in every mode: cuMemcpyDtoHAsync of the slot into cuMemHostAlloc memory on a non-blocking
// stream, cuStreamSynchronize, and EVERY word is compared with hash(frame, i) =
// (frame*2654435761u) ^ (i*40503u). Bad words equal to what the slot held before (its previous frame)
// count as "stale". Prints per mode: frames, bad frames, bad words, frames/s (with and without the CPU verify).
// Exit 0 whatever the verify finds (a measurement); exit 1 on an API failure, naming the call.
// A SIGALRM watchdog ends a mode that hangs. libcuda.so.1, libvulkan.so.1 are dlopen'ed (no CUDA toolkit).
// Build (headers: libvulkan-dev libegl-dev libgles-dev): gcc -O2 -Wall cuda_gl_order.c -ldl -lEGL -lGLESv2 -o cuda_gl_order
// Run:   [FLAT=1] ./cuda_gl_order [frames=3000] [fence-gl|fence-egl|finish|semaphore  (default: all four)]
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>
#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <GLES3/gl32.h>
#include <GLES2/gl2ext.h>
#include <dlfcn.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifndef GL_HANDLE_TYPE_OPAQUE_FD_EXT   // values as in Khronos gl2ext.h
#define GL_HANDLE_TYPE_OPAQUE_FD_EXT 0x9586
#endif
#ifndef GL_DEVICE_UUID_EXT
#define GL_DEVICE_UUID_EXT 0x9597
#endif

// CUDA driver API, by hand (layouts as in cuda.h of CUDA 11.x/12.x; enums are 4-byte ints)
typedef int CUresult, CUdevice;
typedef void *CUcontext, *CUstream, *CUexternalSemaphore;
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
typedef struct {   // CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC (_v1)
    int type;      // CUexternalSemaphoreHandleType; 4 bytes of padding follow (the union holds pointers)
    union { int fd; struct { void *handle; const void *name; } win32; const void *nvSciSyncObj; } handle;
    unsigned int flags;
    unsigned int reserved[16];
} CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC;
typedef struct {   // CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS (_v1)
    struct {
        struct { unsigned long long value; } fence;
        union { void *fence; unsigned long long reserved; } nvSciSync;
        struct { unsigned long long key; unsigned int timeoutMs; } keyedMutex;   // 16 bytes with tail padding
        unsigned int reserved[10];
    } params;
    unsigned int flags;
    unsigned int reserved[16];
} CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS;
_Static_assert(sizeof(CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC) == 96 && offsetof(CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC, handle) == 8 &&
               offsetof(CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC, flags) == 24, "CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC layout");
_Static_assert(sizeof(CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS) == 144 && offsetof(CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS, params.nvSciSync) == 8 &&
               offsetof(CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS, params.keyedMutex) == 16 &&
               offsetof(CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS, params.reserved) == 32 &&
               offsetof(CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS, flags) == 72 && offsetof(CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS, reserved) == 76,
               "CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS layout");
enum { CU_MEM_ALLOCATION_TYPE_PINNED = 1, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1, CU_MEM_LOCATION_TYPE_DEVICE = 1,
       CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3, CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0, CU_STREAM_NON_BLOCKING = 1,
       CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD = 1 };
static CUresult (*cuInit)(unsigned), (*cuDeviceGet)(CUdevice *, int), (*cuGetErrorName)(CUresult, const char **),
    (*cuDeviceGetUuid)(unsigned char *, CUdevice);   // CUuuid is 16 bytes
static CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice), (*cuCtxSetCurrent)(CUcontext);
static CUresult (*cuMemGetAllocationGranularity)(size_t *, const CUmemAllocationProp *, int);
static CUresult (*cuMemCreate)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
static CUresult (*cuMemAddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
static CUresult (*cuMemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
static CUresult (*cuMemSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
static CUresult (*cuMemExportToShareableHandle)(void *, CUmemGenericAllocationHandle, int, unsigned long long);
static CUresult (*cuMemHostAlloc)(void **, size_t, unsigned), (*cuStreamCreate)(CUstream *, unsigned), (*cuStreamSynchronize)(CUstream);
static CUresult (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
static CUresult (*cuImportExternalSemaphore)(CUexternalSemaphore *, const CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC *);
static CUresult (*cuWaitExternalSemaphoresAsync)(const CUexternalSemaphore *, const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS *, unsigned, CUstream);
static PFNGLCREATEMEMORYOBJECTSEXTPROC glCreateMemoryObjectsEXT_; static PFNGLIMPORTMEMORYFDEXTPROC glImportMemoryFdEXT_;
static PFNGLBUFFERSTORAGEMEMEXTPROC glBufferStorageMemEXT_; static PFNGLGETUNSIGNEDBYTEI_VEXTPROC glGetUnsignedBytei_vEXT_;
static PFNGLGENSEMAPHORESEXTPROC glGenSemaphoresEXT_; static PFNGLIMPORTSEMAPHOREFDEXTPROC glImportSemaphoreFdEXT_;
static PFNGLSIGNALSEMAPHOREEXTPROC glSignalSemaphoreEXT_; static PFNEGLDESTROYSYNCKHRPROC eglDestroySyncKHR_;
static PFNEGLCREATESYNCKHRPROC eglCreateSyncKHR_; static PFNEGLCLIENTWAITSYNCKHRPROC eglClientWaitSyncKHR_;

#define FRAME (1920 * 1080 * 3 / 2)   // bytes of one NV12 frame
#define WORDS (FRAME / 4)
enum { RING = 4 };   // imported slots
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static void check(CUresult r, const char *what) {
    const char *s = 0; if (r && cuGetErrorName) cuGetErrorName(r, &s);
    if (r) { fprintf(stderr, "%s: CUDA error %d %s\n", what, r, s ? s : ""); exit(1); }
}
static void egl_die(const char *what) { fprintf(stderr, "%s failed: EGL error 0x%x\n", what, eglGetError()); exit(1); }
static void glcheck(const char *what) { GLenum e = glGetError(); if (e) { fprintf(stderr, "%s: GL error 0x%x\n", what, e); exit(1); } }
static void vkcheck(VkResult r, const char *what) { if (r < 0) { fprintf(stderr, "%s: VkResult %d\n", what, r); exit(1); } }
static void *sym(void *lib, const char *name) {
    void *p = dlsym(lib, name); if (!p) { fprintf(stderr, "libcuda.so.1 lacks %s\n", name); exit(1); } return p;
}
static void *glsym(const char *name) {
    void *p = (void *)eglGetProcAddress(name); if (!p) { fprintf(stderr, "eglGetProcAddress(%s) returned NULL\n", name); exit(1); } return p;
}
static PFN_vkVoidFunction vksym(PFN_vkGetInstanceProcAddr gipa, VkInstance in, const char *name) {
    PFN_vkVoidFunction p = gipa(in, name); if (!p) { fprintf(stderr, "vkGetInstanceProcAddr(%s) returned NULL\n", name); exit(1); } return p;
}
#define VKFN(in, name) PFN_##name name = (PFN_##name)vksym(gipa, in, #name)
static int has_ext(const char *list, const char *name) {   // whole-token match
    size_t n = strlen(name); const char *p = list;
    for (; p && (p = strstr(p, name)); p += n) if ((p == list || p[-1] == ' ') && (p[n] == ' ' || !p[n])) return 1;
    return 0;
}
static void puuid(const char *label, const unsigned char *u) { printf("%s ", label); for (int i = 0; i < 16; i++) printf("%02x", u[i]); }
static volatile int cur_frame; static const char *volatile cur_mode = "setup";
static void on_alarm(int sig) {   // watchdog: a hung wait must not hang the run
    char m[160]; int l = snprintf(m, sizeof m, "watchdog: mode %s stuck at frame %d, giving up\n", cur_mode, cur_frame);
    ssize_t r = write(2, m, l > 0 ? (size_t)l : 0); (void)r; (void)sig; _exit(1);
}
static void wait_fence(GLsync s) {   // 1 s waits, give up after 5 s
    double t0 = now();
    for (;;) {
        GLenum r = glClientWaitSync(s, GL_SYNC_FLUSH_COMMANDS_BIT, 1000000000ull);
        if (r == GL_ALREADY_SIGNALED || r == GL_CONDITION_SATISFIED) break;
        if (r == GL_WAIT_FAILED) { fprintf(stderr, "glClientWaitSync failed, GL error 0x%x\n", glGetError()); exit(1); }
        if (now() - t0 > 5) { fprintf(stderr, "glClientWaitSync: fence not signalled after 5 s\n"); exit(1); }
    }
    glDeleteSync(s);
}
static void wait_egl(EGLDisplay d, EGLSyncKHR s) {   // 1 s waits, give up after 5 s
    double t0 = now();
    for (;;) {
        EGLint r = eglClientWaitSyncKHR_(d, s, EGL_SYNC_FLUSH_COMMANDS_BIT_KHR, 1000000000ull);
        if (r == EGL_CONDITION_SATISFIED_KHR) break;
        if (r != EGL_TIMEOUT_EXPIRED_KHR) egl_die("eglClientWaitSyncKHR");
        if (now() - t0 > 5) { fprintf(stderr, "eglClientWaitSyncKHR: sync not signalled after 5 s\n"); exit(1); }
    }
    if (!eglDestroySyncKHR_(d, s)) egl_die("eglDestroySyncKHR");
}
static size_t gran; static CUdevice dev; static CUmemAllocationProp prop;
// CUDA VMM allocation of size bytes (a multiple of gran), exported as an fd and imported as a GL buffer
static GLuint import_cuda(size_t size, CUdeviceptr *dptr) {
    CUmemGenericAllocationHandle h; check(cuMemCreate(&h, size, &prop, 0), "cuMemCreate");
    check(cuMemAddressReserve(dptr, size, gran, 0, 0), "cuMemAddressReserve"); check(cuMemMap(*dptr, size, 0, h, 0), "cuMemMap");
    CUmemAccessDesc a = {{CU_MEM_LOCATION_TYPE_DEVICE, dev}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    check(cuMemSetAccess(*dptr, size, &a, 1), "cuMemSetAccess");
    int fd = -1; check(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), "cuMemExportToShareableHandle");
    GLuint mo, b; glCreateMemoryObjectsEXT_(1, &mo); glcheck("glCreateMemoryObjectsEXT");
    glImportMemoryFdEXT_(mo, size, GL_HANDLE_TYPE_OPAQUE_FD_EXT, fd); glcheck("glImportMemoryFdEXT");   // GL now owns fd
    glGenBuffers(1, &b); glBindBuffer(GL_SHADER_STORAGE_BUFFER, b);
    glBufferStorageMemEXT_(GL_SHADER_STORAGE_BUFFER, size, mo, 0); glcheck("glBufferStorageMemEXT");
    return b;
}
// binary semaphore made by Vulkan on CUDA's device, one opaque fd imported into GL, another into CUDA
static void make_semaphore(const char *glext, const unsigned char *cu, GLuint *gsem, CUexternalSemaphore *csem) {
    int se = has_ext(glext, "GL_EXT_semaphore"), sefd = has_ext(glext, "GL_EXT_semaphore_fd");
    printf("GL_EXT_semaphore %s, GL_EXT_semaphore_fd %s\n", se ? "yes" : "NO", sefd ? "yes" : "NO");
    if (!se || !sefd) { fprintf(stderr, "missing GL extension(s) above: cannot import a semaphore into GL\n"); exit(1); }
    glGenSemaphoresEXT_ = glsym("glGenSemaphoresEXT"); glImportSemaphoreFdEXT_ = glsym("glImportSemaphoreFdEXT");
    glSignalSemaphoreEXT_ = glsym("glSignalSemaphoreEXT");
    void *vl = dlopen("libvulkan.so.1", RTLD_NOW);
    if (!vl) { fprintf(stderr, "cannot load libvulkan.so.1: %s\n", dlerror()); exit(1); }
    PFN_vkGetInstanceProcAddr gipa = (PFN_vkGetInstanceProcAddr)dlsym(vl, "vkGetInstanceProcAddr");
    if (!gipa) { fprintf(stderr, "libvulkan.so.1 lacks vkGetInstanceProcAddr\n"); exit(1); } VKFN(NULL, vkCreateInstance);
    VkApplicationInfo ai = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "cuda_gl_order", .apiVersion = VK_API_VERSION_1_1};
    VkInstanceCreateInfo ii = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &ai};
    VkInstance in; VkResult r = vkCreateInstance(&ii, NULL, &in);
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER) fprintf(stderr, "(no Vulkan 1.1 ICD found: is NVIDIA's Vulkan ICD json installed?)\n");
    vkcheck(r, "vkCreateInstance");
    VKFN(in, vkEnumeratePhysicalDevices); VKFN(in, vkGetPhysicalDeviceProperties2); VKFN(in, vkCreateDevice);
    VKFN(in, vkGetPhysicalDeviceExternalSemaphoreProperties); VKFN(in, vkGetDeviceProcAddr);
    VkPhysicalDevice pds[16], pd = VK_NULL_HANDLE; uint32_t np = 16;
    vkcheck(vkEnumeratePhysicalDevices(in, &np, pds), "vkEnumeratePhysicalDevices");
    puuid("CUDA device UUID    ", cu); printf("\n");
    for (uint32_t i = 0; i < np; i++) {
        VkPhysicalDeviceIDProperties id = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES};
        VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &id};
        vkGetPhysicalDeviceProperties2(pds[i], &p2);
        int same = !memcmp(id.deviceUUID, cu, 16);
        char l[40]; snprintf(l, sizeof l, "Vulkan device %u UUID", i); puuid(l, id.deviceUUID);
        printf(" %s, API %u.%u (%s)\n", p2.properties.deviceName, VK_API_VERSION_MAJOR(p2.properties.apiVersion),
               VK_API_VERSION_MINOR(p2.properties.apiVersion), same ? "same as CUDA" : "differs");
        if (same && pd == VK_NULL_HANDLE) pd = pds[i];
    }
    if (pd == VK_NULL_HANDLE) { fprintf(stderr, "no Vulkan physical device has CUDA's device UUID\n"); exit(1); }
    VkPhysicalDeviceExternalSemaphoreInfo si = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_SEMAPHORE_INFO,
                                                .handleType = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT};
    VkExternalSemaphoreProperties sp = {.sType = VK_STRUCTURE_TYPE_EXTERNAL_SEMAPHORE_PROPERTIES};
    vkGetPhysicalDeviceExternalSemaphoreProperties(pd, &si, &sp);
    int exp = !!(sp.externalSemaphoreFeatures & VK_EXTERNAL_SEMAPHORE_FEATURE_EXPORTABLE_BIT);
    printf("Vulkan opaque-fd binary semaphore: exportable %s, importable %s\n", exp ? "yes" : "NO",
           sp.externalSemaphoreFeatures & VK_EXTERNAL_SEMAPHORE_FEATURE_IMPORTABLE_BIT ? "yes" : "NO");
    if (!exp) { fprintf(stderr, "vkGetPhysicalDeviceExternalSemaphoreProperties: opaque fd not exportable\n"); exit(1); }
    float prio = 1; const char *dx[] = {"VK_KHR_external_semaphore", "VK_KHR_external_semaphore_fd"};
    VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = 0, .queueCount = 1,
                                  .pQueuePriorities = &prio};
    VkDeviceCreateInfo di = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .queueCreateInfoCount = 1, .pQueueCreateInfos = &qi,
                             .enabledExtensionCount = 2, .ppEnabledExtensionNames = dx};
    VkDevice vd; vkcheck(vkCreateDevice(pd, &di, NULL, &vd), "vkCreateDevice");
    PFN_vkCreateSemaphore vkCreateSemaphore = (PFN_vkCreateSemaphore)vkGetDeviceProcAddr(vd, "vkCreateSemaphore");
    PFN_vkGetSemaphoreFdKHR vkGetSemaphoreFdKHR = (PFN_vkGetSemaphoreFdKHR)vkGetDeviceProcAddr(vd, "vkGetSemaphoreFdKHR");
    if (!vkCreateSemaphore || !vkGetSemaphoreFdKHR) { fprintf(stderr, "vkGetDeviceProcAddr(vkCreateSemaphore / vkGetSemaphoreFdKHR) returned NULL\n"); exit(1); }
    VkExportSemaphoreCreateInfo ei = {.sType = VK_STRUCTURE_TYPE_EXPORT_SEMAPHORE_CREATE_INFO, .handleTypes = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT};
    VkSemaphoreCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &ei};
    VkSemaphore vs; vkcheck(vkCreateSemaphore(vd, &ci, NULL, &vs), "vkCreateSemaphore");   // kept alive to the end
    int fd[2] = {-1, -1};
    for (int i = 0; i < 2; i++) {
        VkSemaphoreGetFdInfoKHR gi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_GET_FD_INFO_KHR, .semaphore = vs,
                                      .handleType = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT};
        vkcheck(vkGetSemaphoreFdKHR(vd, &gi, &fd[i]), "vkGetSemaphoreFdKHR");
    }
    glGenSemaphoresEXT_(1, gsem); glcheck("glGenSemaphoresEXT");
    glImportSemaphoreFdEXT_(*gsem, GL_HANDLE_TYPE_OPAQUE_FD_EXT, fd[0]); glcheck("glImportSemaphoreFdEXT");   // GL owns fd[0]
    CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC hd; memset(&hd, 0, sizeof hd);
    hd.type = CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD; hd.handle.fd = fd[1];
    check(cuImportExternalSemaphore(csem, &hd), "cuImportExternalSemaphore");   // CUDA owns fd[1]
    printf("semaphore: Vulkan-made, fd %d -> GL semaphore %u, fd %d -> CUDA %p\n", fd[0], *gsem, fd[1], *csem);
}
static const char *CS = "#version 310 es\nlayout(local_size_x=256) in; uniform uint n, frame, s;\n"
    "layout(std430, binding=0) writeonly buffer O { uint w[]; };\n"
    "void main(){ uint i=gl_GlobalInvocationID.x; if(i<n) w[i]=(frame*2654435761u)^((i>>s)*40503u); }";
// FLAT=1: the same word over each 16 KiB (compressible data, like a picture's flat areas); else every word differs
static unsigned sh;
static inline unsigned hash(unsigned f, unsigned i) { return (f * 2654435761u) ^ ((i >> sh) * 40503u); }

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 3000; if (n < RING) n = RING;
    const char *only = argc > 2 ? argv[2] : 0;
    setvbuf(stdout, NULL, _IOLBF, 0);   // the watchdog's _exit must not lose earlier modes' lines
    signal(SIGALRM, on_alarm); alarm(120);   // setup
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) { fprintf(stderr, "cannot load libcuda.so.1: %s\n", dlerror()); return 1; }
    cuInit = sym(lib, "cuInit"); cuDeviceGet = sym(lib, "cuDeviceGet"); cuGetErrorName = sym(lib, "cuGetErrorName");
    cuDeviceGetUuid = sym(lib, "cuDeviceGetUuid"); cuDevicePrimaryCtxRetain = sym(lib, "cuDevicePrimaryCtxRetain");
    cuCtxSetCurrent = sym(lib, "cuCtxSetCurrent"); cuMemGetAllocationGranularity = sym(lib, "cuMemGetAllocationGranularity");
    cuMemCreate = sym(lib, "cuMemCreate"); cuMemAddressReserve = sym(lib, "cuMemAddressReserve"); cuMemMap = sym(lib, "cuMemMap");
    cuMemSetAccess = sym(lib, "cuMemSetAccess"); cuMemExportToShareableHandle = sym(lib, "cuMemExportToShareableHandle");
    cuMemHostAlloc = sym(lib, "cuMemHostAlloc"); cuStreamCreate = sym(lib, "cuStreamCreate");
    cuStreamSynchronize = sym(lib, "cuStreamSynchronize"); cuMemcpyDtoHAsync = sym(lib, "cuMemcpyDtoHAsync_v2");
    cuImportExternalSemaphore = sym(lib, "cuImportExternalSemaphore");
    cuWaitExternalSemaphoresAsync = sym(lib, "cuWaitExternalSemaphoresAsync");
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
    const char *ext = (const char *)glGetString(GL_EXTENSIONS), *eext = eglQueryString(d, EGL_EXTENSIONS);
    printf("GL_RENDERER %s | %s\n", glGetString(GL_RENDERER), glGetString(GL_VERSION));
    int mo = has_ext(ext, "GL_EXT_memory_object"), mofd = has_ext(ext, "GL_EXT_memory_object_fd"), efs = has_ext(eext, "EGL_KHR_fence_sync");
    printf("GL_EXT_memory_object %s, GL_EXT_memory_object_fd %s, EGL_KHR_fence_sync %s\n", mo ? "yes" : "NO", mofd ? "yes" : "NO", efs ? "yes" : "NO");
    if (!mo || !mofd) { fprintf(stderr, "missing GL extension(s) above: cannot import CUDA memory\n"); return 1; }
    glCreateMemoryObjectsEXT_ = glsym("glCreateMemoryObjectsEXT"); glImportMemoryFdEXT_ = glsym("glImportMemoryFdEXT");
    glBufferStorageMemEXT_ = glsym("glBufferStorageMemEXT"); glGetUnsignedBytei_vEXT_ = glsym("glGetUnsignedBytei_vEXT");
    if (efs) { eglCreateSyncKHR_ = glsym("eglCreateSyncKHR"); eglClientWaitSyncKHR_ = glsym("eglClientWaitSyncKHR");
               eglDestroySyncKHR_ = glsym("eglDestroySyncKHR"); }
    CUcontext ctx;
    check(cuInit(0), "cuInit"); check(cuDeviceGet(&dev, 0), "cuDeviceGet");
    check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain"); check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    unsigned char gu[16] = {0}, cu[16] = {0};
    glGetUnsignedBytei_vEXT_(GL_DEVICE_UUID_EXT, 0, gu);   // diagnostic only: a GL error here is reported, not fatal
    GLenum ue = glGetError(); if (ue) printf("glGetUnsignedBytei_vEXT(GL_DEVICE_UUID_EXT): GL error 0x%x\n", ue);
    check(cuDeviceGetUuid(cu, dev), "cuDeviceGetUuid");
    puuid("device UUID GL", gu); puuid(" CUDA", cu); printf(" (%s)\n", memcmp(gu, cu, 16) ? "DIFFER" : "same");
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED; prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE; prop.location.id = dev;
    check(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), "cuMemGetAllocationGranularity");
    size_t ssize = (FRAME + gran - 1) / gran * gran;
    printf("granularity %zu bytes; %d imported slots of %zu bytes, %d bytes (%d words) written and checked per frame\n", gran, RING, ssize, FRAME, WORDS);
    CUdeviceptr dptr[RING]; GLuint buf[RING];
    for (int k = 0; k < RING; k++) buf[k] = import_cuda(ssize, &dptr[k]);
    unsigned *host; check(cuMemHostAlloc((void **)&host, ssize, 0), "cuMemHostAlloc");
    CUstream st; check(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    GLuint s = glCreateShader(GL_COMPUTE_SHADER), p = glCreateProgram(); GLint ok; char log[4096];
    glShaderSource(s, 1, &CS, 0); glCompileShader(s); glGetShaderiv(s, GL_COMPILE_STATUS, &ok);
    if (!ok) { glGetShaderInfoLog(s, sizeof log, 0, log); fprintf(stderr, "compute shader: %s\n", log); return 1; }
    glAttachShader(p, s); glLinkProgram(p); glGetProgramiv(p, GL_LINK_STATUS, &ok);
    if (!ok) { glGetProgramInfoLog(p, sizeof log, 0, log); fprintf(stderr, "link: %s\n", log); return 1; }
    sh = getenv("FLAT") && atoi(getenv("FLAT")) ? 12 : 0;
    printf("pattern: %s\n", sh ? "flat (one word per 16 KiB)" : "a different word each");
    glUseProgram(p); glUniform1ui(glGetUniformLocation(p, "n"), WORDS); glUniform1ui(glGetUniformLocation(p, "s"), sh); GLint ufr = glGetUniformLocation(p, "frame");
    unsigned prevf[RING];   // frame id each slot holds now
    for (int k = 0; k < RING; k++) {   // warm-up: every slot written once (frame id ~0u - k, never a measured frame)
        glUniform1ui(ufr, prevf[k] = ~0u - k); glBindBufferBase(GL_SHADER_STORAGE_BUFFER, 0, buf[k]); glDispatchCompute((WORDS + 255) / 256, 1, 1);
    }
    glFinish(); glcheck("warm-up dispatch");

    const char *names[] = {"fence-gl", "fence-egl", "finish", "semaphore"};
    GLuint gsem = 0; CUexternalSemaphore csem = 0;
    CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS wp; memset(&wp, 0, sizeof wp);   // binary semaphore: value unused, flags 0
    for (int m = 0; m < 4; m++) {
        if (only && strcmp(only, names[m])) continue;
        if (m == 1 && !efs) { printf("%-9s skipped: no EGL_KHR_fence_sync\n", names[m]); continue; }
        if (m == 3) { alarm(120); cur_mode = "semaphore setup"; make_semaphore(ext, cu, &gsem, &csem); }
        cur_mode = names[m]; alarm(60 + n / 20);
        long badf = 0, badw = 0, stale = 0, fbad = -1, ffirst = -1, flast = -1, fcount = 0; unsigned fgot = 0, fwant = 0;
        double t0 = now(), tv = 0;
        for (int f = 0; f < n; f++) {
            int k = f % RING; cur_frame = f;
            glUniform1ui(ufr, (unsigned)f); glBindBufferBase(GL_SHADER_STORAGE_BUFFER, 0, buf[k]);
            glDispatchCompute((WORDS + 255) / 256, 1, 1);
            if (m == 0) {
                GLsync fs = glFenceSync(GL_SYNC_GPU_COMMANDS_COMPLETE, 0);
                if (!fs) { fprintf(stderr, "glFenceSync failed: GL error 0x%x\n", glGetError()); return 1; }
                glFlush(); wait_fence(fs);
            } else if (m == 1) {
                EGLSyncKHR es = eglCreateSyncKHR_(d, EGL_SYNC_FENCE_KHR, NULL);
                if (es == EGL_NO_SYNC_KHR) egl_die("eglCreateSyncKHR(EGL_SYNC_FENCE_KHR)");
                glFlush(); wait_egl(d, es);
            } else if (m == 2) glFinish();
            else {
                glSignalSemaphoreEXT_(gsem, 1, &buf[k], 0, NULL, NULL); glFlush();
                if (f == 0) glcheck("glSignalSemaphoreEXT");
                check(cuWaitExternalSemaphoresAsync(&csem, &wp, 1, st), "cuWaitExternalSemaphoresAsync");
            }
            check(cuMemcpyDtoHAsync(host, dptr[k], FRAME, st), "cuMemcpyDtoHAsync");
            check(cuStreamSynchronize(st), "cuStreamSynchronize");
            double tv0 = now(); unsigned a = (unsigned)f * 2654435761u; long bad = 0;
            for (unsigned i = 0; i < WORDS; i++) bad += host[i] != (a ^ ((i >> sh) * 40503u));
            if (bad) {   // slow path: classify this frame's bad words
                badf++; badw += bad;
                for (unsigned i = 0; i < WORDS; i++) {
                    if (host[i] == hash(f, i)) continue;
                    if (host[i] == hash(prevf[k], i)) stale++;
                    if (fbad < 0) { fbad = f; ffirst = i; fgot = host[i]; fwant = hash(f, i); }
                    if (fbad == f) { flast = i; fcount++; }
                }
            }
            tv += now() - tv0; prevf[k] = (unsigned)f;
        }
        glcheck(names[m]);
        double t = now() - t0;
        printf("%-9s frames %d  bad frames %ld  bad words %ld (stale: slot's previous frame %ld)  %.0f frames/s (%.0f without the verify)\n",
               names[m], n, badf, badw, stale, n / t, n / (t - tv));
        if (fbad >= 0)
            printf("          first bad frame %ld: %ld bad words, words %ld..%ld; word %ld got 0x%08x want 0x%08x\n",
                   fbad, fcount, ffirst, flast, ffirst, fgot, fwant);
    }
    alarm(0);
    return 0;
}
