// CUDA work beside another context's GPU work: copies or kernel launches in
// submissions of a given size at a given rate, for as long as asked. Run it
// beside `diptych-gpu-bench --encode` to see what CUDA work costs a GL
// context (the GPU switches between the two): the same copies issued one a
// submission or ten a submission, small or picture-sized, device to device,
// host to device or device to host, or launches of an empty kernel.
//
//   cuda_load [--kind dtod|htod|dtoh|kernel] RATE PER BYTES SECONDS [THREADS [burst]]
//     every 1/RATE s: PER copies of BYTES (cuMemcpyDtoDAsync by default; the
//     host's side pinned) or PER launches of an empty kernel (one warp; BYTES
//     unused) on one stream, then cuStreamSynchronize: one submission;
//     prints what it issued.
//     With THREADS, as many threads of one context share the RATE, each on
//     its own stream, their submissions spread evenly in time; with
//     `burst`, all of them submit at the same instants (RATE / THREADS
//     times a second): the same submissions, gathered in time.
//
// libcuda.so.1 is loaded at run time (no CUDA toolkit needed).
// Build: gcc -O2 cuda_load.c -ldl -lpthread -o cuda_load   Run: ./cuda_load 1700 1 4096 9
//        ./cuda_load 1700 1 4096 9 8 burst      ./cuda_load --kind htod 1800 1 4096 6
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef void *CUcontext, *CUstream, *CUmodule, *CUfunction;
typedef unsigned long long CUdeviceptr;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static CUresult (*cuCtxSetCurrent)(CUcontext);
static CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
static CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
static CUresult (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
static CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void **, void **);
static CUresult (*cuStreamCreate)(CUstream *, unsigned);
static CUresult (*cuStreamSynchronize)(CUstream);

// What a submission issues: --kind's word for it, and what the summary calls it.
enum kind { DTOD, HTOD, DTOH, KERNEL };
enum { KINDS = KERNEL + 1 };
static const char *kindFlags[KINDS] = { "dtod", "htod", "dtoh", "kernel" };
static const char *kindNames[KINDS] = { "copies device to device", "copies host to device", "copies device to host", "empty kernel launches" };

// The empty kernel, as PTX the driver compiles for the device.
static const char noopPTX[] = ".version 7.0\n.target sm_50\n.address_size 64\n.visible .entry noop()\n{\n\tret;\n}\n";

struct worker {
    CUcontext context;
    CUdeviceptr from, to;
    void *host;
    CUfunction noop;
    enum kind kind;
    long long bytes, copies;
    int per, index, threads, burst, failed;
    double rate, seconds, t0;
    pthread_barrier_t *barrier;
    pthread_t thread;
};

static void *work(void *arg) {
    struct worker *w = arg;
    CUstream stream;
    if (cuCtxSetCurrent(w->context) || cuStreamCreate(&stream, 1)) { w->failed = 1; return NULL; }
    double period = w->threads / w->rate;
    // Spread: thread i starts i/RATE s in; burst: all at once, each period.
    double next = w->t0 + (w->burst ? 0 : w->index / w->rate);
    long long rounds = (long long)(w->seconds / period);
    for (long long r = 0; r < rounds; r++) {
        double wait = next - now();
        if (wait > 0) usleep((useconds_t)(wait * 1e6));
        if (w->burst) pthread_barrier_wait(w->barrier);
        for (int i = 0; i < w->per; i++) {
            switch (w->kind) {
            case DTOD: cuMemcpyDtoDAsync(w->to, w->from, w->bytes, stream); break;
            case HTOD: cuMemcpyHtoDAsync(w->to, w->host, w->bytes, stream); break;
            case DTOH: cuMemcpyDtoHAsync(w->host, w->from, w->bytes, stream); break;
            case KERNEL: cuLaunchKernel(w->noop, 1, 1, 1, 32, 1, 1, 0, stream, NULL, NULL); break;
            }
        }
        if (cuStreamSynchronize(stream)) { w->failed = 1; return NULL; }
        w->copies += w->per;
        next += period;
    }
    return NULL;
}

