/*
 * diptych.h — the C API of Diptych: composite two video streams on the GPU.
 *
 * A host program (a capture daemon, a GStreamer or FFmpeg based program, a
 * Python tool through ctypes) creates a session, pushes primary and secondary
 * frames into it, and takes the composited result out as RGBA or NV12 frames,
 * as the render target exported as dma-buf, as encoded H.264/HEVC access
 * units, and/or as a file. The session is the same one `diptych record` runs:
 * one clock, one render target, one finalize path.
 *
 * Build:   cc app.c $(pkg-config --cflags --libs diptych)
 * Install: scripts/install PREFIX   (header, libdiptych.so, diptych.pc and
 *          the Swift runtime it needs, in PREFIX/lib/diptych/)
 *
 * Conventions (they hold for every function below unless it says otherwise):
 *
 * - Status: functions return a diptych_status. DIPTYCH_OK (0) is success,
 *   DIPTYCH_WOULD_BLOCK (1) is "not done, try again" (not an error), and
 *   negative values are errors. After an error, diptych_last_error() on the
 *   same thread describes it in one line.
 * - Handles: a diptych_session* comes from diptych_session_create and is
 *   freed by diptych_session_destroy. Passing NULL where a handle is expected
 *   returns DIPTYCH_ERR_INVALID_ARGUMENT; so does a handle that was already
 *   destroyed (it is looked up in a table of live sessions), as long as its
 *   address has not been reused by a newer session.
 * - Threads: every function may be called from any thread, and concurrently
 *   with the others on the same session, except diptych_session_destroy,
 *   which must be the last call on a session. Pushes of one role should come
 *   from one thread (their order is their timestamp order).
 * - Callbacks run on the session's own threads, never inside a call of
 *   yours. They must not call diptych_session_finish or
 *   diptych_session_destroy of their own session, nor push with blocking
 *   (non-blocking pushes are fine): each would wait for the callback
 *   itself, so finish and a blocking push return DIPTYCH_ERR_STATE there
 *   and destroy does nothing (the last error says why). A slow callback
 *   slows the session.
 * - Memory: everything passed in is read during the call only (pushed
 *   frames are copied; dma-buf fds are duplicated). Everything handed to a
 *   callback is valid during the callback only. Strings returned by the
 *   library are owned by it unless the function says "free with diptych_free".
 * - Misuse never crashes the process: bad arguments, wrong sizes or strides,
 *   frames after finish and out-of-order timestamps return an error code.
 *   (Pointers that do not point to as many bytes as you say they do cannot be
 *   detected; that stays undefined behaviour, as with memcpy.)
 */
#ifndef DIPTYCH_H
#define DIPTYCH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped when a struct below changes. */
#define DIPTYCH_API_VERSION 1

/* ---- Status codes ---------------------------------------------------- */

typedef int32_t diptych_status;
/* Success. */
#define DIPTYCH_OK                     0
/* A non-blocking push found the queue full; nothing was queued. Retry later. */
#define DIPTYCH_WOULD_BLOCK            1
/* A NULL or malformed argument, an unknown option, a bad configuration or
 * layout, or a session handle that is not live. */
#define DIPTYCH_ERR_INVALID_ARGUMENT  (-1)
/* A frame that does not match its own description: zero or odd size for
 * 4:2:0, a stride below the minimum, a plane smaller than its rows need, a
 * missing plane pointer, an unknown format or fourcc, a closed fd. */
#define DIPTYCH_ERR_BAD_FRAME         (-2)
/* A timestamp not after the previous one of the same stream, timescale <= 0,
 * or a timestamp beyond +-2^31 seconds. */
#define DIPTYCH_ERR_TIMESTAMP         (-3)
/* The call does not fit the session's state: after finish, after the take
 * ended by itself, a secondary push to a session without a secondary, a
 * push to a stream ended with diptych_session_end_stream. */
