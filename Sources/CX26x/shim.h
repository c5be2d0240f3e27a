#ifndef DIPTYCH_CX26X_SHIM_H
#define DIPTYCH_CX26X_SHIM_H
/* The preset and tune names libx264 and libx265 accept, from their headers
 * (header-only: nothing here is linked). */
#include <stdint.h>
#include <x264.h>
#include <x265.h>

static inline const char *const *diptych_x264_preset_names(void) { return x264_preset_names; }
static inline const char *const *diptych_x264_tune_names(void) { return x264_tune_names; }
static inline const char *const *diptych_x265_preset_names(void) { return x265_preset_names; }
static inline const char *const *diptych_x265_tune_names(void) { return x265_tune_names; }
#endif
