// The transfers of one composite without the composite: what the bus and the
// driver allow in one GL context, from persistently mapped buffers, no CPU
// copies. Compare diptych-gpu-bench's composites per second with these rates.
//
//   up-tex   two 1080p NV12 frames per iteration, glTexSubImage2D from pixel-unpack buffers (R8 + RG8)
//   up-buf   the same bytes with glCopyBufferSubData into a device buffer
//   down     one 1080p NV12 frame per iteration, glCopyBufferSubData from a device buffer into a pack buffer
//   mixed    up-tex and down in every iteration (a PiP composite's transfers)
//
// Build: gcc -O2 transfer_bw.c -lEGL -lGLESv2 -o transfer_bw   Run: ./transfer_bw [iterations] [width height]
#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <GLES3/gl32.h>
#include <GLES2/gl2ext.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define RING 8
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 2000;
    int W = argc > 3 ? atoi(argv[2]) : 1920, H = argc > 3 ? atoi(argv[3]) : 1080;
    long frame = (long)W * H * 3 / 2;
    PFNEGLQUERYDEVICESEXTPROC qd = (void *)eglGetProcAddress("eglQueryDevicesEXT");
    PFNEGLGETPLATFORMDISPLAYEXTPROC gpd = (void *)eglGetProcAddress("eglGetPlatformDisplayEXT");
    EGLDeviceEXT devs[8]; EGLint nd = 0; EGLDisplay d = EGL_NO_DISPLAY;
    if (qd && gpd && qd(8, devs, &nd) && nd > 0) d = gpd(EGL_PLATFORM_DEVICE_EXT, devs[0], 0);
    if (!eglInitialize(d, 0, 0)) { fprintf(stderr, "eglInitialize failed\n"); return 1; }
    eglBindAPI(EGL_OPENGL_ES_API);
    EGLint ca[] = {EGL_CONTEXT_MAJOR_VERSION, 3, EGL_CONTEXT_MINOR_VERSION, 2, EGL_NONE};
    EGLContext c = eglCreateContext(d, EGL_NO_CONFIG_KHR, EGL_NO_CONTEXT, ca);
    if (!c || !eglMakeCurrent(d, EGL_NO_SURFACE, EGL_NO_SURFACE, c)) { fprintf(stderr, "context failed\n"); return 1; }
    PFNGLBUFFERSTORAGEEXTPROC storage = (void *)eglGetProcAddress("glBufferStorageEXT");
    if (!storage) { fprintf(stderr, "no GL_EXT_buffer_storage\n"); return 1; }
    printf("GL_RENDERER %s, %dx%d NV12 (%ld bytes a frame)\n", glGetString(GL_RENDERER), W, H, frame);

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
    GLsync fences[RING] = {0};
    const char *names[] = {"up-tex", "up-buf", "down", "mixed"};
    for (int mode = 0; mode < 4; mode++) {
        for (int rep = 0; rep < 2; rep++) {
            double t0 = now();
            for (int it = 0; it < n; it++) {
                int i = it % RING;
                if (fences[i]) { glClientWaitSync(fences[i], GL_SYNC_FLUSH_COMMANDS_BIT, 5000000000ull); glDeleteSync(fences[i]); fences[i] = 0; }
                if (mode == 0 || mode == 3) {
                    glBindBuffer(GL_PIXEL_UNPACK_BUFFER, up[i]);
                    for (int f = 0; f < 2; f++) {
                        glBindTexture(GL_TEXTURE_2D, ty[(i + f) % RING]);
                        glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, W, H, GL_RED, GL_UNSIGNED_BYTE, (void *)(size_t)(f * frame));
                        glBindTexture(GL_TEXTURE_2D, tuv[(i + f) % RING]);
                        glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, W / 2, H / 2, GL_RG, GL_UNSIGNED_BYTE, (void *)(size_t)(f * frame + (long)W * H));
                    }
                    glBindBuffer(GL_PIXEL_UNPACK_BUFFER, 0);
                }
                if (mode == 1) {
                    glBindBuffer(GL_COPY_READ_BUFFER, up[i]); glBindBuffer(GL_COPY_WRITE_BUFFER, dev);
                    glCopyBufferSubData(GL_COPY_READ_BUFFER, GL_COPY_WRITE_BUFFER, 0, 0, 2 * frame);
                }
                if (mode == 2 || mode == 3) {
                    glBindBuffer(GL_COPY_READ_BUFFER, dev); glBindBuffer(GL_COPY_WRITE_BUFFER, down[i]);
                    glCopyBufferSubData(GL_COPY_READ_BUFFER, GL_COPY_WRITE_BUFFER, 0, 0, frame);
                }
                fences[i] = glFenceSync(GL_SYNC_GPU_COMMANDS_COMPLETE, 0);
                glFlush();
            }
            glFinish();
            double t = now() - t0;
            double bytes = mode == 2 ? frame : mode == 3 ? 3.0 * frame : 2.0 * frame;
            if (rep) printf("%-7s %6.0f iterations/s, %5.1f GB/s (err 0x%x)\n", names[mode], n / t, n * bytes / t / 1e9, glGetError());
        }
    }
    return 0;
}