#define DIPTYCH_ERR_STATE             (-4)
/* The platform lacks what the call needs: dma-buf import
 * (EGL_EXT_image_dma_buf_import) or export (EGL_MESA_image_dma_buf_export).
 * Mesa's software rasterizer (llvmpipe) has neither. */
#define DIPTYCH_ERR_UNSUPPORTED       (-5)
/* The session failed while running or starting (no GPU, encoder or output
 * error, storage full, critical thermal state). What was written to a file
 * has been finalized. */
#define DIPTYCH_ERR_RUNTIME           (-6)

/* ---- Enumerations ---------------------------------------------------- */

/* Stream roles. The primary is the clock: each primary frame pushed gives
 * exactly one output frame with the same timestamp. */
#define DIPTYCH_PRIMARY    0
#define DIPTYCH_SECONDARY  1

/* Pixel formats of CPU frames (8 bits per sample). */
#define DIPTYCH_FORMAT_RGBA  0  /* one plane: R, G, B, A bytes per pixel */
#define DIPTYCH_FORMAT_BGRA  1  /* one plane: B, G, R, A bytes per pixel */
#define DIPTYCH_FORMAT_NV12  2  /* Y plane, then interleaved U,V at half width and height */
#define DIPTYCH_FORMAT_I420  3  /* Y, U, V planes; U and V at half width and height */

/* Push flags. */
#define DIPTYCH_PUSH_BLOCK     0  /* wait while the stream's queue is full */
#define DIPTYCH_PUSH_NONBLOCK  1  /* return DIPTYCH_WOULD_BLOCK instead of waiting */

/* DRM_FORMAT_MOD_INVALID: "no explicit modifier" (implicit layout). */
#define DIPTYCH_MODIFIER_NONE  UINT64_C(0x00ffffffffffffff)

/* ---- Frames, buffers, packets ---------------------------------------- */

/* A frame in CPU memory.
 * In pushes: planes 0 .. n-1 of the format (n = 1, 2 or 3) must have
 * data[i] != NULL, stride[i] >= the minimum (width*4 for RGBA/BGRA, width
 * for Y, width rounded up to even for NV12's UV, (width+1)/2 for I420's U
 * and V) and size[i] >= stride[i] * (rows - 1) + the row's bytes; unused
 * planes are ignored. Timestamps are pts / timescale seconds, timescale > 0,
 * strictly increasing per stream, within +-2^31 seconds; both streams must use
 * one clock (they may use different timescales): the primary's first frame is
 * the output's zero, and a secondary frame is shown from its own time on.
 * In callbacks: filled in by the library, valid during the callback only;
 * pts and timescale are the primary frame's, exactly as pushed. */
typedef struct diptych_frame {
    int32_t width;
    int32_t height;
    int32_t format;            /* DIPTYCH_FORMAT_* */
    int32_t reserved;          /* set to 0 */
    const uint8_t *data[4];
    int32_t stride[4];         /* bytes per row */
    size_t size[4];            /* readable bytes from data[i] */
    int64_t pts;
    int32_t timescale;         /* ticks per second, e.g. 90000 or 1000000 */
    int32_t reserved2;         /* set to 0 */
} diptych_frame;

/* A frame in dma-buf memory, as EGL_EXT_image_dma_buf_import takes it.
 * In pushes: the fds stay yours (the library duplicates them); the buffer's
 * contents must not change until the frame has been composited (that is,
 * until the output frame with this primary timestamp, or the next one for a
 * secondary frame, has been delivered). fourcc is a DRM fourcc: 'NV12',
 * 'AB24' (RGBA bytes), 'AR24' (BGRA bytes) or 'YU12' (I420).
 * In the on_dmabuf callback: the composited render target; the fds are
 * closed when the callback returns (dup() them to keep them). */
