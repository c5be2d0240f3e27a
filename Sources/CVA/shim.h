#ifndef DIPTYCH_CVA_SHIM_H
#define DIPTYCH_CVA_SHIM_H
#include <va/va.h>
#include <va/va_drm.h>
#include <va/va_str.h>
#endif
