#ifndef DIPTYCH_CGLES_SHIM_H
#define DIPTYCH_CGLES_SHIM_H
#include <GLES3/gl32.h>
#include <GLES2/gl2ext.h>
#include <stdint.h>
#include <stddef.h>

/* GL takes buffer offsets as pointers. */
static inline const void *diptych_gl_offset(size_t offset) { return (const void *)offset; }
#endif
