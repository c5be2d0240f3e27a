#version 310 es
// The whole composite of one output frame and its NV12 conversion in one
// compute pass. Each invocation shades a 4×2 block of canvas pixels: the
// background, then every draw of the plan in order (the same sampling, mask
// and premultiplied blending as composite.frag, each blend rounded to 8 bits
// as the fragment path's RGBA8 target rounds it), and writes the block's two
// Y words and its interleaved UV word (U V U V of the 2×2 averages, as
// nv12.frag) into the output's NV12 storage buffer: GLES has no r8/rg8 image
// format, so four bytes go into each uint. Variants (#define prelude):
// WRITE_NV12 (the storage buffer), WRITE_RGBA (the RGBA render target, for
// preview and export), either or both; DRAW_LIST, the kind of each draw;
// PICTURES_IN_PLACE where a draw's NV12, I420, RGBA or BGRA picture is read from a buffer.
precision highp float;
precision highp int;
precision highp sampler2D;

layout(local_size_x = 16, local_size_y = 8) in;

#define MAX_DRAWS 16

// std140, every member a vec4 (the Swift side writes 12 vec4 per draw).
struct Draw {
    vec4 dest;         // x, y, width, height (canvas pixels)
    vec4 texST;        // texture coordinate from local (s, t): column s (xy), column t (zw)
    vec4 texOrigin;    // texture coordinate of local (0, 0) (xy)
    vec4 style;        // opacity, corner radius, border width (canvas pixels)
    vec4 borderColor;  // straight alpha
    vec4 yuvToRgb0;    // columns of the YUV → RGB matrix, applied to (yuv - yuvOffset)
    vec4 yuvToRgb1;
    vec4 yuvToRgb2;
    vec4 yuvOffset;
    ivec4 mode;        // source, input, nearest, masked (as the program's DRAW_LIST has them)
    ivec4 picture;     // a picture read in place (input 3, 4): width, height, first plane's row bytes, UV (I420: U) plane's byte offset
    ivec4 picture2;    // UV (I420: U and V) row bytes, filtered (1: linear, 0: nearest), BGRA (1: red and blue swapped), I420's V plane's byte offset (0: NV12)
};

// One block per frame, an array indexed by draw: every draw keeps its own parameters.
layout(std140, binding = 0) uniform Frame {
    vec4 background;   // premultiplied
    vec4 yCoef;        // Y = dot(yCoef, rgb) + offsets.x
    vec4 uCoef;
    vec4 vCoef;
    vec4 offsets;
    ivec4 canvas;      // width, height, uint words per NV12 row, draw count
    Draw draws[MAX_DRAWS];
};

layout(binding = 0) uniform sampler2D u_s0p0;
layout(binding = 1) uniform sampler2D u_s0p1;
layout(binding = 2) uniform sampler2D u_s0p2;
layout(binding = 3) uniform sampler2D u_s1p0;
layout(binding = 4) uniform sampler2D u_s1p1;
layout(binding = 5) uniform sampler2D u_s1p2;
// Overlay pictures (premultiplied RGBA), sources 2...9: the frame's overlays in order.
layout(binding = 6) uniform sampler2D u_ov0;
layout(binding = 7) uniform sampler2D u_ov1;
layout(binding = 8) uniform sampler2D u_ov2;
layout(binding = 9) uniform sampler2D u_ov3;
layout(binding = 10) uniform sampler2D u_ov4;
layout(binding = 11) uniform sampler2D u_ov5;
layout(binding = 12) uniform sampler2D u_ov6;
layout(binding = 13) uniform sampler2D u_ov7;

#ifdef WRITE_NV12
layout(std430, binding = 0) writeonly buffer NV12 { uint nv12[]; };
#endif

#ifdef WRITE_RGBA
layout(rgba8, binding = 0) writeonly uniform highp image2D u_rgba;
#endif

// `nearest`: a 1:1 draw of a source whose other draws filter (the texture is
// set to linear), fetched texel by texel; otherwise the texture's own filter.
vec4 tap(sampler2D s, vec2 tc, bool nearest) {
    if (nearest) {
        ivec2 size = textureSize(s, 0);
        return texelFetch(s, clamp(ivec2(floor(tc * vec2(size))), ivec2(0), size - ivec2(1)), 0);
    }
    return textureLod(s, tc, 0.0);
}

