#ifndef DIPTYCH_CFFMPEG_SHIM_H
#define DIPTYCH_CFFMPEG_SHIM_H
#include <libavformat/avformat.h>
#include <libavcodec/avcodec.h>
#include <libavutil/avutil.h>
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
#include <libavutil/display.h>
#include <libavutil/hwcontext.h>
#include <libavutil/pixdesc.h>
#include <libavutil/channel_layout.h>
#include <libavutil/audio_fifo.h>
#include <libswscale/swscale.h>
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
#endif
