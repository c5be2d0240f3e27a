#version 300 es
// One draw of a composite: a quad covering the destination rectangle.
// Canvas pixel (x, y), origin top-left, lands on framebuffer (x, y): canvas
// row 0 is framebuffer row 0, so glReadPixels returns rows top-down.
precision highp float;
uniform vec4 u_dest;    // destination x, y, width, height in canvas pixels
uniform vec2 u_canvas;  // canvas width, height
void main() {
    vec2 corner = vec2(float(gl_VertexID & 1), float((gl_VertexID >> 1) & 1));
    vec2 px = u_dest.xy + corner * u_dest.zw;
    gl_Position = vec4(px / u_canvas * 2.0 - 1.0, 0.0, 1.0);
}