vec3 toRGB(int i, vec3 yuv) {
    mat3 m = mat3(draws[i].yuvToRgb0.xyz, draws[i].yuvToRgb1.xyz, draws[i].yuvToRgb2.xyz);
    return clamp(m * (yuv - draws[i].yuvOffset.xyz), 0.0, 1.0);
}

#ifdef PICTURES_IN_PLACE
// NV12 and I420 pictures read where they were staged (a storage buffer per
// source, Y plane at byte 0), sampled here as the textures would be: clamp
// to edge, nearest or bilinear at texel centres.
layout(std430, binding = 1) readonly buffer Picture0 { uint bytes0[]; };
layout(std430, binding = 2) readonly buffer Picture1 { uint bytes1[]; };
float byte0(int o) { return float((bytes0[o >> 2] >> uint(8 * (o & 3))) & 255u); }
float byte1(int o) { return float((bytes1[o >> 2] >> uint(8 * (o & 3))) & 255u); }
// Texel t of a plane at byte `base`, `rowBytes` a row, `pair`: two bytes a texel (UV).
vec2 texel(int src, int base, int rowBytes, bool pair, ivec2 t) {
    int o = base + t.y * rowBytes + (pair ? 2 * t.x : t.x);
    if (src == 0) return vec2(byte0(o), pair ? byte0(o + 1) : 0.0) / 255.0;
    return vec2(byte1(o), pair ? byte1(o + 1) : 0.0) / 255.0;
}
vec2 planeTap(int src, int base, int rowBytes, bool pair, ivec2 size, vec2 tc, bool linear) {
    if (!linear) return texel(src, base, rowBytes, pair, clamp(ivec2(floor(tc * vec2(size))), ivec2(0), size - ivec2(1)));
    vec2 u = tc * vec2(size) - 0.5;
    vec2 f0 = floor(u), f = u - f0;
    ivec2 a = clamp(ivec2(f0), ivec2(0), size - ivec2(1)), b = clamp(ivec2(f0) + ivec2(1), ivec2(0), size - ivec2(1));
    vec2 t00 = texel(src, base, rowBytes, pair, a), t10 = texel(src, base, rowBytes, pair, ivec2(b.x, a.y));
    vec2 t01 = texel(src, base, rowBytes, pair, ivec2(a.x, b.y)), t11 = texel(src, base, rowBytes, pair, b);
    return mix(mix(t00, t10, f.x), mix(t01, t11, f.x), f.y);
}
vec3 inPlace(int i, int src, bool nearest, vec2 tc) {
    ivec4 g = draws[i].picture;
    ivec4 h = draws[i].picture2;
    bool linear = h.y != 0 && !nearest;
    ivec2 size = g.xy, half_size = (g.xy + ivec2(1)) / 2;
    float y = planeTap(src, 0, g.z, false, size, tc, linear).x;
    vec2 uv = h.w != 0 ? vec2(planeTap(src, g.w, h.x, false, half_size, tc, linear).x, planeTap(src, h.w, h.x, false, half_size, tc, linear).x)
                       : planeTap(src, g.w, h.x, true, half_size, tc, linear);
    return toRGB(i, vec3(y, uv));
}
// RGBA or BGRA texels (one uint each, rows word aligned), sampled the same way.
vec3 rgbaTexel(int src, int rowWords, ivec2 t) {
    int w = t.y * rowWords + t.x;
    return unpackUnorm4x8(src == 0 ? bytes0[w] : bytes1[w]).rgb;
}
vec3 inPlaceRGBA(int i, int src, bool nearest, vec2 tc) {
    ivec4 g = draws[i].picture;
    ivec4 h = draws[i].picture2;
    ivec2 size = g.xy;
    int rowWords = g.z >> 2;
    vec3 c;
    if (h.y == 0 || nearest) {
        c = rgbaTexel(src, rowWords, clamp(ivec2(floor(tc * vec2(size))), ivec2(0), size - ivec2(1)));
    } else {
        vec2 u = tc * vec2(size) - 0.5;
        vec2 f0 = floor(u), f = u - f0;
        ivec2 a = clamp(ivec2(f0), ivec2(0), size - ivec2(1)), b = clamp(ivec2(f0) + ivec2(1), ivec2(0), size - ivec2(1));
        vec3 t00 = rgbaTexel(src, rowWords, a), t10 = rgbaTexel(src, rowWords, ivec2(b.x, a.y));
        vec3 t01 = rgbaTexel(src, rowWords, ivec2(a.x, b.y)), t11 = rgbaTexel(src, rowWords, b);
        c = mix(mix(t00, t10, f.x), mix(t01, t11, f.x), f.y);
    }
    return h.z != 0 ? c.bgr : c;
}
#endif

