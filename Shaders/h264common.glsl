// Shared by the H.264 encoder's passes (h264*.comp; docs/ARCHITECTURE.md,
// "The GPU encoder"): pixel access to packed NV12 buffers, the 4×4 integer
// transforms, quantisation and the per-macroblock record layout. Every
// function here is exact integer arithmetic: the reconstruction it produces
// is what a decoder of the bitstream computes (ITU-T H.264 8.3-8.5).
precision highp float;
precision highp int;

uniform ivec4 u_size;    // width, height, MBs across, MBs down
// Macroblock rows a slice. A picture's slices are whole rows, u_sliceRows
// each (the last one what is left); nothing is predicted across a slice's
// top edge, nor filtered there (disable_deblocking_filter_idc 2).
uniform int u_sliceRows;

// Whether macroblock row y has the row above it in its slice.
bool rowAbove(int y) { return y % u_sliceRows != 0; }
int sliceCount() { return (u_size.w + u_sliceRows - 1) / u_sliceRows; }
// The bit buffer's slots, slice after slice: the slice's header, its
// macroblocks, its tail (the last skip run and the stop bit).
int mbSlot(int mb) { return mb + 1 + 2 * ((mb / u_size.z) / u_sliceRows); }
int headerSlot(int slice) { return slice * (u_sliceRows * u_size.z + 2); }
int tailSlot(int slice) { return min(u_size.z * u_size.w, (slice + 1) * u_sliceRows * u_size.z) + 2 * slice + 1; }
int slotCount() { return u_size.z * u_size.w + 2 * sliceCount(); }
// A row's progress count: a picture's 16-bit tag over the macroblocks done
// (`n`), so an earlier picture's count is never taken for this one's; and
// whether count `seen` shows picture `tag` and at least `n` macroblocks.
uint countWord(uint tag, int n) { return (tag << 16) | uint(n); }
bool countReached(uint seen, uint tag, int n) { return (seen >> 16) == tag && seen >= countWord(tag, n); }

// One macroblock's record in the MB buffer, in uints.
#define MB_INFO 0        // bits 0-1 kind (0 P_L0_16x16, 1 I_16x16, 2 I_NxN), bit 2 skipped, 4-5 luma mode, 6-7 chroma mode, 8-13 cbp
#define MB_MV 1          // motion vector in quarter samples, x low 16 bits, y high 16 bits (P pictures, from the refinement to the choice: a copy of MB_REFINEMV)
#define MB_MVP 2         // its predictor (8.4.1.3)
#define MB_SKIPRUN 3     // skipped macroblocks just before this one
#define MB_SEARCHMV 3    // until the finish pass: the motion search's vector (quarter samples, as MB_MV)
#define MB_NNZ 4         // 24 bytes: total_coeff of luma blocks 0-15 (luma4x4BlkIdx order), Cb 0-3, Cr 0-3
#define MB_REFINEMV 12   // P pictures, until the choice pass: the refined search vector, then the sub-sample pass's
#define MB_CHOSENMV 13   // and the choice's vector of each round but the last (13, 14), which the next reads around it
#define MB_SEARCHSAD 15  // P pictures, until the choice pass: the SAD of the search's vector, bit 16 set where the search stopped by itself
                         // (neither its diamond nor its diagonal round found better); after the refinement, the SAD of its vector
#define MB_PROBEMV 12    // P pictures, from the macroblock pass to the raster-order pass: the P_Skip vector the neighbours' choices give
#define MB_PROBE 13      // and the P_Skip probe there (packProbe)
#define MB_PROBEMV2 14   // P pictures, from the first probe round (h264deblock.comp, PROBE_ROUND) to the raster-order pass: its P_Skip vector
#define MB_PROBE2 15     // and the probe there
#define MB_PROBEMV3 10   // the same of the second round
#define MB_PROBE3 11
#define MB_BS 12         // P pictures, from the raster-order pass's decision to its filter: the edge strengths, 4 bits each, 8 a word (4 words)
#define MB_LUMA 16       // 16 blocks × 16 int16 in zig-zag order (I_16x16: AC at 1-15)
#define MB_LUMADC 144    // I_16x16 DC: 16 int16, zig-zag order; I_NxN: the 16 Intra_4x4 modes, 4 bits each, in 2 words
#define MB_CHROMADC 152  // Cb then Cr: 4 int16 each
#define MB_CHROMAAC 156  // Cb 0-3, Cr 0-3: 16 int16 each (AC at 1-15)
#define MB_WORDS 220

