#ifndef DIPTYCH_CVA_SHIM_H
#define DIPTYCH_CVA_SHIM_H
/* Header only: libva is loaded with dlopen at run time (DiptychMedia/VALibrary.swift). */
#include <va/va.h>
#include <va/va_drm.h>
#include <va/va_str.h>
#include <va/va_drmcommon.h>

/* An NV12 surface to import (VA_SURFACE_ATTRIB_MEM_TYPE_DRM_PRIME_2): one
 * layer of format NV12 whose two planes lie in `nobjects` dma-buf objects,
 * all with `modifier`. The arrays hold `nobjects` objects and 2 planes. */
static inline void diptych_va_nv12_descriptor(VADRMPRIMESurfaceDescriptor *d, uint32_t width, uint32_t height,
        uint32_t nobjects, const int *fds, const uint32_t *sizes, uint64_t modifier,
        const uint32_t *plane_object, const uint32_t *offsets, const uint32_t *pitches) {
    *d = (VADRMPRIMESurfaceDescriptor){0};
    d->fourcc = VA_FOURCC_NV12;
    d->width = width;
    d->height = height;
    d->num_objects = nobjects;
    for (uint32_t i = 0; i < nobjects && i < 4; i++) {
        d->objects[i].fd = fds[i];
        d->objects[i].size = sizes[i];
        d->objects[i].drm_format_modifier = modifier;
    }
    d->num_layers = 1;
    d->layers[0].drm_format = VA_FOURCC_NV12;  /* DRM_FORMAT_NV12 has the same code */
    d->layers[0].num_planes = 2;
    for (int i = 0; i < 2; i++) {
        d->layers[0].object_index[i] = plane_object[i];
        d->layers[0].offset[i] = offsets[i];
        d->layers[0].pitch[i] = pitches[i];
    }
}

/* The two attributes of a DRM PRIME 2 import of `d` (vaCreateSurfaces). */
static inline void diptych_va_prime2_attributes(VASurfaceAttrib *a, VADRMPRIMESurfaceDescriptor *d) {
    a[0].type = VASurfaceAttribMemoryType;
    a[0].flags = VA_SURFACE_ATTRIB_SETTABLE;
    a[0].value.type = VAGenericValueTypeInteger;
    a[0].value.value.i = VA_SURFACE_ATTRIB_MEM_TYPE_DRM_PRIME_2;
    a[1].type = VASurfaceAttribExternalBufferDescriptor;
    a[1].flags = VA_SURFACE_ATTRIB_SETTABLE;
    a[1].value.type = VAGenericValueTypePointer;
    a[1].value.value.p = d;
}
#endif
