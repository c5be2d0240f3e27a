// Shared by the H.264 encoder's passes that read the picture being encoded
// (h264mb.comp, h264deblock.comp; docs/ARCHITECTURE.md, "The GPU
// encoder"): the NV12 storage buffer the composite wrote, read clamped to
// the picture (a macroblock past its right or lower edge repeats the last
// column or row). Included after the pass's uniforms.
layout(std430, binding = 0) readonly buffer Src { uint src[]; };

int srcY(int x, int y) {
    x = min(x, u_size.x - 1); y = min(y, u_size.y - 1);
    int o = y * u_layout.x + x;
    return int(readByte(src[o >> 2], o & 3));
}
int srcC(int x, int y, int c) {
    x = min(x, u_size.x / 2 - 1); y = min(y, u_size.y / 2 - 1);
    int o = u_layout.y + y * u_layout.x + 2 * x + c;
    return int(readByte(src[o >> 2], o & 3));
}
// The four luma samples from (x, y) along the row (x a multiple of 4),
// packed in a word: the source's own word where it lies inside the picture.
uint srcYWord(int x, int y) {
    y = min(y, u_size.y - 1);
    if (x + 4 <= u_size.x && (u_layout.x & 3) == 0) return src[(y * u_layout.x + x) >> 2];
    return uint(srcY(x, y)) | uint(srcY(x + 1, y)) << 8 | uint(srcY(x + 2, y)) << 16 | uint(srcY(x + 3, y)) << 24;
}
// Four source samples of chroma component c from (x, y) along the row (x a multiple of 4): two words.
ivec4 srcC4(int x, int y, int c) {
    if (x + 4 <= u_size.x / 2 && (u_layout.x & 3) == 0 && (u_layout.y & 3) == 0) {
        y = min(y, u_size.y / 2 - 1);
        int o = (u_layout.y + y * u_layout.x + 2 * x) >> 2;
        uint w0 = src[o], w1 = src[o + 1];
        return ivec4(int(readByte(w0, c)), int(readByte(w0, 2 + c)), int(readByte(w1, c)), int(readByte(w1, 2 + c)));
    }
    return ivec4(srcC(x, y, c), srcC(x + 1, y, c), srcC(x + 2, y, c), srcC(x + 3, y, c));
}