// The reference's sub-sample planes (h264interp.comp): four luma planes, each
// padded by this many samples on every side (a row of the macroblocks'
// width plus twice this many bytes).
#define PLANE_PAD 4

#define KIND_P16 0u
#define KIND_I16 1u
#define KIND_I4 2u

// The tables below are worked out or unpacked from constants, not kept as
// constant arrays: an array indexed by a variable is copied into every
// invocation's local memory on NVIDIA, each invocation writing every entry
// before its first instruction of work.

// luma4x4BlkIdx → (x, y) in 4×4 blocks (6.4.3).
int blkX(int b) { return ((b >> 1) & 2) | (b & 1); }
int blkY(int b) { return ((b >> 2) & 2) | ((b >> 1) & 1); }
// Zig-zag scan: scan position → raster index in the 4×4 block (0, 1, 4, 8, 5, 2, 3, 6, 9, 12, 13, 10, 7, 11, 14, 15).
int zigzag(int i) { return int(((i < 8 ? 0x63258410u : 0xfeb7adc9u) >> uint(4 * (i & 7))) & 15u); }

// Quantisation multipliers (x264's quant_mf for flat matrices) and the
// standard's LevelScale4x4 normAdjust values, by qP % 6, for the three
// position classes.
ivec3 mfRow(int r) {
    return r == 0 ? ivec3(13107, 5243, 8066) : r == 1 ? ivec3(11916, 4660, 7490) : r == 2 ? ivec3(10082, 4194, 6554)
         : r == 3 ? ivec3(9362, 3647, 5825) : r == 4 ? ivec3(8192, 3355, 5243) : ivec3(7282, 2893, 4559);
}
ivec3 vRow(int r) {
    return r == 0 ? ivec3(10, 16, 13) : r == 1 ? ivec3(11, 18, 14) : r == 2 ? ivec3(13, 20, 16)
         : r == 3 ? ivec3(14, 23, 18) : r == 4 ? ivec3(16, 25, 20) : ivec3(18, 29, 23);
}
// Chroma qP from the luma one (Table 8-15): for qPI 30-51, 29 plus a nibble of these
// (29, 30, 31, 32, 32, 33, 34, 34, 35, 35, 36, 36, 37, 37, 37, 38, 38, 38, 39, 39, 39, 39).
int chromaQP(int qp) {
    if (qp < 30) return qp;
    int i = qp - 30;
    uint w = i < 8 ? 0x55433210u : (i < 16 ? 0x98887766u : 0x00aaaa99u);
    return 29 + int((w >> uint(4 * (i & 7))) & 15u);
}

// Position class of raster index i: 0 for (even, even), 1 for (odd, odd), 2 otherwise.
int posClass(int i) {
    int x = i & 3, y = i >> 2;
    if (((x | y) & 1) == 0) return 0;
    if ((x & 1) == 1 && (y & 1) == 1) return 1;
    return 2;
}

uint readByte(uint word, int i) { return (word >> uint(8 * i)) & 255u; }

// x264's decimation score of a 4×4 block's levels (raster order): 9 if any
// exceeds 1, else the sum over its ±1s (zig-zag order, chroma AC from 1) of
// a weight that falls with the zeros just before each (3 after none, 2
// after one or two, 1 after three to five). Constant bounds on purpose, so
// the loop unrolls and the levels stay in registers: indexed by a
// variable, they spilled and made the macroblock pass 50 % slower on the
// H200.
int decimationScore(int l[16], bool luma) {
    int score = 0, run = 0;
    bool big = false;
    for (int zi = 0; zi < 16; zi++) {
        int v = l[zigzag(zi)];
        if (zi == 0 && !luma) continue;
        if (v == 0) { run++; continue; }
        if (abs(v) > 1) big = true;
        score += run == 0 ? 3 : (run < 3 ? 2 : (run < 6 ? 1 : 0));
        run = 0;
    }
    return big ? 9 : score;
}

// The forward core transform of one row or column of four.
ivec4 forward4(ivec4 d) {
    int s03 = d.x + d.w, d03 = d.x - d.w, s12 = d.y + d.z, d12 = d.y - d.z;
    return ivec4(s03 + s12, 2 * d03 + d12, s03 - s12, d03 - 2 * d12);
}

// Forward core transform of a 4×4 residual (raster order, in place): rows, then columns.
void forward4x4(inout int d[16]) {
    int t[16];
    for (int i = 0; i < 4; i++) {
        ivec4 r = forward4(ivec4(d[i * 4], d[i * 4 + 1], d[i * 4 + 2], d[i * 4 + 3]));
        for (int k = 0; k < 4; k++) t[i * 4 + k] = r[k];
    }
    for (int i = 0; i < 4; i++) {
        ivec4 c = forward4(ivec4(t[i], t[4 + i], t[8 + i], t[12 + i]));
        for (int k = 0; k < 4; k++) d[4 * k + i] = c[k];
    }
}

