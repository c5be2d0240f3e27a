/* Checked against the real headers: every declaration of CFreeType.h that
 * stands for FreeType's or HarfBuzz's must match it, or this file does not
 * compile. The accessors read struct fields; nothing here calls either
 * library, so nothing links it. */
#include <ft2build.h>
#include FT_FREETYPE_H
#include FT_GLYPH_H
#include FT_STROKER_H
#include <hb.h>
#include <hb-ft.h>
#include <stddef.h>
#include "CFreeType.h"

#define SAME_TYPE(mine, fn) _Static_assert(__builtin_types_compatible_p(mine, __typeof__(&fn)), #fn " differs from CFreeType.h")
SAME_TYPE(diptych_ft_init_fn, FT_Init_FreeType);
SAME_TYPE(diptych_ft_done_library_fn, FT_Done_FreeType);
SAME_TYPE(diptych_ft_new_memory_face_fn, FT_New_Memory_Face);
SAME_TYPE(diptych_ft_done_face_fn, FT_Done_Face);
SAME_TYPE(diptych_ft_set_pixel_sizes_fn, FT_Set_Pixel_Sizes);
SAME_TYPE(diptych_ft_load_glyph_fn, FT_Load_Glyph);
SAME_TYPE(diptych_ft_get_glyph_fn, FT_Get_Glyph);
SAME_TYPE(diptych_ft_glyph_to_bitmap_fn, FT_Glyph_To_Bitmap);
SAME_TYPE(diptych_ft_done_glyph_fn, FT_Done_Glyph);
SAME_TYPE(diptych_ft_stroker_new_fn, FT_Stroker_New);
SAME_TYPE(diptych_ft_stroker_set_fn, FT_Stroker_Set);
SAME_TYPE(diptych_ft_stroker_done_fn, FT_Stroker_Done);
SAME_TYPE(diptych_ft_glyph_stroke_fn, FT_Glyph_Stroke);
SAME_TYPE(diptych_hb_ft_font_create_referenced_fn, hb_ft_font_create_referenced);
SAME_TYPE(diptych_hb_font_destroy_fn, hb_font_destroy);
SAME_TYPE(diptych_hb_buffer_create_fn, hb_buffer_create);
SAME_TYPE(diptych_hb_buffer_destroy_fn, hb_buffer_destroy);
SAME_TYPE(diptych_hb_buffer_reset_fn, hb_buffer_reset);
SAME_TYPE(diptych_hb_buffer_add_utf8_fn, hb_buffer_add_utf8);
SAME_TYPE(diptych_hb_buffer_guess_segment_properties_fn, hb_buffer_guess_segment_properties);
SAME_TYPE(diptych_hb_shape_fn, hb_shape);

#define SAME_FIELD(mine, theirs, field) _Static_assert(offsetof(mine, field) == offsetof(theirs, field) \
    && sizeof(((mine *)0)->field) == sizeof(((theirs *)0)->field), #theirs "." #field " differs from CFreeType.h")
_Static_assert(sizeof(diptych_hb_glyph_info) == sizeof(hb_glyph_info_t), "hb_glyph_info_t differs from CFreeType.h");
SAME_FIELD(diptych_hb_glyph_info, hb_glyph_info_t, codepoint);
SAME_FIELD(diptych_hb_glyph_info, hb_glyph_info_t, cluster);
_Static_assert(sizeof(diptych_hb_glyph_position) == sizeof(hb_glyph_position_t), "hb_glyph_position_t differs from CFreeType.h");
SAME_FIELD(diptych_hb_glyph_position, hb_glyph_position_t, x_advance);
SAME_FIELD(diptych_hb_glyph_position, hb_glyph_position_t, y_advance);
SAME_FIELD(diptych_hb_glyph_position, hb_glyph_position_t, x_offset);
SAME_FIELD(diptych_hb_glyph_position, hb_glyph_position_t, y_offset);

_Static_assert(DIPTYCH_FT_LOAD_NO_BITMAP == FT_LOAD_NO_BITMAP, "FT_LOAD_NO_BITMAP");
_Static_assert(DIPTYCH_FT_RENDER_MODE_NORMAL == FT_RENDER_MODE_NORMAL, "FT_RENDER_MODE_NORMAL");
_Static_assert(DIPTYCH_FT_STROKER_LINECAP_ROUND == FT_STROKER_LINECAP_ROUND, "FT_STROKER_LINECAP_ROUND");
_Static_assert(DIPTYCH_FT_STROKER_LINEJOIN_ROUND == FT_STROKER_LINEJOIN_ROUND, "FT_STROKER_LINEJOIN_ROUND");
_Static_assert(DIPTYCH_FT_PIXEL_MODE_GRAY == FT_PIXEL_MODE_GRAY, "FT_PIXEL_MODE_GRAY");

void diptych_ft_bitmap_glyph(diptych_ft_glyph glyph, diptych_ft_bitmap *out) {
    FT_BitmapGlyph g = (FT_BitmapGlyph)glyph;
    out->left = g->left;
    out->top = g->top;
    out->rows = g->bitmap.rows;
    out->width = g->bitmap.width;
    out->pitch = g->bitmap.pitch;
    out->buffer = g->bitmap.buffer;
    out->pixel_mode = g->bitmap.pixel_mode;
}

diptych_ft_glyph_slot diptych_ft_face_glyph(diptych_ft_face face) { return face->glyph; }

void diptych_ft_face_size_metrics(diptych_ft_face face, long *ascender, long *descender, long *height) {
    *ascender = face->size->metrics.ascender;
    *descender = face->size->metrics.descender;
    *height = face->size->metrics.height;
}

int diptych_ft_face_is_scalable(diptych_ft_face face) { return FT_IS_SCALABLE(face) ? 1 : 0; }

long diptych_ft_face_count(diptych_ft_face face) { return face->num_faces; }