typedef struct diptych_dmabuf {
    int32_t width;
    int32_t height;
    uint32_t fourcc;
    int32_t plane_count;       /* 1 to 4 */
    uint64_t modifier;         /* DIPTYCH_MODIFIER_NONE for implicit */
    int32_t fd[4];
    uint32_t offset[4];
    uint32_t stride[4];
    int64_t pts;
    int32_t timescale;
    int32_t reserved;          /* set to 0 */
} diptych_dmabuf;

/* One encoded access unit: H.264 or HEVC in Annex B (start codes), with the
 * parameter sets repeated before every keyframe. No B-frames: dts == pts and
 * packets come in presentation order. Valid during the callback only. */
typedef struct diptych_packet {
    const uint8_t *data;
    size_t size;
    int64_t pts;
    int64_t dts;
    int64_t duration;
    int32_t timescale;         /* the primary's timescale */
    int32_t keyframe;          /* 1 for an IDR picture */
} diptych_packet;

/* ---- Outputs --------------------------------------------------------- */

/* Output callbacks. `user` is passed back unchanged. Each callback is
 * called once per output frame (on_rgba every rgba_interval-th), in output
 * order; on_rgba and on_dmabuf from the session's render thread, on_nv12
 * and on_packet from its encoder thread; on_log from any of its threads. */
typedef void (*diptych_frame_fn)(void *user, const diptych_frame *frame);
typedef void (*diptych_packet_fn)(void *user, const diptych_packet *packet);
/* sync_fence_fd: a sync_file fd to wait on before reading the buffer, or
 * -1 when drawing has already completed (always -1 today: the export waits
 * for the GPU). Closed by the library after the callback. */
typedef void (*diptych_dmabuf_fn)(void *user, const diptych_dmabuf *buffer, int32_t sync_fence_fd);
typedef void (*diptych_log_fn)(void *user, const char *line);

/* Initialize with diptych_outputs_init, then set what you need. Every
 * callback may be NULL. A file output is asked for with "--out FILE" in the
 * session options. */
typedef struct diptych_outputs {
    uint32_t struct_size;      /* sizeof(diptych_outputs), set by diptych_outputs_init */
    int32_t rgba_interval;     /* deliver every n-th frame to on_rgba; 0 or 1 = every frame */
    void *user;
    diptych_frame_fn on_rgba;  /* RGBA, top row first, read back from the render target */
    diptych_frame_fn on_nv12;  /* NV12 (BT.709 limited range), as the encoder gets it */
    diptych_dmabuf_fn on_dmabuf; /* the render target as dma-buf (DIPTYCH_ERR_UNSUPPORTED at create where impossible) */
    diptych_packet_fn on_packet; /* encoded access units (encoding runs only if this or --out is set) */
    diptych_log_fn on_log;     /* one-line messages: the GPU and encoder chosen, warnings */
} diptych_outputs;

/* Sets every field to its default (no callbacks, rgba_interval 1).
 * Never fails; NULL is ignored. Any thread. */
void diptych_outputs_init(diptych_outputs *outputs);

/* ---- Library --------------------------------------------------------- */

/* The library version, e.g. "0.1.0". Static string. Any thread. */
const char *diptych_version(void);

/* The message of the last failing call on this thread, or "" if none failed
 * yet. Owned by the library; valid until the next failing call on this
 * thread. Never NULL. Any thread. */
const char *diptych_last_error(void);

/* Frees memory the library returned with "free with diptych_free". NULL ok. */
void diptych_free(void *pointer);

/* ---- Sessions -------------------------------------------------------- */

typedef struct diptych_session diptych_session;

