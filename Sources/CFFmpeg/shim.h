#ifndef DIPTYCH_CFFMPEG_SHIM_H
#define DIPTYCH_CFFMPEG_SHIM_H
#include <libavformat/avformat.h>
#include <libavcodec/avcodec.h>
#include <libavcodec/bsf.h>
#include <libavutil/avutil.h>
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
#include <libavutil/display.h>
#include <libavutil/hwcontext.h>
#include <libavutil/hwcontext_drm.h>
#include <libavutil/pixdesc.h>
#include <libavutil/channel_layout.h>
#include <libavutil/audio_fifo.h>
#include <libswscale/swscale.h>
#include <libavfilter/avfilter.h>
#include <libavfilter/buffersrc.h>
#include <libavfilter/buffersink.h>
#include <libswresample/swresample.h>
#include <errno.h>

/* Cast and function-like macros Swift cannot import. */
static inline int diptych_averror(int e) { return AVERROR(e); }
static inline int diptych_averror_eof(void) { return AVERROR_EOF; }
static inline int64_t diptych_av_nopts_value(void) { return AV_NOPTS_VALUE; }
static inline AVRational diptych_av_time_base_q(void) { return AV_TIME_BASE_Q; }
static inline const char *diptych_av_err2str(int err, char *buf, size_t size) {
    av_strerror(err, buf, size);
    return buf;
}
static inline int diptych_averror_invaliddata(void) { return AVERROR_INVALIDDATA; }
static inline int diptych_averror_exit(void) { return AVERROR_EXIT; }
static inline int diptych_averror_encoder_not_found(void) { return AVERROR_ENCODER_NOT_FOUND; }
static inline int diptych_averror_bsf_not_found(void) { return AVERROR_BSF_NOT_FOUND; }
static inline int diptych_averror_filter_not_found(void) { return AVERROR_FILTER_NOT_FOUND; }

/* AVFrame's fixed arrays import as tuples; index them here. */
static inline uint8_t *diptych_frame_data(const AVFrame *f, int i) { return f->data[i]; }
static inline int diptych_frame_linesize(const AVFrame *f, int i) { return f->linesize[i]; }
static inline void diptych_frame_set_plane(AVFrame *f, int i, uint8_t *data, int linesize) {
    f->data[i] = data; f->linesize[i] = linesize;
}
static inline void diptych_frame_set_buf(AVFrame *f, int i, AVBufferRef *buf) { f->buf[i] = buf; }

/* The VADisplay of a VA-API device context: AVVAAPIDeviceContext.display,
 * its first member (libavutil/hwcontext_vaapi.h, not included here: its
 * <va/va.h> belongs to the CVA module alone). */
static inline void *diptych_vaapi_display(const AVBufferRef *device) {
    const AVHWDeviceContext *d = (const AVHWDeviceContext *)device->data;
    return *(void *const *)d->hwctx;
}

/* Fills a one-object, one-layer DRM-PRIME descriptor (a dma-buf with up to 4 planes). */
static inline void diptych_drm_descriptor_fill(AVDRMFrameDescriptor *d, int fd, size_t size,
        uint64_t modifier, uint32_t fourcc, int nb_planes,
        const ptrdiff_t *offsets, const ptrdiff_t *pitches) {
    d->nb_objects = 1;
    d->objects[0].fd = fd;
    d->objects[0].size = size;
    d->objects[0].format_modifier = modifier;
    d->nb_layers = 1;
    d->layers[0].format = fourcc;
    d->layers[0].nb_planes = nb_planes;
    for (int i = 0; i < nb_planes && i < AV_DRM_MAX_PLANES; i++) {
        d->layers[0].planes[i].object_index = 0;
        d->layers[0].planes[i].offset = offsets[i];
        d->layers[0].planes[i].pitch = pitches[i];
    }
}

/* FFmpeg's own messages about one object (an encoder being opened), kept
 * while a capture is on, besides going where they always go (FFmpeg's
 * default callback, which prints them at DIPTYCH_FFMPEG_LOG's level): an
 * encoder that fails to open says why in its log, not in its error code.
 * One capture at a time (the caller serializes them). The slot is a static
 * local, so one Swift file (FFLogCapture.swift) makes every call. */
#include <stdatomic.h>
#include <string.h>
typedef struct { const void *object; char *buffer; size_t size; size_t used; } diptych_log_capture;
static inline _Atomic(diptych_log_capture *) *diptych_log_slot(void) {
    static _Atomic(diptych_log_capture *) slot;
    return &slot;
}
static inline void diptych_log_callback(void *avcl, int level, const char *fmt, va_list vl) {
    diptych_log_capture *c = atomic_load(diptych_log_slot());
    if (c && avcl == c->object && level <= AV_LOG_WARNING && c->used + 1 < c->size) {
        va_list copy;
        va_copy(copy, vl);
        char line[512];
        int prefix = 0;
        av_log_format_line(avcl, level, fmt, copy, line, sizeof line, &prefix);
        va_end(copy);
        size_t n = strlen(line);
        if (n > c->size - 1 - c->used) n = c->size - 1 - c->used;
        memcpy(c->buffer + c->used, line, n);
        c->used += n;
        c->buffer[c->used] = 0;
    }
    av_log_default_callback(avcl, level, fmt, vl);
}
/* Starts keeping `object`'s messages in `buffer` (NUL-terminated, `size` bytes). */
static inline void diptych_log_capture_begin(diptych_log_capture *c, const void *object, char *buffer, size_t size) {
    c->object = object; c->buffer = buffer; c->size = size; c->used = 0;
    if (size > 0) buffer[0] = 0;
    av_log_set_callback(diptych_log_callback);
    atomic_store(diptych_log_slot(), c);
}
static inline void diptych_log_capture_end(void) { atomic_store(diptych_log_slot(), (diptych_log_capture *)0); }

/* The CUDA device pointers of a hardware frame: data[0] and data[1] are the
 * NV12 planes (FFmpeg's CUDA frame layout), as integers. */
static inline unsigned long long diptych_frame_device_plane(const AVFrame *f, int i) { return (unsigned long long)(uintptr_t)f->data[i]; }
static inline void diptych_frame_set_device_plane(AVFrame *f, int i, unsigned long long address, int linesize) {
    f->data[i] = (uint8_t *)(uintptr_t)address; f->linesize[i] = linesize;
}
#endif
