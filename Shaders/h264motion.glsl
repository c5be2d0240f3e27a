// Shared by the H.264 encoder's passes that predict from the reference
// picture (h264mb.comp's inter passes, h264deblock.comp, h264interp.comp;
// docs/ARCHITECTURE.md, "The GPU encoder"): reading it, whole samples
// clamped to the picture as a decoder reads them, and quarter samples from
// its sub-sample planes. Included after the pass's uniforms.
layout(std430, binding = 2) readonly buffer Ref { uint ref[]; };
#ifndef INTERPOLATE
layout(std430, binding = 11) readonly buffer Planes { uint planes[]; };
#endif

int refY(int x, int y) {
    x = clamp(x, 0, u_size.z * 16 - 1); y = clamp(y, 0, u_size.w * 16 - 1);
    int o = y * u_layout.z + x;
    return int(readByte(ref[o >> 2], o & 3));
}
int refC(int x, int y, int c) {
    x = clamp(x, 0, u_size.z * 8 - 1); y = clamp(y, 0, u_size.w * 8 - 1);
    int o = u_layout.w + y * u_layout.z + 2 * x + c;
    return int(readByte(ref[o >> 2], o & 3));
}

// Four samples of the reference at (x, y)..(x + 3, y) packed in a word, read
// as whole words where they lie inside the picture, else clamped one by one.
uint refWord(int x, int y) {
    y = clamp(y, 0, u_size.w * 16 - 1);
    if (x >= 0 && x + 4 <= u_size.z * 16) {
        int o = y * u_layout.z + x;
        uint sh = uint(8 * (o & 3));
        uint w0 = ref[o >> 2];
        return sh == 0u ? w0 : (w0 >> sh) | (ref[(o >> 2) + 1] << (32u - sh));
    }
    uint w = 0u;
    for (int k = 0; k < 4; k++) w |= uint(refY(x + k, y)) << uint(8 * k);
    return w;
}

// The SAD of the four samples packed in each of two words.
int sad4(uint a, uint b) {
    return abs(int(a & 255u) - int(b & 255u)) + abs(int((a >> 8) & 255u) - int((b >> 8) & 255u))
         + abs(int((a >> 16) & 255u) - int((b >> 16) & 255u)) + abs(int(a >> 24) - int(b >> 24));
}

int seBits(int v) {
    uint k = v > 0 ? uint(2 * v) : uint(-2 * v + 1);   // codeNum + 1
    return 2 * findMSB(k) + 1;
}

// The bits of a vector's difference from its predictor (quarter samples), as se(v) codes them.
int mvdBits(ivec2 d, ivec2 mvp) { return seBits(d.x - mvp.x) + seBits(d.y - mvp.y); }

// Chroma sample (x, y) predicted with vector mv (quarter luma samples,
// eighth chroma samples in 4:2:0): the bilinear average of 8.4.2.2.2.
int predChroma(int x, int y, ivec2 mv, int c) {
    int xi = x + (mv.x >> 3), yi = y + (mv.y >> 3), xf = mv.x & 7, yf = mv.y & 7;
    int a = refC(xi, yi, c), b = refC(xi + 1, yi, c), e = refC(xi, yi + 1, c), f = refC(xi + 1, yi + 1, c);
    return ((8 - xf) * (8 - yf) * a + xf * (8 - yf) * b + (8 - xf) * yf * e + xf * yf * f + 32) >> 6;
}

// Five samples of reference chroma component c from (xi, y) along the row
// (a row of predChroma's): the three words they lie in read whole where
// inside the picture, else one by one, clamped.
void refCRow5(int xi, int y, int c, out int s[5]) {
    if (xi >= 0 && xi + 5 <= u_size.z * 8 && (u_layout.z & 3) == 0 && (u_layout.w & 3) == 0) {
        y = clamp(y, 0, u_size.w * 8 - 1);
        int o = u_layout.w + y * u_layout.z + 2 * xi + c;
        int base = o >> 2, sh = o & 3;
        uint w0 = ref[base], w1 = ref[base + 1], w2 = ref[base + 2];
        for (int k = 0; k < 5; k++) {
            int b = sh + 2 * k;
            uint w = b < 4 ? w0 : (b < 8 ? w1 : w2);
            s[k] = int((w >> uint(8 * (b & 3))) & 255u);
        }
    } else {
        for (int k = 0; k < 5; k++) s[k] = refC(xi + k, y, c);
    }
}
// Four samples of chroma component c from (x, y) along the row predicted with vector mv (predChroma).
ivec4 predChroma4(int x, int y, ivec2 mv, int c) {
    int xi = x + (mv.x >> 3), yi = y + (mv.y >> 3), xf = mv.x & 7, yf = mv.y & 7;
    int r0[5], r1[5];
    refCRow5(xi, yi, c, r0);
    refCRow5(xi, yi + 1, c, r1);
    ivec4 o;
    for (int k = 0; k < 4; k++) o[k] = ((8 - xf) * (8 - yf) * r0[k] + xf * (8 - yf) * r0[k + 1] + (8 - xf) * yf * r1[k] + xf * yf * r1[k + 1] + 32) >> 6;
    return o;
}