// Inverse transform of scaled coefficients (8.5.12.2), result (x + 32) >> 6.
void inverse4x4(inout int d[16]) {
    int t[16];
    for (int i = 0; i < 4; i++) {
        int e0 = d[i * 4] + d[i * 4 + 2], e1 = d[i * 4] - d[i * 4 + 2];
        int e2 = (d[i * 4 + 1] >> 1) - d[i * 4 + 3], e3 = d[i * 4 + 1] + (d[i * 4 + 3] >> 1);
        t[i * 4] = e0 + e3; t[i * 4 + 1] = e1 + e2; t[i * 4 + 2] = e1 - e2; t[i * 4 + 3] = e0 - e3;
    }
    for (int i = 0; i < 4; i++) {
        int e0 = t[i] + t[8 + i], e1 = t[i] - t[8 + i];
        int e2 = (t[4 + i] >> 1) - t[12 + i], e3 = t[4 + i] + (t[12 + i] >> 1);
        d[i] = (e0 + e3 + 32) >> 6; d[4 + i] = (e1 + e2 + 32) >> 6;
        d[8 + i] = (e1 - e2 + 32) >> 6; d[12 + i] = (e0 - e3 + 32) >> 6;
    }
}

// Levels are kept within what Baseline CAVLC codes without escapes past level_prefix 15.
int clampLevel(int l) { return clamp(l, -2047, 2047); }

// The quantiser of one QP, worked out once for a block: multipliers and
// normAdjust values by position class, shift and rounding.
struct Quantiser { ivec3 mf; ivec3 v; int qbits; int f; int shift; };

Quantiser quantiser(int qp, int deadzone) {
    int q6 = qp / 6, r6 = qp - 6 * q6;
    Quantiser q;
    q.mf = mfRow(r6);
    q.v = vRow(r6);
    q.qbits = 15 + q6;
    q.f = ((1 << q.qbits) / 6) * deadzone;
    q.shift = q6;
    return q;
}

int quantWith(Quantiser q, int c, int i) {
    int k = posClass(i);
    int a = (abs(c) * q.mf[k] + q.f) >> q.qbits;
    return clampLevel(c < 0 ? -a : a);
}

int dequantWith(Quantiser q, int l, int i) { return (l * q.v[posClass(i)]) << q.shift; }

// The 4×4 Hadamard of Intra_16x16 DC values (raster order, in place), unscaled.
void hadamard4x4(inout int d[16]) {
    int t[16];
    for (int i = 0; i < 4; i++) {
        int a = d[i * 4], b = d[i * 4 + 1], c = d[i * 4 + 2], e = d[i * 4 + 3];
        t[i * 4] = a + b + c + e; t[i * 4 + 1] = a + b - c - e;
        t[i * 4 + 2] = a - b - c + e; t[i * 4 + 3] = a - b + c - e;
    }
    for (int i = 0; i < 4; i++) {
        int a = t[i], b = t[4 + i], c = t[8 + i], e = t[12 + i];
        d[i] = a + b + c + e; d[4 + i] = a + b - c - e;
        d[8 + i] = a - b - c + e; d[12 + i] = a - b + c - e;
    }
}

// Intra_16x16 DC: forward Hadamard (halved, rounded), quantised levels in raster order.
void quantLumaDC(inout int d[16], int qp) {
    hadamard4x4(d);
    int qbits = 16 + qp / 6, mf = mfRow(qp % 6).x;
    int f = ((1 << qbits) / 3);
    for (int i = 0; i < 16; i++) {
        int c = (d[i] + (d[i] < 0 ? -1 : 1)) / 2;   // (H W H) / 2, rounded away from zero
        int a = (abs(c) * mf + f) >> qbits;
        d[i] = clampLevel(c < 0 ? -a : a);
    }
}

// Intra_16x16 DC levels (raster order) → the DC of each 4×4 block (8.5.10).
void dequantLumaDC(inout int d[16], int qp) {
    hadamard4x4(d);
    int scale = 16 * vRow(qp % 6).x;
    for (int i = 0; i < 16; i++) {
        if (qp >= 36) d[i] = (d[i] * scale) << (qp / 6 - 6);
        else d[i] = (d[i] * scale + (1 << (5 - qp / 6))) >> (6 - qp / 6);
    }
}

