// The transfers of one composite without the composite: what the bus and the
// driver allow, from persistently mapped buffers, no CPU copies. Compare
// diptych-gpu-bench's composites per second with these rates.
//
//   up-tex     two NV12 frames per iteration, glTexSubImage2D from pixel-unpack buffers (R8 + RG8)
//   up-tex-a1  the same with GL_UNPACK_ALIGNMENT 1
//   up-buf     the same bytes with glCopyBufferSubData into a device buffer
//   down       one NV12 frame per iteration, glCopyBufferSubData from a device buffer into a pack buffer
//   mixed      up-tex and down in every iteration of one context (a PiP composite's transfers)
//   duplex     up-tex in one context and thread, down in another, at the same time
//
// Build: gcc -O2 transfer_bw.c -lEGL -lGLESv2 -lpthread -o transfer_bw   Run: ./transfer_bw [iterations] [width height]
#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <GLES3/gl32.h>
#include <GLES2/gl2ext.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define RING 8
enum { UP_TEX, UP_TEX_A1, UP_BUF, DOWN, MIXED };
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static EGLDisplay dpy;
static PFNGLBUFFERSTORAGEEXTPROC storage;
static int W = 1920, H = 1080, N = 2000;
static long frame;

struct job { int mode; double seconds; pthread_barrier_t *start; };

static void *run(void *arg) {
    struct job *j = arg;
    EGLint ca[] = {EGL_CONTEXT_MAJOR_VERSION, 3, EGL_CONTEXT_MINOR_VERSION, 2, EGL_NONE};
    EGLContext c = eglCreateContext(dpy, EGL_NO_CONFIG_KHR, EGL_NO_CONTEXT, ca);
    if (!c || !eglMakeCurrent(dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, c)) { fprintf(stderr, "context failed\n"); exit(1); }
    GLuint up[RING], down[RING], dev, ty[RING], tuv[RING];
    GLbitfield wf = GL_MAP_WRITE_BIT | GL_MAP_PERSISTENT_BIT_EXT | GL_MAP_COHERENT_BIT_EXT;
    GLbitfield rf = GL_MAP_READ_BIT | GL_MAP_PERSISTENT_BIT_EXT | GL_MAP_COHERENT_BIT_EXT;
    glGenBuffers(RING, up); glGenBuffers(RING, down); glGenBuffers(1, &dev);
    glGenTextures(RING, ty); glGenTextures(RING, tuv);
    for (int i = 0; i < RING; i++) {
        glBindBuffer(GL_PIXEL_UNPACK_BUFFER, up[i]); storage(GL_PIXEL_UNPACK_BUFFER, 2 * frame, 0, wf);
        char *p = glMapBufferRange(GL_PIXEL_UNPACK_BUFFER, 0, 2 * frame, wf);
        for (long k = 0; k < 2 * frame; k += 4096) p[k] = (char)k;
        glBindBuffer(GL_PIXEL_PACK_BUFFER, down[i]); storage(GL_PIXEL_PACK_BUFFER, frame, 0, rf);
        glMapBufferRange(GL_PIXEL_PACK_BUFFER, 0, frame, rf);
        glBindTexture(GL_TEXTURE_2D, ty[i]); glTexStorage2D(GL_TEXTURE_2D, 1, GL_R8, W, H);
        glBindTexture(GL_TEXTURE_2D, tuv[i]); glTexStorage2D(GL_TEXTURE_2D, 1, GL_RG8, W / 2, H / 2);
    }
    glBindBuffer(GL_PIXEL_UNPACK_BUFFER, 0); glBindBuffer(GL_PIXEL_PACK_BUFFER, 0);
    glBindBuffer(GL_COPY_WRITE_BUFFER, dev); glBufferData(GL_COPY_WRITE_BUFFER, 2 * frame, 0, GL_DYNAMIC_COPY);
    glPixelStorei(GL_UNPACK_ALIGNMENT, j->mode == UP_TEX_A1 ? 1 : 4);
    GLsync fences[RING] = {0};
    glFinish();
    for (int rep = 0; rep < 2; rep++) {
        if (rep && j->start) pthread_barrier_wait(j->start);
        double t0 = now();
        for (int it = 0; it < N; it++) {
            int i = it % RING, m = j->mode;
            if (fences[i]) { glClientWaitSync(fences[i], GL_SYNC_FLUSH_COMMANDS_BIT, 5000000000ull); glDeleteSync(fences[i]); fences[i] = 0; }
            if (m == UP_TEX || m == UP_TEX_A1 || m == MIXED) {
                glBindBuffer(GL_PIXEL_UNPACK_BUFFER, up[i]);
                for (int f = 0; f < 2; f++) {
                    glBindTexture(GL_TEXTURE_2D, ty[(i + f) % RING]);
                    glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, W, H, GL_RED, GL_UNSIGNED_BYTE, (void *)(size_t)(f * frame));
                    glBindTexture(GL_TEXTURE_2D, tuv[(i + f) % RING]);
                    glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, W / 2, H / 2, GL_RG, GL_UNSIGNED_BYTE, (void *)(size_t)(f * frame + (long)W * H));
                }
                glBindBuffer(GL_PIXEL_UNPACK_BUFFER, 0);
            }
            if (m == UP_BUF) {
                glBindBuffer(GL_COPY_READ_BUFFER, up[i]); glBindBuffer(GL_COPY_WRITE_BUFFER, dev);
                glCopyBufferSubData(GL_COPY_READ_BUFFER, GL_COPY_WRITE_BUFFER, 0, 0, 2 * frame);
            }
            if (m == DOWN || m == MIXED) {
                glBindBuffer(GL_COPY_READ_BUFFER, dev); glBindBuffer(GL_COPY_WRITE_BUFFER, down[i]);
                glCopyBufferSubData(GL_COPY_READ_BUFFER, GL_COPY_WRITE_BUFFER, 0, 0, frame);
            }
            fences[i] = glFenceSync(GL_SYNC_GPU_COMMANDS_COMPLETE, 0);
            glFlush();
        }
        glFinish();
        j->seconds = now() - t0;
    }
    if (glGetError()) fprintf(stderr, "GL error in mode %d\n", j->mode);
    eglMakeCurrent(dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
    eglDestroyContext(dpy, c);
    return 0;
}