// The picture of source 0 (primary) or 1 (secondary); input 0 RGB, 1 NV12, 2 I420, 3 NV12 or I420 read in place,
// 4 RGBA or BGRA read in place; input 5 is an overlay (sources 2...9, overlayPicture).
#define PICTURE_BODY(p0, p1, p2) { \
    vec4 a = tap(p0, tc, nearest); \
    if (kind == 0) return a.rgb; \
    vec4 b = tap(p1, tc, nearest); \
    if (kind == 1) return toRGB(i, vec3(a.r, b.rg)); \
    return toRGB(i, vec3(a.r, b.r, tap(p2, tc, nearest).r)); \
}
vec3 picture0(int i, int kind, bool nearest, vec2 tc) PICTURE_BODY(u_s0p0, u_s0p1, u_s0p2)
vec3 picture1(int i, int kind, bool nearest, vec2 tc) PICTURE_BODY(u_s1p0, u_s1p1, u_s1p2)

vec4 quantize(vec4 c) { return floor(clamp(c, 0.0, 1.0) * 255.0 + 0.5) / 255.0; }

// Overlay source src (2...9), premultiplied.
vec4 overlayPicture(int src, bool nearest, vec2 tc) {
    if (src == 2) return tap(u_ov0, tc, nearest);
    if (src == 3) return tap(u_ov1, tc, nearest);
    if (src == 4) return tap(u_ov2, tc, nearest);
    if (src == 5) return tap(u_ov3, tc, nearest);
    if (src == 6) return tap(u_ov4, tc, nearest);
    if (src == 7) return tap(u_ov5, tc, nearest);
    if (src == 8) return tap(u_ov6, tc, nearest);
    return tap(u_ov7, tc, nearest);
}

// Draw i over the pixel colour c at pixel centre pc: the draw's kind
// (source, input, nearest, masked) is a constant of the program variant, so
// the compiler drops every branch that does not apply.
vec4 over(vec4 c, vec2 pc, int i, int src, int kind, bool nearest, bool masked) {
    vec4 dest = draws[i].dest;
    if (pc.x < dest.x || pc.y < dest.y || pc.x >= dest.x + dest.z || pc.y >= dest.y + dest.w) return c;
    vec2 local = pc - dest.xy;
    vec2 st = local / dest.zw;
    vec2 tc = mat2(draws[i].texST.xy, draws[i].texST.zw) * st + draws[i].texOrigin.xy;
    if (kind == 5) {
        // An overlay (premultiplied RGBA): its own alpha times the opacity, as composite.frag's INPUT_OVERLAY.
        vec4 o8 = quantize(overlayPicture(src, nearest, tc) * draws[i].style.x);
        return quantize(o8 + c * (1.0 - o8.a));
    }
    #ifdef PICTURES_IN_PLACE
    vec3 color = kind == 3 ? inPlace(i, src, nearest, tc) : kind == 4 ? inPlaceRGBA(i, src, nearest, tc) : src == 0 ? picture0(i, kind, nearest, tc) : picture1(i, kind, nearest, tc);
#else
    vec3 color = src == 0 ? picture0(i, kind, nearest, tc) : picture1(i, kind, nearest, tc);
#endif
    vec4 style = draws[i].style;
    float alpha = style.x;
    if (masked) {
        // Signed distance to the rounded rectangle (negative inside), as composite.frag.
        vec2 half_size = 0.5 * dest.zw;
        float r = min(style.y, min(half_size.x, half_size.y));
        vec2 q = abs(local - half_size) - (half_size - vec2(r));
        float d = length(max(q, 0.0)) + min(max(q.x, q.y), 0.0) - r;
        float coverage = clamp(0.5 - d, 0.0, 1.0);
        if (style.z > 0.0) {
            float inner = clamp(0.5 - (d + style.z), 0.0, 1.0);
            vec4 bc = draws[i].borderColor;
            color = mix(bc.rgb, color, inner);
            alpha *= mix(bc.a, 1.0, inner);
        }
        alpha *= coverage;
    }
    // The fragment path's blender takes the shader's output as 8-bit values too.
    vec4 out8 = quantize(vec4(color * alpha, alpha));
    return quantize(out8 + c * (1.0 - out8.a));
}