#ifndef INTERPOLATE
// The reference's sub-sample planes (h264interp.comp): sample (x, y) of
// plane k (0 whole, 1 horizontal half, 2 vertical half, 3 centre), clamped
// into the padded plane, which is exact.
int planeStride() { return u_size.z * 16 + 2 * PLANE_PAD; }
int planeByte(int k, int x, int y) {
    x = clamp(x, -PLANE_PAD, u_size.z * 16 + PLANE_PAD - 1);
    y = clamp(y, -PLANE_PAD, u_size.w * 16 + PLANE_PAD - 1);
    return (k * (u_size.w * 16 + 2 * PLANE_PAD) + y + PLANE_PAD) * planeStride() + x + PLANE_PAD;
}

// Four samples of plane k from (x, y) along the row, packed in a word: whole
// words realigned where they lie inside the padded plane, else one by one.
uint planeWord(int k, int x, int y) {
    if (x >= -PLANE_PAD && x + 4 <= u_size.z * 16 + PLANE_PAD) {
        int o = planeByte(k, x, y);
        uint sh = uint(8 * (o & 3));
        uint w0 = planes[o >> 2];
        return sh == 0u ? w0 : (w0 >> sh) | (planes[(o >> 2) + 1] << (32u - sh));
    }
    uint w = 0u;
    for (int i = 0; i < 4; i++) {
        int o = planeByte(k, x + i, y);
        w |= readByte(planes[o >> 2], o & 3) << uint(8 * i);
    }
    return w;
}

// Sixteen samples of plane k from (x, y) along the row, in four words.
uvec4 planeRow(int k, int x, int y) {
    if (x >= -PLANE_PAD && x + 16 <= u_size.z * 16 + PLANE_PAD) {
        int o = planeByte(k, x, y);
        int i = o >> 2;
        uint sh = uint(8 * (o & 3));
        uvec4 w = uvec4(planes[i], planes[i + 1], planes[i + 2], planes[i + 3]);
        if (sh == 0u) return w;
        uint w4 = planes[i + 4];
        return (w >> sh) | (uvec4(w.y, w.z, w.w, w4) << (32u - sh));
    }
    return uvec4(planeWord(k, x, y), planeWord(k, x + 4, y), planeWord(k, x + 8, y), planeWord(k, x + 12, y));
}

// Sample (qx, qy) of the half-sample grid around a whole sample (quarter
// units, each 0, 2 or 4): its plane and its whole-sample offset.
ivec3 halfSample(int qx, int qy) { return ivec3(((qx >> 1) & 1) + 2 * ((qy >> 1) & 1), qx >> 2, qy >> 2); }

// Quarter-sample position (fx, fy) as the standard makes it (8.4.2.2.1):
// one half-grid sample, or the rounded-up average of the two nearest
// (along the odd coordinate; for both odd, the half samples b or s and h or m).
void qpelPair(int fx, int fy, out ivec3 a, out ivec3 b) {
    if ((fx & 1) == 0 && (fy & 1) == 0) { a = halfSample(fx, fy); b = a; }
    else if ((fy & 1) == 0) { a = halfSample(fx - 1, fy); b = halfSample(fx + 1, fy); }
    else if ((fx & 1) == 0) { a = halfSample(fx, fy - 1); b = halfSample(fx, fy + 1); }
    else { a = halfSample(2, fy == 1 ? 0 : 4); b = halfSample(fx == 1 ? 0 : 4, 2); }
}

// The rounded-up average of the bytes of two words, byte by byte.
uint avgUp(uint a, uint b) { return (a | b) - (((a ^ b) >> 1) & 0x7f7f7f7fu); }
uvec4 avgUp(uvec4 a, uvec4 b) { return (a | b) - (((a ^ b) >> 1) & uvec4(0x7f7f7f7fu)); }

// Four predicted luma samples from (x, y) along the row of the macroblock
// displaced by quarter-sample vector mv.
uint predWord(int x, int y, ivec2 mv) {
    ivec2 w = mv >> 2;
    int fx = mv.x & 3, fy = mv.y & 3;
    if (fx == 0 && fy == 0) return refWord(x + w.x, y + w.y);
    ivec3 a, b;
    qpelPair(fx, fy, a, b);
    uint wa = planeWord(a.x, x + w.x + a.y, y + w.y + a.z);
    return a == b ? wa : avgUp(wa, planeWord(b.x, x + w.x + b.y, y + w.y + b.z));
}
#endif
