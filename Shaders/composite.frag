#version 300 es
// One stream's picture placed on the canvas (DrawDescription).
// Variants (#define prelude): INPUT_RGB | INPUT_NV12 | INPUT_I420 | INPUT_EXTERNAL |
// INPUT_OVERLAY (a premultiplied RGBA overlay, drawn with its own alpha), and
// MASKED for rounded corners and borders.
#ifdef GL_FRAGMENT_PRECISION_HIGH
precision highp float;
#else
precision mediump float;
#endif

uniform vec4 u_dest;            // destination x, y, width, height (canvas pixels)
uniform mat3x2 u_texFromLocal;  // local (s, t) in 0...1 → texture coordinate
uniform float u_opacity;
uniform mat3 u_yuvToRgb;        // applied to (yuv - u_yuvOffset)
uniform vec3 u_yuvOffset;
#ifdef MASKED
uniform float u_radius;         // corner radius, canvas pixels
uniform float u_border;         // border width, canvas pixels
uniform vec4 u_borderColor;     // straight alpha
#endif

#if defined(INPUT_EXTERNAL)
uniform samplerExternalOES u_tex0;
#else
uniform sampler2D u_tex0;
#endif
#if defined(INPUT_NV12) || defined(INPUT_I420)
uniform sampler2D u_tex1;
#endif
#if defined(INPUT_I420)
uniform sampler2D u_tex2;
#endif

out vec4 o_color;

vec3 picture(vec2 tc) {
#if defined(INPUT_NV12)
    vec3 yuv = vec3(texture(u_tex0, tc).r, texture(u_tex1, tc).rg);
    return clamp(u_yuvToRgb * (yuv - u_yuvOffset), 0.0, 1.0);
#elif defined(INPUT_I420)
    vec3 yuv = vec3(texture(u_tex0, tc).r, texture(u_tex1, tc).r, texture(u_tex2, tc).r);
    return clamp(u_yuvToRgb * (yuv - u_yuvOffset), 0.0, 1.0);
#else
    return texture(u_tex0, tc).rgb;
#endif
}

void main() {
    vec2 local = gl_FragCoord.xy - u_dest.xy;          // pixels from the destination's top-left
    vec2 st = local / u_dest.zw;
    vec2 tc = u_texFromLocal * vec3(st, 1.0);
#if defined(INPUT_OVERLAY)
    // Premultiplied already: its own alpha times the draw's opacity (overlays have no mask).
    o_color = texture(u_tex0, tc) * u_opacity;
    return;
#endif
    vec3 color = picture(tc);
    float alpha = u_opacity;
#ifdef MASKED
    // Signed distance to the rounded rectangle (negative inside).
    vec2 half_size = 0.5 * u_dest.zw;
    float r = min(u_radius, min(half_size.x, half_size.y));
    vec2 q = abs(local - half_size) - (half_size - vec2(r));
    float d = length(max(q, 0.0)) + min(max(q.x, q.y), 0.0) - r;
    float coverage = clamp(0.5 - d, 0.0, 1.0);
    if (u_border > 0.0) {
        float inner = clamp(0.5 - (d + u_border), 0.0, 1.0);   // 1 well inside the border
        vec4 b = u_borderColor;
        // Border over picture; picture shows where inner = 1.
        color = mix(b.rgb, color, inner);
        alpha *= mix(b.a, 1.0, inner);
    }
    alpha *= coverage;
#endif
    o_color = vec4(color * alpha, alpha);   // premultiplied; blend ONE, ONE_MINUS_SRC_ALPHA
}
