/*
 * push_frames.c — embed Diptych in a C program.
 *
 * Pushes two synthetic streams into a session (a red RGBA primary with a
 * faint horizontal gradient, and a blue NV12 secondary), switches the layout
 * from picture-in-picture to side by side half-way, takes the composited
 * frames back as RGBA and the encoded H.264 access units as packets, and
 * checks them: one output frame per primary frame with the same timestamp,
 * the PiP corner shows the secondary before the switch, the left half shows
 * the primary and the right half the secondary after it. Also checks that
 * misuse returns error codes. Prints "push_frames: OK" and exits 0 when
 * every check passes.
 *
 *   cc push_frames.c $(pkg-config --cflags --libs diptych) -o push_frames
 *   ./push_frames [OUTPUT.ts]
 */
#define _POSIX_C_SOURCE 200809L
#include <diptych.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { W = 320, H = 180, FRAMES = 30, SWITCH_AT = 15, TIMESCALE = 90000, START = 1000, STEP = 3000 };

static int failures = 0;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; fprintf(stderr, "FAIL: " __VA_ARGS__); fputc('\n', stderr); } } while (0)

/* What the callbacks saw (they run on Diptych's threads). */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int rgba_frames = 0, pixel_failures = 0, pts_failures = 0;
static int packets = 0, keyframes = 0, annexb_failures = 0;
static size_t packet_bytes = 0;

typedef struct { int r, g, b; } rgb;

static rgb pixel_at(const diptych_frame *f, int x, int y) {
    const uint8_t *p = f->data[0] + (size_t)y * f->stride[0] + (size_t)x * 4;
    rgb c = { p[0], p[1], p[2] };
    return c;
}

static int near(rgb c, int r, int g, int b) {
    return abs(c.r - r) <= 40 && abs(c.g - g) <= 40 && abs(c.b - b) <= 40;
}

static void on_rgba(void *user, const diptych_frame *f) {
    (void)user;
    pthread_mutex_lock(&lock);
    int i = rgba_frames++;
    if (f->format != DIPTYCH_FORMAT_RGBA || f->width != W || f->height != H ||
        f->timescale != TIMESCALE || f->pts != START + (int64_t)i * STEP) {
        pts_failures++;
        fprintf(stderr, "frame %d: %dx%d format %d pts %lld/%d\n", i, f->width, f->height, f->format,
                (long long)f->pts, f->timescale);
    }
    rgb tl = pixel_at(f, 8, 8), pip = pixel_at(f, W - 30, 20);
    rgb left = pixel_at(f, W / 4, H / 2), right = pixel_at(f, 3 * W / 4, H / 2);
    int ok;
    if (i < SWITCH_AT)   /* PiP, top-right corner: primary around, secondary in the corner */
        ok = near(tl, 230, 0, 0) && near(pip, 0, 0, 255);
    else                 /* side by side: primary left, secondary right */
        ok = near(left, 230, 0, 0) && near(right, 0, 0, 255);
    if (!ok) {
        pixel_failures++;
        fprintf(stderr, "frame %d pixels: top-left (%d,%d,%d) corner (%d,%d,%d) left (%d,%d,%d) right (%d,%d,%d)\n", i,
                tl.r, tl.g, tl.b, pip.r, pip.g, pip.b, left.r, left.g, left.b, right.r, right.g, right.b);
    }
    pthread_mutex_unlock(&lock);
}

static void on_packet(void *user, const diptych_packet *p) {
    (void)user;
    pthread_mutex_lock(&lock);
    packets++;
    packet_bytes += p->size;
    if (p->keyframe) keyframes++;
    if (p->size < 4 || !(p->data[0] == 0 && p->data[1] == 0 && (p->data[2] == 1 || (p->data[2] == 0 && p->data[3] == 1))))
        annexb_failures++;
    if (p->timescale != TIMESCALE || p->dts != p->pts) annexb_failures++;
    pthread_mutex_unlock(&lock);
}

static void on_log(void *user, const char *line) {
    (void)user;
    fprintf(stderr, "diptych: %s\n", line);
}

/* A red primary with a faint gradient, RGBA, rows padded to a 64-byte multiple. */
static uint8_t *make_primary(int i, int *stride) {
    *stride = (W * 4 + 63) / 64 * 64 + 64;
    uint8_t *p = calloc((size_t)*stride * H, 1);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            uint8_t *px = p + (size_t)y * *stride + x * 4;
            px[0] = (uint8_t)(230 + (x * 25) / W); px[1] = (uint8_t)(i % 4); px[2] = 0; px[3] = 255;
        }
    return p;
}