int main(int argc, char **argv) {
    enum kind kind = DTOD;
    if (argc >= 3 && strcmp(argv[1], "--kind") == 0) {
        int k = 0;
        while (k < KINDS && strcmp(argv[2], kindFlags[k]) != 0) k++;
        if (k == KINDS) { fprintf(stderr, "cuda_load: --kind '%s': expected dtod, htod, dtoh or kernel\n", argv[2]); return 2; }
        kind = (enum kind)k;
        argv += 2;
        argc -= 2;
    }
    double rate = argc >= 5 ? atof(argv[1]) : 0, seconds = argc >= 5 ? atof(argv[4]) : 0;
    int per = argc >= 5 ? atoi(argv[2]) : 0, threads = argc >= 6 ? atoi(argv[5]) : 1;
    int burst = argc == 7 && strcmp(argv[6], "burst") == 0;
    long long bytes = argc >= 5 ? atoll(argv[3]) : 0;
    if (argc < 5 || argc > 7 || (argc == 7 && !burst) || rate <= 0 || per < 1 || bytes < 1 || seconds <= 0 || threads < 1 || threads > 256) {
        fprintf(stderr, "usage: cuda_load [--kind dtod|htod|dtoh|kernel] RATE PER BYTES SECONDS [THREADS [burst]] (submissions a second, copies a submission, bytes a copy, seconds, threads of one context)\n");
        return 2;
    }
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) { fprintf(stderr, "cuda_load: libcuda.so.1 not found (no NVIDIA driver)\n"); return 1; }
    CUresult (*cuInit)(unsigned) = dlsym(lib, "cuInit");
    CUresult (*cuDeviceGet)(int *, int) = dlsym(lib, "cuDeviceGet");
    CUresult (*cuCtxCreate)(CUcontext *, unsigned, int) = dlsym(lib, "cuCtxCreate_v2");
    CUresult (*cuMemAlloc)(CUdeviceptr *, size_t) = dlsym(lib, "cuMemAlloc_v2");
    cuCtxSetCurrent = dlsym(lib, "cuCtxSetCurrent");
    cuMemcpyDtoDAsync = dlsym(lib, "cuMemcpyDtoDAsync_v2");
    cuMemcpyHtoDAsync = dlsym(lib, "cuMemcpyHtoDAsync_v2");
    cuMemcpyDtoHAsync = dlsym(lib, "cuMemcpyDtoHAsync_v2");
    cuLaunchKernel = dlsym(lib, "cuLaunchKernel");
    CUresult (*cuMemAllocHost)(void **, size_t) = dlsym(lib, "cuMemAllocHost_v2");
    CUresult (*cuModuleLoadData)(CUmodule *, const void *) = dlsym(lib, "cuModuleLoadData");
    CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *) = dlsym(lib, "cuModuleGetFunction");
    cuStreamCreate = dlsym(lib, "cuStreamCreate");
    cuStreamSynchronize = dlsym(lib, "cuStreamSynchronize");
    int device;
    CUcontext context;
    CUdeviceptr from, to;
    if (cuInit(0) || cuDeviceGet(&device, 0) || cuCtxCreate(&context, 0, device) || cuMemAlloc(&from, bytes) || cuMemAlloc(&to, bytes)) {
        fprintf(stderr, "cuda_load: CUDA set-up failed (device 0, two allocations of %lld bytes)\n", bytes);
        return 1;
    }
    void *host = NULL;
    CUmodule module;
    CUfunction noop = NULL;
    if ((kind == HTOD || kind == DTOH) && cuMemAllocHost(&host, bytes)) {
        fprintf(stderr, "cuda_load: %lld bytes of pinned host memory could not be allocated\n", bytes);
        return 1;
    }
    if (kind == KERNEL && (cuModuleLoadData(&module, noopPTX) || cuModuleGetFunction(&noop, module, "noop"))) {
        fprintf(stderr, "cuda_load: the empty kernel did not load\n");
        return 1;
    }
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, (unsigned)threads);
    struct worker *w = calloc((size_t)threads, sizeof *w);
    double t0 = now() + 0.01;
    for (int i = 0; i < threads; i++) {
        w[i] = (struct worker){ .context = context, .from = from, .to = to, .host = host, .noop = noop, .kind = kind, .bytes = bytes, .per = per, .index = i, .threads = threads,
                                .burst = burst, .rate = rate, .seconds = seconds, .t0 = t0, .barrier = &barrier };
        pthread_create(&w[i].thread, NULL, work, &w[i]);
    }
    long long copies = 0;
    int failed = 0;
    for (int i = 0; i < threads; i++) { pthread_join(w[i].thread, NULL); copies += w[i].copies; failed |= w[i].failed; }
    if (failed) { fprintf(stderr, "cuda_load: a stream, a copy or a launch failed\n"); return 1; }
    double took = now() - t0;
    printf("cuda_load: %lld %s of %lld bytes in %.1f s (%.0f a second, %d a submission, %d thread%s%s)\n", copies, kindNames[kind],
           kind == KERNEL ? 0 : bytes, took, copies / took, per, threads, threads == 1 ? "" : "s", burst ? ", in bursts" : "");
    return 0;
}
