#ifndef DIPTYCH_CGBM_SHIM_H
#define DIPTYCH_CGBM_SHIM_H
/* Header only: libgbm is loaded with dlopen at run time (see DiptychGPU). */
#include <gbm.h>
#include <dlfcn.h>
#endif
