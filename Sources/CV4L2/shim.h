#ifndef DIPTYCH_CV4L2_SHIM_H
#define DIPTYCH_CV4L2_SHIM_H
// ioctl is variadic and the size and interval enumerations are anonymous
// unions, so each query is one small function here.
#include <linux/videodev2.h>
#include <sys/ioctl.h>
#include <stdint.h>
#include <string.h>

/// VIDIOC_QUERYCAP: the card name, the driver and the device's capabilities
/// (device_caps where the driver gives them). 0 or -1 with errno.
static inline int dv4l2_querycap(int fd, char *card, char *driver, uint32_t *caps) {
    struct v4l2_capability c;
    memset(&c, 0, sizeof c);
    if (ioctl(fd, VIDIOC_QUERYCAP, &c) < 0) return -1;
    memcpy(card, c.card, sizeof c.card); card[sizeof c.card - 1] = 0;
    memcpy(driver, c.driver, sizeof c.driver); driver[sizeof c.driver - 1] = 0;
    *caps = (c.capabilities & V4L2_CAP_DEVICE_CAPS) ? c.device_caps : c.capabilities;
    return 0;
}

static inline uint32_t dv4l2_cap_video_capture(void) { return V4L2_CAP_VIDEO_CAPTURE; }

/// VIDIOC_ENUM_FMT for single-planar capture: format `index`'s FourCC,
/// description and whether it is compressed. 0 or -1 (EINVAL past the last).
static inline int dv4l2_enum_fmt(int fd, uint32_t index, uint32_t *fourcc, char *description, int *compressed) {
    struct v4l2_fmtdesc f;
    memset(&f, 0, sizeof f);
    f.index = index;
    f.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
    if (ioctl(fd, VIDIOC_ENUM_FMT, &f) < 0) return -1;
    *fourcc = f.pixelformat;
    memcpy(description, f.description, sizeof f.description); description[sizeof f.description - 1] = 0;
    *compressed = (f.flags & V4L2_FMT_FLAG_COMPRESSED) != 0;
    return 0;
}

/// VIDIOC_ENUM_FRAMESIZES: size `index` of `fourcc`. A stepwise or
/// continuous range gives its largest size (index 0 only). 0 or -1.
static inline int dv4l2_enum_size(int fd, uint32_t fourcc, uint32_t index, uint32_t *width, uint32_t *height) {
    struct v4l2_frmsizeenum s;
    memset(&s, 0, sizeof s);
    s.index = index;
    s.pixel_format = fourcc;
    if (ioctl(fd, VIDIOC_ENUM_FRAMESIZES, &s) < 0) return -1;
    if (s.type == V4L2_FRMSIZE_TYPE_DISCRETE) { *width = s.discrete.width; *height = s.discrete.height; }
    else { *width = s.stepwise.max_width; *height = s.stepwise.max_height; }
    return 0;
}

/// VIDIOC_ENUM_FRAMEINTERVALS: interval `index` of `fourcc` at a size, as
/// a frame rate num/den (the interval inverted). A stepwise or continuous
/// range gives its shortest interval (index 0 only). 0 or -1.
static inline int dv4l2_enum_rate(int fd, uint32_t fourcc, uint32_t width, uint32_t height, uint32_t index,
                                  uint32_t *num, uint32_t *den) {
    struct v4l2_frmivalenum i;
    memset(&i, 0, sizeof i);
    i.index = index;
    i.pixel_format = fourcc;
    i.width = width;
    i.height = height;
    if (ioctl(fd, VIDIOC_ENUM_FRAMEINTERVALS, &i) < 0) return -1;
    struct v4l2_fract f = i.type == V4L2_FRMIVAL_TYPE_DISCRETE ? i.discrete : i.stepwise.min;
    *num = f.denominator; *den = f.numerator;
    return 0;
}

/// Whether a stepwise or continuous enumeration (sizes or intervals) has
/// ended after its one entry: 1 when index 0 was not discrete.
static inline int dv4l2_size_is_discrete(int fd, uint32_t fourcc) {
    struct v4l2_frmsizeenum s;
    memset(&s, 0, sizeof s);
    s.pixel_format = fourcc;
    if (ioctl(fd, VIDIOC_ENUM_FRAMESIZES, &s) < 0) return 1;
    return s.type == V4L2_FRMSIZE_TYPE_DISCRETE;
}

static inline int dv4l2_rate_is_discrete(int fd, uint32_t fourcc, uint32_t width, uint32_t height) {
    struct v4l2_frmivalenum i;
    memset(&i, 0, sizeof i);
    i.pixel_format = fourcc; i.width = width; i.height = height;
    if (ioctl(fd, VIDIOC_ENUM_FRAMEINTERVALS, &i) < 0) return 1;
    return i.type == V4L2_FRMIVAL_TYPE_DISCRETE;
}

/// libavdevice's registration where the binary links libavdevice itself
/// (the self-contained server build links it statically: scripts/build-server);
/// null where it does not, and `CaptureDevices` (DiptychMedia) loads
/// libavdevice.so at run time instead. A weak reference: nothing is linked
/// for it, and no libavdevice header is needed.
extern void avdevice_register_all(void) __attribute__((weak));
typedef void (*dv4l2_register_fn)(void);
static inline dv4l2_register_fn dv4l2_linked_avdevice_register_all(void) { return avdevice_register_all; }

#endif
