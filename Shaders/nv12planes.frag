#version 300 es
// RGBA render target → one plane of an NV12 encoder target (a dma-buf the
// VA-API encoder reads): Y into an R8 target of W x H, one pixel per
// fragment; with CHROMA, interleaved UV into a GR88 target of W/2 x H/2 (U in
// red, V in green: U is the lower byte, as NV12 stores it). The arithmetic is
// nv12.frag's, so both give the same bytes.
#ifdef GL_FRAGMENT_PRECISION_HIGH
precision highp float;
precision highp int;
#else
precision mediump float;
precision mediump int;
#endif

uniform sampler2D u_src;   // the output's RGBA render target
uniform ivec2 u_size;      // canvas width, height
uniform vec3 u_yCoef;      // Y = dot(u_yCoef, rgb) + u_offset.x
uniform vec3 u_uCoef;
uniform vec3 u_vCoef;
uniform vec3 u_offset;
out vec4 o_color;

vec3 px(int x, int y) {
    return texelFetch(u_src, ivec2(min(x, u_size.x - 1), y), 0).rgb;
}

void main() {
    ivec2 p = ivec2(gl_FragCoord.xy);
#ifdef CHROMA
    int x = p.x * 2, r = p.y * 2;
    vec3 a = 0.25 * (px(x, r) + px(x + 1, r) + px(x, r + 1) + px(x + 1, r + 1));
    o_color = vec4(dot(u_uCoef, a) + u_offset.y, dot(u_vCoef, a) + u_offset.z, 0.0, 1.0);
#else
    o_color = vec4(dot(u_yCoef, px(p.x, p.y)) + u_offset.x, 0.0, 0.0, 1.0);
#endif
}