static double bytesPer(int m) { return m == DOWN ? frame : m == MIXED ? 3.0 * frame : 2.0 * frame; }

int main(int argc, char **argv) {
    N = argc > 1 ? atoi(argv[1]) : 2000;
    if (argc > 3) { W = atoi(argv[2]); H = atoi(argv[3]); }
    frame = (long)W * H * 3 / 2;
    PFNEGLQUERYDEVICESEXTPROC qd = (void *)eglGetProcAddress("eglQueryDevicesEXT");
    PFNEGLGETPLATFORMDISPLAYEXTPROC gpd = (void *)eglGetProcAddress("eglGetPlatformDisplayEXT");
    EGLDeviceEXT devs[8]; EGLint nd = 0; dpy = EGL_NO_DISPLAY;
    if (qd && gpd && qd(8, devs, &nd) && nd > 0) dpy = gpd(EGL_PLATFORM_DEVICE_EXT, devs[0], 0);
    if (!eglInitialize(dpy, 0, 0)) { fprintf(stderr, "eglInitialize failed\n"); return 1; }
    eglBindAPI(EGL_OPENGL_ES_API);
    storage = (void *)eglGetProcAddress("glBufferStorageEXT");
    if (!storage) { fprintf(stderr, "no GL_EXT_buffer_storage\n"); return 1; }
    printf("%dx%d NV12 (%ld bytes a frame), %d iterations\n", W, H, frame, N);
    const char *names[] = {"up-tex", "up-tex-a1", "up-buf", "down", "mixed"};
    for (int m = 0; m <= MIXED; m++) {
        struct job j = {m, 0, 0};
        run(&j);
        printf("%-9s %6.0f iterations/s, %5.1f GB/s\n", names[m], N / j.seconds, N * bytesPer(m) / j.seconds / 1e9);
    }
    // Two contexts on two threads at once: uploads in one, readbacks in the other.
    pthread_barrier_t start; pthread_barrier_init(&start, 0, 2);
    struct job a = {UP_TEX, 0, &start}, b = {DOWN, 0, &start};
    pthread_t ta, tb;
    pthread_create(&ta, 0, run, &a); pthread_create(&tb, 0, run, &b);
    pthread_join(ta, 0); pthread_join(tb, 0);
    printf("duplex    up-tex %6.0f/s (%5.1f GB/s) with down %6.0f/s (%5.1f GB/s) at the same time\n",
           N / a.seconds, N * bytesPer(UP_TEX) / a.seconds / 1e9, N / b.seconds, N * bytesPer(DOWN) / b.seconds / 1e9);
    return 0;
}
