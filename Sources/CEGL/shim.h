#ifndef DIPTYCH_CEGL_SHIM_H
#define DIPTYCH_CEGL_SHIM_H
#define EGL_EGLEXT_PROTOTYPES 0
#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <stdint.h>

/* EGL_NO_* are cast macros Swift cannot import. */
static inline EGLDisplay diptych_egl_no_display(void) { return EGL_NO_DISPLAY; }
static inline EGLContext diptych_egl_no_context(void) { return EGL_NO_CONTEXT; }
static inline EGLSurface diptych_egl_no_surface(void) { return EGL_NO_SURFACE; }
static inline EGLImageKHR diptych_egl_no_image(void) { return EGL_NO_IMAGE_KHR; }
static inline EGLSyncKHR diptych_egl_no_sync(void) { return EGL_NO_SYNC_KHR; }
static inline EGLConfig diptych_egl_no_config(void) { return (EGLConfig)0; }
static inline EGLNativeDisplayType diptych_egl_default_display(void) { return EGL_DEFAULT_DISPLAY; }
#endif
