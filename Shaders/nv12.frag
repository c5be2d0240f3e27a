#version 300 es
// RGBA render target → NV12 packed four bytes per texel into one RGBA8 target
// of ceil(W/4) x (H + H/2): rows 0..H-1 hold Y, rows H.. hold interleaved UV.
// A single glReadPixels of that target is an NV12 frame with stride 4*ceil(W/4).
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
    int x0 = p.x * 4;
    if (p.y < u_size.y) {
        o_color = vec4(dot(u_yCoef, px(x0, p.y)), dot(u_yCoef, px(x0 + 1, p.y)),
                       dot(u_yCoef, px(x0 + 2, p.y)), dot(u_yCoef, px(x0 + 3, p.y))) + u_offset.x;
    } else {
        int r = (p.y - u_size.y) * 2;
        vec3 a = 0.25 * (px(x0, r) + px(x0 + 1, r) + px(x0, r + 1) + px(x0 + 1, r + 1));
        vec3 b = 0.25 * (px(x0 + 2, r) + px(x0 + 3, r) + px(x0 + 2, r + 1) + px(x0 + 3, r + 1));
        o_color = vec4(dot(u_uCoef, a) + u_offset.y, dot(u_vCoef, a) + u_offset.z,
                       dot(u_uCoef, b) + u_offset.y, dot(u_vCoef, b) + u_offset.z);
    }
}
