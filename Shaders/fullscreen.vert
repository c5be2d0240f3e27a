#version 300 es
// Full-screen triangle; no vertex buffers.
precision highp float;
out vec2 v_canvas;
void main() {
    vec2 p = vec2(float((gl_VertexID << 1) & 2), float(gl_VertexID & 2));
    v_canvas = p;
    gl_Position = vec4(p * 2.0 - 1.0, 0.0, 1.0);
}
