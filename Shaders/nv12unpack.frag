#version 300 es
// The packed NV12 target (see nv12.frag) → RGB: canvas pixel (x, y) reads its
// Y byte and its UV pair from the packed texels, nearest (no filtering).
// Used by the direct-copy path: as the picture beneath draws rendered over
// directly copied planes, and to make the preview from the final NV12 frame.
#ifdef GL_FRAGMENT_PRECISION_HIGH
precision highp float;
precision highp int;
#else
precision mediump float;
precision mediump int;
#endif

uniform sampler2D u_src;    // the output's packed NV12 target
uniform int u_height;       // canvas height (Y rows)
uniform mat3 u_yuvToRgb;    // applied to (yuv - u_yuvOffset)
uniform vec3 u_yuvOffset;
out vec4 o_color;

void main() {
    ivec2 p = ivec2(gl_FragCoord.xy);
    vec4 yq = texelFetch(u_src, ivec2(p.x >> 2, p.y), 0);
    int lane = p.x & 3;
    float y = lane == 0 ? yq.r : lane == 1 ? yq.g : lane == 2 ? yq.b : yq.a;
    vec4 uvq = texelFetch(u_src, ivec2(p.x >> 2, u_height + (p.y >> 1)), 0);
    vec2 uv = (p.x & 2) == 0 ? uvq.rg : uvq.ba;
    vec3 rgb = clamp(u_yuvToRgb * (vec3(y, uv) - u_yuvOffset), 0.0, 1.0);
    o_color = vec4(rgb, 1.0);
}
