// What CUDA's copy engines allow between pinned host memory and the GPU, in
// each direction alone and in both at once (two streams), in 1080p NV12
// frames (3,110,400 bytes). Compare with transfer_bw.c, where GL's uploads and
// readbacks share one rate: if CUDA moves both directions at once, a path
// that uploads and reads back through CUDA has a higher ceiling.
//
//   up      host → device, one stream
//   down    device → host, one stream
//   duplex  up on one stream and down on another, issued together
//   mixed   duplex with two frames up for every frame down (a PiP composite)
//
// libcuda.so.1 is loaded at run time (no CUDA toolkit needed).
// Build: gcc -O2 cuda_duplex.c -ldl -o cuda_duplex   Run: ./cuda_duplex [iterations]
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int CUresult;
typedef void *CUcontext, *CUstream;
typedef unsigned long long CUdeviceptr;
static CUresult (*cuInit)(unsigned);
static CUresult (*cuDeviceGet)(int *, int);
static CUresult (*cuCtxCreate)(CUcontext *, unsigned, int);
static CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
static CUresult (*cuMemHostAlloc)(void **, size_t, unsigned);
static CUresult (*cuStreamCreate)(CUstream *, unsigned);
static CUresult (*cuStreamSynchronize)(CUstream);
static CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
static CUresult (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);

#define FRAME (1920 * 1080 * 3 / 2)
#define RING 8
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static void check(CUresult r, const char *what) { if (r) { fprintf(stderr, "%s: CUDA error %d\n", what, r); exit(1); } }
static void *sym(void *lib, const char *name) {
    void *p = dlsym(lib, name);
    if (!p) { fprintf(stderr, "libcuda.so.1 lacks %s\n", name); exit(1); }
    return p;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 4000;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) { fprintf(stderr, "cannot load libcuda.so.1: %s\n", dlerror()); return 1; }
    cuInit = sym(lib, "cuInit"); cuDeviceGet = sym(lib, "cuDeviceGet"); cuCtxCreate = sym(lib, "cuCtxCreate_v2");
    cuMemAlloc = sym(lib, "cuMemAlloc_v2"); cuMemHostAlloc = sym(lib, "cuMemHostAlloc");
    cuStreamCreate = sym(lib, "cuStreamCreate"); cuStreamSynchronize = sym(lib, "cuStreamSynchronize");
    cuMemcpyHtoDAsync = sym(lib, "cuMemcpyHtoDAsync_v2"); cuMemcpyDtoHAsync = sym(lib, "cuMemcpyDtoHAsync_v2");
    int dev; CUcontext ctx;
    check(cuInit(0), "cuInit"); check(cuDeviceGet(&dev, 0), "cuDeviceGet"); check(cuCtxCreate(&ctx, 0, dev), "cuCtxCreate");
    void *hostUp, *hostDown; CUdeviceptr devUp, devDown; CUstream up, down;
    check(cuMemHostAlloc(&hostUp, (size_t)FRAME * RING, 0), "cuMemHostAlloc");
    check(cuMemHostAlloc(&hostDown, (size_t)FRAME * RING, 0), "cuMemHostAlloc");
    check(cuMemAlloc(&devUp, (size_t)FRAME * RING), "cuMemAlloc"); check(cuMemAlloc(&devDown, (size_t)FRAME * RING), "cuMemAlloc");
    check(cuStreamCreate(&up, 1), "cuStreamCreate"); check(cuStreamCreate(&down, 1), "cuStreamCreate");
    const char *names[] = {"up", "down", "duplex", "mixed"};
    for (int mode = 0; mode < 4; mode++) {
        for (int pass = 0; pass < 2; pass++) {   // the first pass warms up
            double t0 = now();
            long frames = 0;
            for (int i = 0; i < n; i++) {
                size_t o = (size_t)FRAME * (i % RING);
                if (mode != 1) {
                    for (int k = 0; k < (mode == 3 ? 2 : 1); k++, frames++)
                        check(cuMemcpyHtoDAsync(devUp + o, (char *)hostUp + o, FRAME, up), "HtoD");
                }
                if (mode != 0) { check(cuMemcpyDtoHAsync((char *)hostDown + o, devDown + o, FRAME, down), "DtoH"); frames++; }
            }
            check(cuStreamSynchronize(up), "sync"); check(cuStreamSynchronize(down), "sync");
            double s = now() - t0;
            if (pass == 1)
                printf("%-7s %6d iterations/s  %6.1f GB/s  (%ld frames of %d bytes in %.3f s)\n", names[mode], (int)(n / s),
                       frames * (double)FRAME / s / 1e9, frames, FRAME, s);
        }
    }
    return 0;
}