/* Creates and starts a session. Blocks until the GPU context and the
 * outputs are ready (typically well under a second).
 *
 * argv/argc: options as for `diptych record`, without inputs:
 *   --size WxH          output size, even (required)
 *   --fps RATE          nominal rate, e.g. 30 or 30000/1001 (required)
 *   --secondary none    no secondary stream (default: one is pushed)
 *   --layout pip|side-by-side|stacked|primary-only|secondary-only,
 *   --pip-corner, --pip-size, --pip-margin, --swap-roles, --content-mode,
 *   --background, --rotate-primary/--rotate-secondary DEG,
 *   --mirror-primary/--mirror-secondary, --codec h264|hevc,
 *   --encoder auto|vaapi|nvenc|x264|gpu (gpu: H.264 only), --bitrate, --preset,
 *   --qp N (0-51, constant quantizer), --maxrate B, --bufsize B (VBV),
 *   --keyframe-interval, --slices N (slices a picture, H.264),
 *   --secondary-timeout SECONDS, --gpu auto|software|N|/dev/dri/renderDN,
 *   --out FILE|URL [--format mp4|mpegts|hls|...]   also write a file
 *   --segment-time SECONDS   split an .mp4/.mkv --out into NAME-0001.mp4, ...;
 *                       for an .m3u8 (HLS) --out, the segment length (default 2)
 *   --hls-list-size N   an HLS --out's live playlist lists the last N segments
 *                       (default 0: all; the finished playlist lists them all)
 *   --transition MS[:EASING]   how layout changes animate (default: at once)
 *   --overlay IMAGE@X,Y,W,H[,OPACITY][,top|bottom]   a PNG over the streams
 *                       (repeatable, at most 8; read when the session starts)
 *   --text TEMPLATE@X,Y[,SIZE][,KEY=VALUE]...   a text over the streams, set
 *                       again when its fields change ({timecode}, {frame},
 *                       {time}, {take}; keys color, font, outline, box,
 *                       opacity, align; with the images at most 8)
 *   --queue N           frames per push queue before pushes block (default 4)
 *   --config FILE       the same options as JSON
 * Options about sources (--primary, --primary-fallback, --secondary-fallback,
 * --primary-timeout, --source-reconnect-window, --source-failback,
 * --listen-timeout) and the take's audio (--audio, --primary-gain,
 * --secondary-gain), and their JSON keys, are refused with DIPTYCH_ERR_INVALID_ARGUMENT, the message
 * naming the option: the frames come from the host, which reconnects its
 * own sources and has no audio path here (a pushed session's outputs carry
 * no audio track) (see docs/live.md, "Live sources", for `diptych record` and
 * the server).
 * argv may be NULL when argc is 0; each argv[i] must be a NUL-terminated
 * string. outputs may be NULL (no callbacks); it is copied.
 *
 * On success stores a new handle in *session (free it with
 * diptych_session_destroy) and returns DIPTYCH_OK. On failure stores NULL
 * and returns DIPTYCH_ERR_INVALID_ARGUMENT (bad options), DIPTYCH_ERR_UNSUPPORTED
 * (on_dmabuf where the GPU cannot export) or DIPTYCH_ERR_RUNTIME (no GPU,
 * no encoder, the output cannot be opened). Any thread. */
diptych_status diptych_session_create(const char *const *argv, int32_t argc,
                                      const diptych_outputs *outputs,
                                      diptych_session **session);

/* Pushes a CPU frame of `role` (DIPTYCH_PRIMARY or DIPTYCH_SECONDARY).
 * The planes are copied before this returns.
 *
 * The session composites the primary frame at time t once it knows the
 * secondary frame to show: the latest secondary frame with pts <= t, known
 * once a secondary frame after t has been pushed, or the secondary stream
 * was ended, or --secondary-timeout passed without a secondary frame (it is
 * then held, and later frames do not wait until it delivers again). So push
 * both streams in timestamp order, interleaved.
 *
 * flags DIPTYCH_PUSH_BLOCK: blocks while the stream's queue is full (back-
 * pressure: the session is behind). DIPTYCH_PUSH_NONBLOCK: returns
 * DIPTYCH_WOULD_BLOCK instead, having queued nothing. A blocking secondary
 * push whose queue holds only frames after the primary's last one, while no
 * primary frame comes for --secondary-timeout, returns DIPTYCH_ERR_TIMESTAMP
 * (nothing queued; push primary frames, then the secondary again) instead of
 * waiting for frames that a host pushing from one thread cannot give.
 *
 * Errors: DIPTYCH_ERR_INVALID_ARGUMENT (NULL, unknown role or flags),
 * DIPTYCH_ERR_BAD_FRAME, DIPTYCH_ERR_TIMESTAMP, DIPTYCH_ERR_STATE.
 * Any thread; may block (see flags). */
