#ifndef DIPTYCH_CVA_SHIM_H
#define DIPTYCH_CVA_SHIM_H
/* Header only: libva is loaded with dlopen at run time (DiptychMedia/VALibrary.swift). */
#include <va/va.h>
#include <va/va_drm.h>
#include <va/va_str.h>
#endif
