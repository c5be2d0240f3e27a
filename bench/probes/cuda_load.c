// CUDA work beside another context's GPU work: device-to-device copies in
// submissions of a given size at a given rate, for as long as asked. Run it
// beside `diptych-gpu-bench --encode` to see what CUDA work costs a GL
// context (the GPU switches between the two): the same copies issued one a
// submission or ten a submission, small or picture-sized.
//
//   cuda_load RATE PER BYTES SECONDS
//     every 1/RATE s: PER copies of BYTES (cuMemcpyDtoDAsync) on one stream,
//     then cuStreamSynchronize: one submission; prints what it issued.
//
// libcuda.so.1 is loaded at run time (no CUDA toolkit needed).
// Build: gcc -O2 cuda_load.c -ldl -o cuda_load   Run: ./cuda_load 1700 1 4096 9
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef void *CUcontext, *CUstream;
typedef unsigned long long CUdeviceptr;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    double rate = argc == 5 ? atof(argv[1]) : 0, seconds = argc == 5 ? atof(argv[4]) : 0;
    int per = argc == 5 ? atoi(argv[2]) : 0;
    long long bytes = argc == 5 ? atoll(argv[3]) : 0;
    if (rate <= 0 || per < 1 || bytes < 1 || seconds <= 0) {
        fprintf(stderr, "usage: cuda_load RATE PER BYTES SECONDS (submissions a second, copies a submission, bytes a copy, seconds)\n");
        return 2;
    }
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) { fprintf(stderr, "cuda_load: libcuda.so.1 not found (no NVIDIA driver)\n"); return 1; }
    CUresult (*cuInit)(unsigned) = dlsym(lib, "cuInit");
    CUresult (*cuDeviceGet)(int *, int) = dlsym(lib, "cuDeviceGet");
    CUresult (*cuCtxCreate)(CUcontext *, unsigned, int) = dlsym(lib, "cuCtxCreate_v2");
    CUresult (*cuMemAlloc)(CUdeviceptr *, size_t) = dlsym(lib, "cuMemAlloc_v2");
    CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream) = dlsym(lib, "cuMemcpyDtoDAsync_v2");
    CUresult (*cuStreamCreate)(CUstream *, unsigned) = dlsym(lib, "cuStreamCreate");
    CUresult (*cuStreamSynchronize)(CUstream) = dlsym(lib, "cuStreamSynchronize");
    int device;
    CUcontext context;
    CUstream stream;
    CUdeviceptr from, to;
    if (cuInit(0) || cuDeviceGet(&device, 0) || cuCtxCreate(&context, 0, device) || cuMemAlloc(&from, bytes) ||
        cuMemAlloc(&to, bytes) || cuStreamCreate(&stream, 1)) {
        fprintf(stderr, "cuda_load: CUDA set-up failed (device 0, two allocations of %lld bytes, a stream)\n", bytes);
        return 1;
    }
    double t0 = now(), next = t0;
    long long copies = 0;
    while (now() - t0 < seconds) {
        for (int i = 0; i < per; i++) cuMemcpyDtoDAsync(to, from, bytes, stream);
        if (cuStreamSynchronize(stream)) { fprintf(stderr, "cuda_load: a copy failed\n"); return 1; }
        copies += per;
        next += 1 / rate;
        double wait = next - now();
        if (wait > 0) usleep((useconds_t)(wait * 1e6));
    }
    double took = now() - t0;
    printf("cuda_load: %lld copies of %lld bytes in %.1f s (%.0f a second, %d a submission)\n", copies, bytes, took, copies / took, per);
    return 0;
}