diptych_status diptych_session_push_frame(diptych_session *session, int32_t role,
                                          const diptych_frame *frame, int32_t flags);

/* Pushes a dma-buf frame of `role`, imported by the GPU without a copy.
 * Same rules, flags and errors as diptych_session_push_frame, plus
 * DIPTYCH_ERR_UNSUPPORTED where the GPU cannot import dma-bufs (Mesa's
 * software rasterizer, for one: push CPU frames there). The message names
 * the missing extension. Any thread; may block (see flags). */
diptych_status diptych_session_push_dmabuf(diptych_session *session, int32_t role,
                                           const diptych_dmabuf *buffer, int32_t flags);

/* Changes the layout. It applies to every draw of the first primary frame
 * pushed after this call (never half a frame), and to the frames after it.
 * argv/argc: --layout KIND and optionally --pip-corner, --pip-size,
 * --pip-margin, --swap-roles, --content-mode, --background; options not
 * given take their defaults. --transition MS[:EASING] (easing linear,
 * ease-in, ease-out or ease-in-out, the default) animates the change: the
 * frames whose timestamps fall in those MS from that first frame are drawn
 * with rectangles, crops, corner radius and opacity interpolated from the
 * picture as it is (400 ms at 60 fps: 24 frames); without it, the session's
 * own --transition applies, if any, else the change is a cut. Errors:
 * DIPTYCH_ERR_INVALID_ARGUMENT (bad or non-layout option),
 * DIPTYCH_ERR_STATE (after finish). Any thread; does not block. */
diptych_status diptych_session_set_layout(diptych_session *session,
                                          const char *const *argv, int32_t argc);

/* Ends one stream: frames already pushed are still used, later pushes of it
 * fail with DIPTYCH_ERR_STATE. Ending the secondary lets primary frames
 * through without waiting for it (its last frame is held for
 * --secondary-timeout, then the primary is shown alone). Ending the primary
 * ends the take once its queued frames are composited. Idempotent. Any
 * thread; does not block. */
diptych_status diptych_session_end_stream(diptych_session *session, int32_t role);

/* Ends both streams and waits until every pushed primary frame has been
 * composited and delivered to the callbacks, the encoder is flushed (the
 * last packets delivered) and the file is complete. Blocks. Stores the number
 * of output frames in *frames when frames is not NULL.
 * Returns DIPTYCH_OK, DIPTYCH_ERR_RUNTIME when the take ended abnormally (the
 * message says why; *frames still counts what was delivered),
 * DIPTYCH_ERR_STATE when called twice. Any thread but a callback's. */
diptych_status diptych_session_finish(diptych_session *session, int64_t *frames);

/* The take's summary as JSON (frames, duration, encoder, GPU, stop reason,
 * warnings), after diptych_session_finish; NULL before (with
 * DIPTYCH_ERR_STATE as last error) or for a bad handle. Free with
 * diptych_free. Any thread. */
char *diptych_session_summary_json(diptych_session *session);

/* 1 when this session's GPU can import dma-bufs (diptych_session_push_dmabuf
 * works), 0 when it cannot, negative for a bad handle. Any thread. */
int32_t diptych_session_can_import_dmabuf(diptych_session *session);

/* Finishes the session if that has not been done (blocking, as
 * diptych_session_finish; its result is dropped) and frees it. NULL is
 * ignored. Must be the last call on the handle, from any thread but a
 * callback's. */
void diptych_session_destroy(diptych_session *session);

#ifdef __cplusplus
}
#endif

#endif /* DIPTYCH_H */