// DRAW_LIST (from the prelude) is one DRAW(i, source, input, nearest, masked) per draw, in order.
#define DRAW(i, src, kind, nearest, masked) c = over(c, pc, i, src, kind, nearest != 0, masked != 0);
#ifndef DRAW_LIST
#define DRAW_LIST
#endif

// Canvas pixel p after every draw, premultiplied, rounded to 8 bits.
vec4 shade(ivec2 p) {
    vec2 pc = vec2(p) + 0.5;
    vec4 c = quantize(background);
    DRAW_LIST
    return c;
}

uint pack4(vec4 v) {
    uvec4 u = uvec4(clamp(v, 0.0, 1.0) * 255.0 + 0.5);
    return u.x | (u.y << 8) | (u.z << 16) | (u.w << 24);
}

void main() {
    ivec2 b = ivec2(gl_GlobalInvocationID.xy);
    int W = canvas.x, H = canvas.y, words = canvas.z;
    if (b.x >= words || 2 * b.y >= H) return;
    int x0 = 4 * b.x, y0 = 2 * b.y;
    // The block's pixels (a column past the canvas repeats its last column, as nv12.frag).
    vec4 p0 = shade(ivec2(x0, y0)), p1 = shade(ivec2(min(x0 + 1, W - 1), y0));
    vec4 p2 = shade(ivec2(min(x0 + 2, W - 1), y0)), p3 = shade(ivec2(min(x0 + 3, W - 1), y0));
    vec4 q0 = shade(ivec2(x0, y0 + 1)), q1 = shade(ivec2(min(x0 + 1, W - 1), y0 + 1));
    vec4 q2 = shade(ivec2(min(x0 + 2, W - 1), y0 + 1)), q3 = shade(ivec2(min(x0 + 3, W - 1), y0 + 1));
#ifdef WRITE_RGBA
    imageStore(u_rgba, ivec2(x0, y0), p0); imageStore(u_rgba, ivec2(x0, y0 + 1), q0);
    if (x0 + 1 < W) { imageStore(u_rgba, ivec2(x0 + 1, y0), p1); imageStore(u_rgba, ivec2(x0 + 1, y0 + 1), q1); }
    if (x0 + 2 < W) { imageStore(u_rgba, ivec2(x0 + 2, y0), p2); imageStore(u_rgba, ivec2(x0 + 2, y0 + 1), q2); }
    if (x0 + 3 < W) { imageStore(u_rgba, ivec2(x0 + 3, y0), p3); imageStore(u_rgba, ivec2(x0 + 3, y0 + 1), q3); }
#endif
#ifdef WRITE_NV12
    vec3 k = yCoef.rgb;
    nv12[y0 * words + b.x] = pack4(vec4(dot(k, p0.rgb), dot(k, p1.rgb), dot(k, p2.rgb), dot(k, p3.rgb)) + offsets.x);
    nv12[(y0 + 1) * words + b.x] = pack4(vec4(dot(k, q0.rgb), dot(k, q1.rgb), dot(k, q2.rgb), dot(k, q3.rgb)) + offsets.x);
    vec3 a = 0.25 * (p0.rgb + p1.rgb + q0.rgb + q1.rgb);
    vec3 c = 0.25 * (p2.rgb + p3.rgb + q2.rgb + q3.rgb);
    nv12[(H + b.y) * words + b.x] = pack4(vec4(dot(uCoef.rgb, a) + offsets.y, dot(vCoef.rgb, a) + offsets.z,
                                               dot(uCoef.rgb, c) + offsets.y, dot(vCoef.rgb, c) + offsets.z));
#endif
}
