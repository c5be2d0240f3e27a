#version 310 es
// H.264 encoder, the reference picture's sub-sample planes (ITU-T H.264
// 8.4.2.2.1; docs/ARCHITECTURE.md, "The GPU encoder"), made once a P
// picture so that every quarter-sample position the motion passes price or
// predict from is the rounded-up average of two bytes already worked out:
// plane 0 the whole samples G, 1 the horizontal half samples b, 2 the
// vertical half samples h, 3 the centre half samples j, each at the
// whole sample to its upper left (b at (x + ½, y), h at (x, y + ½), j at
// (x + ½, y + ½)). The taps read the reference clamped to the picture, as a
// decoder does.
//
// Each plane is padded by PLANE_PAD samples on every side: a plane sample
// farther out equals the one on the padding's edge (beyond three samples
// outside, every tap of b reads the same column, of h the same row, and j
// reduces to h or b there), so a read clamped into the padded plane is
// exact for every vector.
//
// One invocation writes one word (four samples along a row) of each plane.
layout(local_size_x = 64) in;

layout(std430, binding = 11) writeonly buffer Planes { uint planes[]; };

uniform ivec4 u_layout;  // source row bytes, source UV offset, picture row bytes, picture UV offset

#define INTERPOLATE 1
#include "h264motion.glsl"

// The six-tap filter (1, −5, 20, 20, −5, 1).
int tap6(int a, int b, int c, int d, int e, int f) { return a - 5 * b + 20 * c + 20 * d - 5 * e + f; }

void main() {
    int stride = u_size.z * 16 + 2 * PLANE_PAD, rows = u_size.w * 16 + 2 * PLANE_PAD;
    int wx = int(gl_GlobalInvocationID.x), row = int(gl_GlobalInvocationID.y);
    if (wx * 4 >= stride || row >= rows) return;
    int x0 = wx * 4 - PLANE_PAD, y = row - PLANE_PAD;
    // The reference rows y − 2 … y + 3, columns x0 − 2 … x0 + 6.
    int g[54];
    for (int r = 0; r < 6; r++)
        for (int c = 0; c < 9; c++) g[r * 9 + c] = refY(x0 - 2 + c, y - 2 + r);
    uint wf = 0u, wb = 0u, wh = 0u, wj = 0u;
    for (int k = 0; k < 4; k++) {
        // b1 of rows −2 … 3 at column x0 + k (its taps: columns k … k + 5 of g).
        int b1[6];
        for (int r = 0; r < 6; r++)
            b1[r] = tap6(g[r * 9 + k], g[r * 9 + k + 1], g[r * 9 + k + 2], g[r * 9 + k + 3], g[r * 9 + k + 4], g[r * 9 + k + 5]);
        int h1 = tap6(g[k + 2], g[9 + k + 2], g[18 + k + 2], g[27 + k + 2], g[36 + k + 2], g[45 + k + 2]);
        int j1 = tap6(b1[0], b1[1], b1[2], b1[3], b1[4], b1[5]);
        uint sh = uint(8 * k);
        wf |= uint(g[18 + k + 2]) << sh;
        wb |= uint(clamp((b1[2] + 16) >> 5, 0, 255)) << sh;
        wh |= uint(clamp((h1 + 16) >> 5, 0, 255)) << sh;
        wj |= uint(clamp((j1 + 512) >> 10, 0, 255)) << sh;
    }
    int plane = stride * rows / 4, o = (row * stride) / 4 + wx;
    planes[o] = wf;
    planes[plane + o] = wb;
    planes[2 * plane + o] = wh;
    planes[3 * plane + o] = wj;
}
