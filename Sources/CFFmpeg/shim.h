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
#endif