// Chroma DC (2×2): forward Hadamard and quantisation; `intra` chooses the rounding.
void quantChromaDC(inout int d[4], int qp, bool intra) {
    int a = d[0], b = d[1], c = d[2], e = d[3];
    d[0] = a + b + c + e; d[1] = a - b + c - e; d[2] = a + b - c - e; d[3] = a - b - c + e;
    int qbits = 16 + qp / 6, mf = mfRow(qp % 6).x;
    int f = intra ? (1 << qbits) / 3 : (1 << qbits) / 6;
    for (int i = 0; i < 4; i++) {
        int q = (abs(d[i]) * mf + f) >> qbits;
        d[i] = clampLevel(d[i] < 0 ? -q : q);
    }
}

// Whether a P macroblock's residual quantises to nothing once decimated as
// the macroblock pass decimates (an 8×8 quadrant scoring under 4, all luma
// under 6, a chroma component's AC under 7): `score`, the decimation scores
// of luma blocks 0-15 then chroma blocks (Cb 0-3, Cr 0-3); `chromaDC`, the
// chroma blocks' DC coefficients before quantisation. (x264's P_Skip probe.)
// Luma's part and chroma's part apart: a probe that finds luma left needs no chroma.
bool lumaVanishes(int score[24]) {
    int total = 0;
    bool quadrants = true;
    for (int k = 0; k < 4; k++) {
        int qs = score[4 * k] + score[4 * k + 1] + score[4 * k + 2] + score[4 * k + 3];
        total += qs;
        quadrants = quadrants && qs < 4;
    }
    return total < 6 || quadrants;
}
bool chromaVanishes(int score[24], int chromaDC[8], int qpc) {
    for (int c = 0; c < 2; c++) {
        int dc[4];
        for (int i = 0; i < 4; i++) dc[i] = chromaDC[c * 4 + i];
        quantChromaDC(dc, qpc, false);
        if (dc[0] != 0 || dc[1] != 0 || dc[2] != 0 || dc[3] != 0
            || score[16 + c * 4] + score[17 + c * 4] + score[18 + c * 4] + score[19 + c * 4] >= 7) return false;
    }
    return true;
}
bool residualVanishes(int score[24], int chromaDC[8], int qpc) { return lumaVanishes(score) && chromaVanishes(score, chromaDC, qpc); }

// Chroma DC levels (c0 c1 / c2 c3) → the DC of each chroma 4×4 block (8.5.11.2).
void dequantChromaDC(inout int d[4], int qp) {
    int a = d[0], b = d[1], c = d[2], e = d[3];
    int f0 = a + b + c + e, f1 = a - b + c - e, f2 = a + b - c - e, f3 = a - b - c + e;
    int scale = 16 * vRow(qp % 6).x;
    d[0] = ((f0 * scale) << (qp / 6)) >> 5; d[1] = ((f1 * scale) << (qp / 6)) >> 5;
    d[2] = ((f2 * scale) << (qp / 6)) >> 5; d[3] = ((f3 * scale) << (qp / 6)) >> 5;
}

uint packInfo(uint kind, bool skipped, int lumaMode, int chromaMode, int cbp) {
    return kind | (skipped ? 4u : 0u) | (uint(lumaMode) << 4) | (uint(chromaMode) << 6) | (uint(cbp) << 8);
}
uint infoKind(uint info) { return info & 3u; }
bool infoSkipped(uint info) { return (info & 4u) != 0u; }
int infoLumaMode(uint info) { return int((info >> 4) & 3u); }
int infoChromaMode(uint info) { return int((info >> 6) & 3u); }
int infoCBP(uint info) { return int((info >> 8) & 63u); }

uint packMV(ivec2 mv) { return (uint(mv.x) & 0xffffu) | (uint(mv.y) << 16); }
ivec2 unpackMV(uint w) { return ivec2(bitfieldExtract(int(w), 0, 16), bitfieldExtract(int(w), 16, 16)); }

// The P_Skip probe's word (MB_PROBE): whether the residual at the vector
// quantises to nothing (PROBE_EMPTY), not (PROBE_FULL) or was not worked out
// (PROBE_UNKNOWN), in bits 30-31; its luma SAD less the reconstruction's, offset by 2^29, below.
#define PROBE_FULL 0u
#define PROBE_EMPTY 1u
#define PROBE_UNKNOWN 2u
uint packProbe(uint state, int margin) { return (state << 30) | uint(margin + (1 << 29)); }
uint probeState(uint w) { return w >> 30; }
int probeMargin(uint w) { return int(w & 0x3fffffffu) - (1 << 29); }
