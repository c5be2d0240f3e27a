#ifndef DIPTYCH_CFREETYPE_H
#define DIPTYCH_CFREETYPE_H
/* FreeType (libfreetype.so.6) and HarfBuzz (libharfbuzz.so.0), loaded with
 * dlopen at run time by DiptychText's TextLibrary, so binaries run where they
 * are not installed and the self-contained server archive links neither.
 *
 * Only what text overlays call is declared here, with the libraries' own
 * struct tags as opaque handles; freetype_layout.c is compiled against the
 * real headers (libfreetype-dev, libharfbuzz-dev) and fails the build where a
 * declaration here differs from them. It also reads the few struct fields
 * Swift needs (a rendered glyph's bitmap, a face's size metrics), so no
 * struct layout of FreeType's is written out by hand. Nothing here links
 * either library. */
#include <stddef.h>
#include <stdint.h>

typedef struct FT_LibraryRec_ *diptych_ft_library;
typedef struct FT_FaceRec_ *diptych_ft_face;
typedef struct FT_GlyphSlotRec_ *diptych_ft_glyph_slot;
typedef struct FT_GlyphRec_ *diptych_ft_glyph;
typedef struct FT_StrokerRec_ *diptych_ft_stroker;
typedef struct FT_Vector_ diptych_ft_vector;
typedef struct hb_font_t diptych_hb_font;
typedef struct hb_buffer_t diptych_hb_buffer;
typedef struct hb_feature_t diptych_hb_feature;

/* FreeType: FT_Error is int, FT_Long and FT_Fixed long, FT_UInt unsigned,
 * FT_Int32 int, FT_Bool unsigned char; the enums are unsigned int. */
typedef int (*diptych_ft_init_fn)(diptych_ft_library *alibrary);
typedef int (*diptych_ft_done_library_fn)(diptych_ft_library library);
typedef int (*diptych_ft_new_memory_face_fn)(diptych_ft_library library, const unsigned char *base, long size,
                                             long face_index, diptych_ft_face *aface);
typedef int (*diptych_ft_done_face_fn)(diptych_ft_face face);
typedef int (*diptych_ft_set_pixel_sizes_fn)(diptych_ft_face face, unsigned int width, unsigned int height);
typedef int (*diptych_ft_load_glyph_fn)(diptych_ft_face face, unsigned int glyph_index, int flags);
typedef int (*diptych_ft_get_glyph_fn)(diptych_ft_glyph_slot slot, diptych_ft_glyph *aglyph);
typedef int (*diptych_ft_glyph_to_bitmap_fn)(diptych_ft_glyph *glyph, unsigned int render_mode,
                                             const diptych_ft_vector *origin, unsigned char destroy);
typedef void (*diptych_ft_done_glyph_fn)(diptych_ft_glyph glyph);
typedef int (*diptych_ft_stroker_new_fn)(diptych_ft_library library, diptych_ft_stroker *astroker);
typedef void (*diptych_ft_stroker_set_fn)(diptych_ft_stroker stroker, long radius, unsigned int line_cap,
                                          unsigned int line_join, long miter_limit);
typedef void (*diptych_ft_stroker_done_fn)(diptych_ft_stroker stroker);
typedef int (*diptych_ft_glyph_stroke_fn)(diptych_ft_glyph *glyph, diptych_ft_stroker stroker, unsigned char destroy);

/* HarfBuzz. */
typedef diptych_hb_font *(*diptych_hb_ft_font_create_referenced_fn)(diptych_ft_face face);
typedef void (*diptych_hb_font_destroy_fn)(diptych_hb_font *font);
typedef diptych_hb_buffer *(*diptych_hb_buffer_create_fn)(void);
typedef void (*diptych_hb_buffer_destroy_fn)(diptych_hb_buffer *buffer);
typedef void (*diptych_hb_buffer_reset_fn)(diptych_hb_buffer *buffer);
typedef void (*diptych_hb_buffer_add_utf8_fn)(diptych_hb_buffer *buffer, const char *text, int text_length,
                                              unsigned int item_offset, int item_length);
typedef void (*diptych_hb_buffer_guess_segment_properties_fn)(diptych_hb_buffer *buffer);
typedef void (*diptych_hb_shape_fn)(diptych_hb_font *font, diptych_hb_buffer *buffer,
                                    const diptych_hb_feature *features, unsigned int num_features);

/* hb_glyph_info_t and hb_glyph_position_t, field for field (checked against
 * hb.h in freetype_layout.c). */
typedef struct diptych_hb_glyph_info {
    uint32_t codepoint; /* after hb_shape: the glyph index */
    uint32_t mask;
    uint32_t cluster;
    uint32_t var1, var2;
} diptych_hb_glyph_info;
typedef struct diptych_hb_glyph_position {
    int32_t x_advance, y_advance, x_offset, y_offset; /* 26.6 pixels with hb_ft's scale */
    uint32_t var;
} diptych_hb_glyph_position;
typedef diptych_hb_glyph_info *(*diptych_hb_buffer_get_glyph_infos_fn)(diptych_hb_buffer *buffer, unsigned int *length);
typedef diptych_hb_glyph_position *(*diptych_hb_buffer_get_glyph_positions_fn)(diptych_hb_buffer *buffer, unsigned int *length);

/* Constants (FT_LOAD_NO_BITMAP, FT_RENDER_MODE_NORMAL, FT_STROKER_LINECAP_ROUND,
 * FT_STROKER_LINEJOIN_ROUND, FT_PIXEL_MODE_GRAY, FT_FACE_FLAG_SCALABLE). */
enum {
    DIPTYCH_FT_LOAD_NO_BITMAP = 1 << 3,
    DIPTYCH_FT_RENDER_MODE_NORMAL = 0,
    DIPTYCH_FT_STROKER_LINECAP_ROUND = 1,
    DIPTYCH_FT_STROKER_LINEJOIN_ROUND = 0,
    DIPTYCH_FT_PIXEL_MODE_GRAY = 2,
};

/* A rendered glyph's coverage: `rows` × `width` bytes, `pitch` apart (a
 * negative pitch runs bottom-up), placed `left` pixels right of the pen and
 * its top row `top` pixels above the baseline. */
typedef struct diptych_ft_bitmap {
    int left, top;
    unsigned int rows, width;
    int pitch;
    const unsigned char *buffer;
    unsigned char pixel_mode;
} diptych_ft_bitmap;

/* The bitmap of a glyph FT_Glyph_To_Bitmap turned into an FT_BitmapGlyph. */
void diptych_ft_bitmap_glyph(diptych_ft_glyph glyph, diptych_ft_bitmap *out);
/* face->glyph. */
diptych_ft_glyph_slot diptych_ft_face_glyph(diptych_ft_face face);
/* The face's size metrics at its pixel size, in 26.6 pixels (descender negative). */
void diptych_ft_face_size_metrics(diptych_ft_face face, long *ascender, long *descender, long *height);
/* Whether the face is an outline (scalable) font. */
int diptych_ft_face_is_scalable(diptych_ft_face face);
/* Faces in the font file a face was opened from (face->num_faces). */
long diptych_ft_face_count(diptych_ft_face face);

#endif