/* A blue secondary as NV12 (BT.709 limited range: Y 32, U 240, V 118), 160x90. */
enum { SW = 160, SH = 90 };
static uint8_t secondary_y[SW * SH], secondary_uv[SW * SH / 2];

int main(int argc, char **argv) {
    printf("diptych %s\n", diptych_version());
    memset(secondary_y, 32, sizeof secondary_y);
    for (size_t k = 0; k < sizeof secondary_uv; k += 2) { secondary_uv[k] = 240; secondary_uv[k + 1] = 118; }

    diptych_outputs outputs;
    diptych_outputs_init(&outputs);
    outputs.on_rgba = on_rgba;
    outputs.on_packet = on_packet;
    outputs.on_log = on_log;

    const char *options[] = { "--size", "320x180", "--fps", "30", "--layout", "pip", "--pip-corner", "top-right",
                              "--preset", "ultrafast", "--gpu", "auto", "--out", argc > 1 ? argv[1] : "" };
    int noptions = argc > 1 ? 14 : 12;
    diptych_session *session = NULL;
    diptych_status st = diptych_session_create(options, noptions, &outputs, &session);
    if (st != DIPTYCH_OK) {
        fprintf(stderr, "diptych_session_create: %d: %s\n", st, diptych_last_error());
        return 1;
    }

    /* Misuse gives error codes and messages, never a crash. */
    diptych_frame bad;
    memset(&bad, 0, sizeof bad);
    CHECK(diptych_session_push_frame(NULL, DIPTYCH_PRIMARY, &bad, 0) == DIPTYCH_ERR_INVALID_ARGUMENT, "NULL session");
    CHECK(strstr(diptych_last_error(), "NULL") != NULL, "NULL session message: %s", diptych_last_error());
    CHECK(diptych_session_push_frame(session, 7, &bad, 0) == DIPTYCH_ERR_INVALID_ARGUMENT, "bad role");
    CHECK(diptych_session_push_frame(session, DIPTYCH_PRIMARY, NULL, 0) == DIPTYCH_ERR_INVALID_ARGUMENT, "NULL frame");
    int stride;
    uint8_t *pixels = make_primary(0, &stride);
    bad.width = W; bad.height = H; bad.format = DIPTYCH_FORMAT_RGBA; bad.timescale = TIMESCALE;
    bad.data[0] = pixels; bad.stride[0] = W * 2; bad.size[0] = (size_t)stride * H;   /* stride too small */
    CHECK(diptych_session_push_frame(session, DIPTYCH_PRIMARY, &bad, 0) == DIPTYCH_ERR_BAD_FRAME, "small stride");
    printf("small stride -> %s\n", diptych_last_error());
    bad.stride[0] = stride; bad.size[0] = 100;                                         /* buffer too small */
    CHECK(diptych_session_push_frame(session, DIPTYCH_PRIMARY, &bad, 0) == DIPTYCH_ERR_BAD_FRAME, "small buffer");
    bad.size[0] = (size_t)stride * H; bad.timescale = 0;
    CHECK(diptych_session_push_frame(session, DIPTYCH_PRIMARY, &bad, 0) == DIPTYCH_ERR_TIMESTAMP, "timescale 0");
    const char *bad_layout[] = { "--layout", "diagonal" };
    CHECK(diptych_session_set_layout(session, bad_layout, 2) == DIPTYCH_ERR_INVALID_ARGUMENT, "bad layout");
    if (diptych_session_can_import_dmabuf(session) == 0) {
        diptych_dmabuf d;
        memset(&d, 0, sizeof d);
        d.width = W; d.height = H; d.fourcc = 0x34324241; /* 'AB24' */ d.plane_count = 1; d.fd[0] = 0;
        d.stride[0] = W * 4; d.modifier = DIPTYCH_MODIFIER_NONE; d.timescale = TIMESCALE;
        CHECK(diptych_session_push_dmabuf(session, DIPTYCH_PRIMARY, &d, 0) == DIPTYCH_ERR_UNSUPPORTED, "dma-buf import");
        printf("dma-buf push -> %s\n", diptych_last_error());
    }
    free(pixels);

    /* The two streams, interleaved in timestamp order: secondary first, then
     * the primary frame that drives the output frame at the same time. */
    for (int i = 0; i < FRAMES; i++) {
        int64_t pts = START + (int64_t)i * STEP;
        if (i == SWITCH_AT) {
            const char *sbs[] = { "--layout", "side-by-side" };
            st = diptych_session_set_layout(session, sbs, 2);
            CHECK(st == DIPTYCH_OK, "set_layout: %s", diptych_last_error());
        }
        diptych_frame s;
        memset(&s, 0, sizeof s);
        s.width = SW; s.height = SH; s.format = DIPTYCH_FORMAT_NV12;
        s.data[0] = secondary_y; s.stride[0] = SW; s.size[0] = sizeof secondary_y;
        s.data[1] = secondary_uv; s.stride[1] = SW; s.size[1] = sizeof secondary_uv;
        s.pts = pts; s.timescale = TIMESCALE;
        st = diptych_session_push_frame(session, DIPTYCH_SECONDARY, &s, DIPTYCH_PUSH_BLOCK);
        CHECK(st == DIPTYCH_OK, "push secondary %d: %s", i, diptych_last_error());

        uint8_t *p = make_primary(i, &stride);
        diptych_frame f;
        memset(&f, 0, sizeof f);
        f.width = W; f.height = H; f.format = DIPTYCH_FORMAT_RGBA;
        f.data[0] = p; f.stride[0] = stride; f.size[0] = (size_t)stride * H;
        f.pts = pts; f.timescale = TIMESCALE;
        /* Non-blocking push: retry while the pipeline is full. */
        while ((st = diptych_session_push_frame(session, DIPTYCH_PRIMARY, &f, DIPTYCH_PUSH_NONBLOCK)) == DIPTYCH_WOULD_BLOCK)
            nanosleep(&(struct timespec){ .tv_sec = 0, .tv_nsec = 1000000 }, NULL);
        CHECK(st == DIPTYCH_OK, "push primary %d: %s", i, diptych_last_error());
        free(p);   /* the frame was copied */

        if (i == 3) {   /* a timestamp that goes backwards is refused */
            f.pts = pts - STEP;
            CHECK(diptych_session_push_frame(session, DIPTYCH_PRIMARY, &f, 0) == DIPTYCH_ERR_TIMESTAMP, "pts backwards");
            printf("pts backwards -> %s\n", diptych_last_error());
        }
    }

    int64_t frames = -1;
    st = diptych_session_finish(session, &frames);
    CHECK(st == DIPTYCH_OK, "finish: %s", diptych_last_error());
    CHECK(frames == FRAMES, "finish reported %lld frames", (long long)frames);
    char *summary = diptych_session_summary_json(session);
    CHECK(summary != NULL, "summary: %s", diptych_last_error());
    if (summary) { printf("summary: %.160s...\n", summary); diptych_free(summary); }

    /* After finish: state errors. */
    uint8_t one[4] = { 0 };
    diptych_frame late;
    memset(&late, 0, sizeof late);
    late.width = 1; late.height = 1; late.format = DIPTYCH_FORMAT_RGBA;
    late.data[0] = one; late.stride[0] = 4; late.size[0] = 4; late.pts = 1 << 30; late.timescale = TIMESCALE;
    CHECK(diptych_session_push_frame(session, DIPTYCH_PRIMARY, &late, 0) == DIPTYCH_ERR_STATE, "push after finish");
    printf("push after finish -> %s\n", diptych_last_error());
    CHECK(diptych_session_finish(session, NULL) == DIPTYCH_ERR_STATE, "finish twice");
    diptych_session_destroy(session);
    CHECK(diptych_session_finish(session, NULL) == DIPTYCH_ERR_INVALID_ARGUMENT, "destroyed handle");

    pthread_mutex_lock(&lock);
    printf("rgba frames %d, packets %d (%d keyframes, %zu bytes)\n", rgba_frames, packets, keyframes, packet_bytes);
    CHECK(rgba_frames == FRAMES, "%d RGBA frames, expected %d", rgba_frames, FRAMES);
    CHECK(pts_failures == 0, "%d frames with a wrong size or timestamp", pts_failures);
    CHECK(pixel_failures == 0, "%d frames with wrong pixels", pixel_failures);
    CHECK(packets == FRAMES, "%d packets, expected %d", packets, FRAMES);
    CHECK(keyframes >= 1, "no keyframe");
    CHECK(annexb_failures == 0, "%d packets not Annex B or with wrong timestamps", annexb_failures);
    pthread_mutex_unlock(&lock);

    if (failures) { printf("push_frames: %d check(s) failed\n", failures); return 1; }
    printf("push_frames: OK\n");
    return 0;
}
