#version 310 es
// H.264 encoder, the raster-order pass (docs/ARCHITECTURE.md, "The GPU
// encoder"): in P pictures the P_Skip decision in the standard's order
// (DECIDE), then the in-loop deblocking filter (ITU-T H.264 8.7), run on the
// picture's reconstruction once every macroblock is in it, so the next
// picture predicts from what a decoder shows; and the probe rounds before
// them (PROBE_GUESS, PROBE_ROUND).
//
// The decision (DECIDE, a work group a slice). Until here every macroblock
// chose its vector knowing only what its neighbours were about to choose;
// decided in raster order, its left, upper and upper right neighbours are
// final, so its P_Skip vector is the one a decoder derives. A P macroblock
// that is not already a P_Skip becomes one where its residual at that
// vector quantises to nothing (after decimation) and its SAD there, against
// the bits P_L0_16x16 takes beyond a skip (mb_type, the vector's
// difference, coded_block_pattern), costs no more than its own: its record
// and its reconstruction (the prediction) change before it is filtered.
// Not where its right or lower neighbour is intra: those predicted from its
// reconstruction. A decision reads only its left, upper, upper left and
// upper right neighbours' decisions, so the slice's rows decide in
// lockstep, one invocation a row: step s decides macroblock s - 2r of row
// r, the row above's at s - 1 and before (a wavefront inside one work
// group, each step's decisions handed on in shared memory, two barriers a
// step). The macroblock pass probed at the P_Skip vector the neighbours'
// choices gave (MB_PROBEMV, MB_PROBE), and two parallel probe rounds before
// this pass (below) at the vectors where a neighbour is likely to become a
// P_Skip (MB_PROBEMV2, MB_PROBEMV3); where the final vector is none of
// them, the step probes there over the work group, one macroblock after
// another. Each step also works out its macroblocks' edge strengths
// (MB_BS: record words 12-15, the probe words, which nothing reads after
// the decision), writes the reconstruction of those that became P_Skips,
// and moves each row's count of decided macroblocks (progress[mbHeight +
// row]) once they are in memory.
//
// The filter (a work group a macroblock row). The standard filters
// macroblock by macroblock in raster order, and each one reads samples its
// left and upper neighbours (and the upper right one, through the upper's
// right columns) have filtered: each row's work group walks the row left to
// right, waiting until the row above is two macroblocks ahead
// (`progress[row]`: the picture's 16-bit tag over the macroblocks done, so
// a count left by an earlier picture is never taken for this one's) and, in
// P pictures, until its macroblock is decided (the decision's count). The
// decision is its own dispatch just before the filter's, so its work groups
// started first and every wait ends; it waits on nothing. Where work groups
// of one dispatch cannot wait on each other (llvmpipe runs a dispatch's
// groups in fixed shares per thread, and ends every loop of a shader after
// 65,535 iterations in all, so a long wait ends early), the filter is a
// wavefront of dispatches instead, after the decision (u_step: −1 for the
// walk, else the step: macroblock u_step − 2y of every row y of a slice).
// A filter step: wait for the decision and the row above, read the samples
// above, filter in shared memory, write; the macroblock's own samples and
// strengths were read the step before where it was decided by then. Its
// work group is two halves of 32 invocations, each an NVIDIA warp (luma's
// lines on the first, chroma's on the second, side by side where the
// hardware runs the halves apart); a probe round's is 32.
#if defined(PROBE_ROUND) || defined(PROBE_GUESS)
layout(local_size_x = 32) in;
#elif defined(DECIDE)
layout(local_size_x = 128) in;
#else
layout(local_size_x = 64) in;
#endif
const int GROUP = int(gl_WorkGroupSize.x);

layout(std430, binding = 1) coherent buffer Recon { uint recon[]; };
layout(std430, binding = 3) coherent buffer MBs { uint mbs[]; };
layout(std430, binding = 10) coherent volatile buffer Progress { uint progress[]; };

uniform ivec4 u_layout;  // source row bytes, source UV offset, picture row bytes, picture UV offset
// The picture's one QP gives every edge the same thresholds (its macroblocks
// carry no QP change): α | β << 8 of luma and α | β << 8 of chroma, then
// tC0 for bS 1, 2, 3 a byte each, of luma and of chroma (Tables 8-16, 8-17);
// then the picture's tag (1 to 65535).
uniform ivec4 u_code;
// P picture (1) or IDR (0), its QP, lambda, whether to filter (1) or only decide P_Skip (0).
uniform ivec4 u_pic;
// The filter: −1 where one work group walks each row; d ≥ 0: wavefront step d. A probe round: the round, 1 or 2.
uniform int u_step;

#include "h264source.glsl"
#include "h264motion.glsl"
#include "h264predict.glsl"

// The picture's tag in the progress counts (1 to 65535).
uint pictureTag() { return uint(u_code.w) & 0xffffu; }

#if defined(PROBE_ROUND) || defined(DECIDE)
// A P_Skip probe's: the macroblock's own luma reconstruction (row y's word
// w at 4y + w); whether its residual at the vector quantises to nothing,
// and the step's outcome (0 none, 2 a P_Skip); the vector; the bits P
// takes beyond a skip; decimation scores (luma blocks, then chroma AC by
// component and block); chroma DC coefficients; SADs at the P_Skip vector
// and of the reconstruction.
shared uint sOwnY[64];
shared bool sVanish;
shared int sTake;
shared ivec2 sSkipMV;
shared int sExtraBits;
shared int sScore[24];
shared int sChromaDC[8];
shared uint sSadSkip, sSadNow;

// The macroblock's own luma reconstruction into sOwnY.
void loadOwnY(int t, int mbX, int mbY) {
    int rowWords = u_layout.z >> 2;
    for (int i = t; i < 64; i += GROUP) sOwnY[i] = recon[(mbY * 16 + (i >> 2)) * rowWords + mbX * 4 + (i & 3)];
}
#endif
#ifdef DECIDE
// The decision's probe (over 64 invocations): its blocks (luma 0-15,
// chroma 8), 16 values each, and its prediction (luma block t's rows at
// 4t..4t+3, chroma component c's row y at c * 64 + y * 8), which a
// macroblock that becomes a P_Skip there takes as its reconstruction.
shared int sRes[384];
shared uint sPredY[64];
shared int sPredC[128];
#endif

#ifdef PROBE_ROUND
// Chroma block u (0-7: block u & 3 of component u >> 2) of a probe round's
// P_Skip probe at mv: its decimation score (sScore[16 + u]) and DC coefficient.
void probeChroma(int u, int mbX, int mbY, ivec2 mv, int qpc) {
    int c = u >> 2, bx = (u & 1) * 4, by = ((u >> 1) & 1) * 4;
    int r[16];
    for (int i = 0; i < 16; i++) {
        int x = mbX * 8 + bx + (i & 3), y = mbY * 8 + by + (i >> 2);
        r[i] = srcC(x, y, c) - predChroma(x, y, mv, c);
    }
    forward4x4(r);
    sChromaDC[u] = r[0];
    Quantiser q = quantiser(qpc, 1);
    for (int i = 0; i < 16; i++) r[i] = i == 0 ? 0 : quantWith(q, r[i], i);
    sScore[16 + u] = decimationScore(r, false);
}
#endif


#if defined(PROBE_ROUND) || defined(DECIDE)
// The P_Skip probe at sSkipMV, the macroblock's own luma in sOwnY: sVanish,
// whether its residual there quantises to nothing, and both luma SADs
// (sSadSkip, sSadNow, zero before); sTake becomes 2 where the macroblock
// becomes a P_Skip (in the decision, where no probe before was at the
// vector), else 0. A probe round's (32 invocations) works out a block an
// invocation, chroma's only where luma's leaves the skip a chance. The
// decision's, which every later step waits on, is spread over 64: a row's
// residual and its horizontal transform (luma two rows an invocation on
// invocations 0-31, chroma a row on 32-63), then the columns' and the
// levels, then the blocks' scores; its prediction stays for the
// reconstruction (sPredY, sPredC).
void probeSkip(int t, int mbX, int mbY) {
    ivec2 mv = sSkipMV;
    int qp = u_pic.y, qpc = chromaQP(qp);
#ifdef PROBE_ROUND
    if (t < 16) {
        // Luma block t: its residual at the P_Skip vector, and both SADs.
        int bx = blkX(t) * 4, by = blkY(t) * 4;
        int r[16];
        uint sadSkip = 0u, sadNow = 0u;
        for (int y = 0; y < 4; y++) {
            uint w = predWord(mbX * 16 + bx, mbY * 16 + by + y, mv);
            uint s4 = srcYWord(mbX * 16 + bx, mbY * 16 + by + y);
            for (int x = 0; x < 4; x++) {
                int s = int(readByte(s4, x));
                r[y * 4 + x] = s - int(readByte(w, x));
                sadSkip += uint(abs(r[y * 4 + x]));
                sadNow += uint(abs(s - int(readByte(sOwnY[(by + y) * 4 + (bx >> 2)], x))));
            }
        }
        atomicAdd(sSadSkip, sadSkip);
        atomicAdd(sSadNow, sadNow);
        forward4x4(r);
        Quantiser q = quantiser(qp, 1);
        for (int i = 0; i < 16; i++) r[i] = quantWith(q, r[i], i);
        sScore[t] = decimationScore(r, true);
    }
    barrier();
    if (t == 0) sVanish = lumaVanishes(sScore);
    barrier();
    if (sVanish && t >= 16 && t < 24) probeChroma(t - 16, mbX, mbY, mv, qpc);
    barrier();
    if (t == 0) {
        // Nothing left after decimation.
        sVanish = sVanish && chromaVanishes(sScore, sChromaDC, qpc);
        sTake = sVanish ? 2 : 0;
    }
#else
    // Rows (forward4x4's first loop): luma block t >> 1's rows 2(t & 1) and
    // 2(t & 1) + 1; chroma block (t - 32) >> 2's row (t - 32) & 3.
    if (t < 32) {
        int b = t >> 1, bx = blkX(b) * 4, by = blkY(b) * 4;
        uint sadSkip = 0u, sadNow = 0u;
        for (int k = 0; k < 2; k++) {
            int y = (t & 1) * 2 + k;
            uint w = predWord(mbX * 16 + bx, mbY * 16 + by + y, mv);
            sPredY[b * 4 + y] = w;
            uint s4 = srcYWord(mbX * 16 + bx, mbY * 16 + by + y);
            ivec4 d;
            for (int x = 0; x < 4; x++) {
                int sv = int(readByte(s4, x));
                d[x] = sv - int(readByte(w, x));
                sadSkip += uint(abs(d[x]));
                sadNow += uint(abs(sv - int(readByte(sOwnY[(by + y) * 4 + (bx >> 2)], x))));
            }
            ivec4 f = forward4(d);
            for (int x = 0; x < 4; x++) sRes[b * 16 + y * 4 + x] = f[x];
        }
        atomicAdd(sSadSkip, sadSkip);
        atomicAdd(sSadNow, sadNow);
    } else if (t < 64) {
        int u = (t - 32) >> 2, y = (t - 32) & 3, c = u >> 2, bx = (u & 1) * 4, by = ((u >> 1) & 1) * 4;
        ivec4 pr = predChroma4(mbX * 8 + bx, mbY * 8 + by + y, mv, c);
        ivec4 sr = srcC4(mbX * 8 + bx, mbY * 8 + by + y, c);
        for (int x = 0; x < 4; x++) sPredC[c * 64 + (by + y) * 8 + bx + x] = pr[x];
        ivec4 f = forward4(sr - pr);
        for (int x = 0; x < 4; x++) sRes[256 + u * 16 + y * 4 + x] = f[x];
    }
    barrier();
    // Columns (its second loop) and their levels: luma block t >> 1's
    // columns 2(t & 1) and 2(t & 1) + 1; chroma block (t - 32) >> 2's column
    // (t - 32) & 3, its DC kept unquantised (sChromaDC) and its level 0.
    if (t < 64) {
        bool isLuma = t < 32;
        Quantiser q = quantiser(isLuma ? qp : qpc, 1);
        for (int k = 0; k < (isLuma ? 2 : 1); k++) {
            int x = isLuma ? (t & 1) * 2 + k : (t - 32) & 3;
            int o = isLuma ? (t >> 1) * 16 + x : 256 + ((t - 32) >> 2) * 16 + x;
            ivec4 cf = forward4(ivec4(sRes[o], sRes[o + 4], sRes[o + 8], sRes[o + 12]));
            if (!isLuma && x == 0) sChromaDC[(t - 32) >> 2] = cf[0];
            for (int r = 0; r < 4; r++) sRes[o + 4 * r] = (!isLuma && x == 0 && r == 0) ? 0 : quantWith(q, cf[r], r * 4 + x);
        }
    }
    barrier();
    // Each block's decimation score.
    if (t < 16 || (t >= 32 && t < 40)) {
        int o = t < 16 ? t * 16 : 256 + (t - 32) * 16;
        int l[16];
        for (int i = 0; i < 16; i++) l[i] = sRes[o + i];
        sScore[t < 16 ? t : 16 + t - 32] = decimationScore(l, t < 16);
    }
    barrier();
    if (t == 0) {
        sVanish = lumaVanishes(sScore) && sSadSkip <= sSadNow + uint(u_pic.z * sExtraBits) && chromaVanishes(sScore, sChromaDC, qpc);
        sTake = sVanish ? 2 : 0;
    }
#endif
    barrier();
}


#endif
#if !defined(PROBE_ROUND) && !defined(PROBE_GUESS) && !defined(DECIDE)
#define OWN_WORDS ((96 + GROUP - 1) / GROUP)
shared int sY[400];      // luma rows -4..15, columns -4..15 of the macroblock
shared int sC[200];      // Cb then Cr: rows -2..7, columns -2..7
shared uint sBSWord[4];  // bS of the vertical edges (edge × 4 + segment), then of the horizontal ones, four bits each, eight a word
shared bool sAhead;      // the next macroblock is decided already

int clip1(int v) { return clamp(v, 0, 255); }
int tc0Of(int word, int bS) { return (word >> (8 * (bS - 1))) & 255; }

// One line of a luma edge: p[0..3] from the edge outwards, q likewise (8.7.2.3, 8.7.2.4).
void filterLuma(inout int p[4], inout int q[4], int bS) {
    int alpha = u_code.x & 255, beta = (u_code.x >> 8) & 255;
    if (bS == 0 || abs(p[0] - q[0]) >= alpha || abs(p[1] - p[0]) >= beta || abs(q[1] - q[0]) >= beta) return;
    int ap = abs(p[2] - p[0]), aq = abs(q[2] - q[0]);
    int p0 = p[0], p1 = p[1], p2 = p[2], p3 = p[3], q0 = q[0], q1 = q[1], q2 = q[2], q3 = q[3];
    if (bS < 4) {
        int c0 = tc0Of(u_code.y, bS);
        int tc = c0 + (ap < beta ? 1 : 0) + (aq < beta ? 1 : 0);
        int delta = clamp((((q0 - p0) << 2) + (p1 - q1) + 4) >> 3, -tc, tc);
        p[0] = clip1(p0 + delta);
        q[0] = clip1(q0 - delta);
        if (ap < beta) p[1] = p1 + clamp((p2 + ((p0 + q0 + 1) >> 1) - (p1 << 1)) >> 1, -c0, c0);
        if (aq < beta) q[1] = q1 + clamp((q2 + ((p0 + q0 + 1) >> 1) - (q1 << 1)) >> 1, -c0, c0);
    } else {
        bool strong = abs(p0 - q0) < ((alpha >> 2) + 2);
        if (strong && ap < beta) {
            p[0] = (p2 + 2 * p1 + 2 * p0 + 2 * q0 + q1 + 4) >> 3;
            p[1] = (p2 + p1 + p0 + q0 + 2) >> 2;
            p[2] = (2 * p3 + 3 * p2 + p1 + p0 + q0 + 4) >> 3;
        } else {
            p[0] = (2 * p1 + p0 + q1 + 2) >> 2;
        }
        if (strong && aq < beta) {
            q[0] = (p1 + 2 * p0 + 2 * q0 + 2 * q1 + q2 + 4) >> 3;
            q[1] = (p0 + q0 + q1 + q2 + 2) >> 2;
            q[2] = (2 * q3 + 3 * q2 + q1 + q0 + p0 + 4) >> 3;
        } else {
            q[0] = (2 * q1 + q0 + p1 + 2) >> 2;
        }
    }
}

// One line of a chroma edge: p0, p1 and q0, q1; only p0 and q0 change.
void filterChroma(inout int p0, int p1, inout int q0, int q1, int bS) {
    int alpha = u_code.x >> 16 & 255, beta = (u_code.x >> 24) & 255;
    if (bS == 0 || abs(p0 - q0) >= alpha || abs(p1 - p0) >= beta || abs(q1 - q0) >= beta) return;
    int a = p0, b = q0;
    if (bS < 4) {
        int tc = tc0Of(u_code.z, bS) + 1;
        int delta = clamp((((b - a) << 2) + (p1 - q1) + 4) >> 3, -tc, tc);
        p0 = clip1(a + delta);
        q0 = clip1(b - delta);
    } else {
        p0 = (2 * p1 + a + q1 + 2) >> 2;
        q0 = (2 * q1 + b + p1 + 2) >> 2;
    }
}

// A word of samples into shared memory: `row` relative to this macroblock
// (luma -4..15, chroma -2..7), `wc` its word of the row (-1..3).
void storeWord(uint w, bool chroma, int row, int wc) {
    for (int k = 0; k < 4; k++) {
        int v = int((w >> uint(8 * k)) & 255u);
        if (chroma) {
            int b = wc * 4 + k;   // byte -4..15 of the interleaved row
            sC[(b & 1) * 100 + (row + 2) * 10 + ((b + 4) >> 1)] = v;
        } else {
            sY[(row + 4) * 20 + (wc + 1) * 4 + k] = v;
        }
    }
}

// Words t, t + GROUP, ... of the macroblock's own 16 luma rows and 8
// chroma rows (four words each, 96): read from the picture into `w`, then
// into shared memory (a walk reads them a step ahead).
void fetchOwn(int t, int mbX, int mbY, out uint w[OWN_WORDS]) {
    int rowWords = u_layout.z >> 2;
    for (int k = 0; k < OWN_WORDS; k++) {
        int i = min(t + GROUP * k, 95);
        bool chroma = i >= 64;
        int row = chroma ? (i - 64) >> 2 : i >> 2, wc = i & 3;
        w[k] = recon[chroma ? (u_layout.w >> 2) + (mbY * 8 + row) * rowWords + mbX * 4 + wc
                            : (mbY * 16 + row) * rowWords + mbX * 4 + wc];
    }
}
void placeOwn(int t, uint w[OWN_WORDS]) {
    for (int k = 0; k < OWN_WORDS; k++) {
        int i = t + GROUP * k;
        if (i >= 96) break;
        bool chroma = i >= 64;
        storeWord(w[k], chroma, chroma ? (i - 64) >> 2 : i >> 2, i & 3);
    }
}

// Word t (0-23) of the four luma rows and two chroma rows above the
// macroblock (luma rows 12-15 of the one above for t < 16, chroma rows 6-7 after).
void loadAbove(int t, int mbX, int mbY) {
    int rowWords = u_layout.z >> 2;
    bool chroma = t >= 16;
    int wc = t & 3;
    int row = chroma ? 6 + ((t - 16) >> 2) : 12 + (t >> 2);   // of the macroblock above
    int word = chroma ? (u_layout.w >> 2) + ((mbY - 1) * 8 + row) * rowWords + mbX * 4 + wc
                      : ((mbY - 1) * 16 + row) * rowWords + mbX * 4 + wc;
    storeWord(recon[word], chroma, chroma ? row - 8 : row - 16, wc);
}

// The words a macroblock's filtering reads and writes: five a row (columns
// -4..15, four samples a word), luma rows -4..15 then chroma rows -2..7;
// those outside the picture, and the upper left corner nobody reads, are
// skipped. Word i of a walk's row, worked out once for the whole row: the
// index of its first sample in shared memory (at), its word in the picture at
// the row's first macroblock, whether it is written (the left column but
// at the first macroblock).
struct RegionWord { bool chroma; int at; int word; bool used; bool left; };
RegionWord regionWord(int i, int mbY) {
    RegionWord a;
    a.chroma = i >= 100;
    int k = a.chroma ? i - 100 : i;
    int row = k / 5 - (a.chroma ? 2 : 4), wc = k % 5 - 1;
    a.used = !((row < 0 && !rowAbove(mbY)) || (row < 0 && wc < 0));
    a.left = wc < 0;
    int rowWords = u_layout.z >> 2;
    a.word = a.chroma ? (u_layout.w >> 2) + (mbY * 8 + row) * rowWords + wc : (mbY * 16 + row) * rowWords + wc;
    // Chroma: the interleaved row's bytes 4wc..4wc+3 are Cb, Cr of columns 2wc and 2wc + 1.
    a.at = a.chroma ? (row + 2) * 10 + 2 * wc + 2 : (row + 4) * 20 + (wc + 1) * 4;
    return a;
}
// Writes the word of macroblock mbX from shared memory to the picture.
void writeWord(RegionWord a, int mbX) {
    if (!a.used || (a.left && mbX == 0)) return;
    int b = a.at;
    uint w = a.chroma ? uint(sC[b]) | uint(sC[100 + b]) << 8 | uint(sC[b + 1]) << 16 | uint(sC[101 + b]) << 24
                      : uint(sY[b]) | uint(sY[b + 1]) << 8 | uint(sY[b + 2]) << 16 | uint(sY[b + 3]) << 24;
    recon[a.word + mbX * 4] = w;
}

// Waits (the first invocation) until count `at` of `progress` shows the
// picture's tag and at least `n` macroblocks; `seen` is the count it last read.
void waitFor(int at, int n, inout uint seen) {
    uint need = (pictureTag() << 16) | uint(n);
    while (!((seen >> 16) == pictureTag() && seen >= need)) seen = progress[at];
}

// Word k (0-3) of macroblock mb's edge strengths, eight entries a word (strengthAt's order):
// in P pictures as its decision left them in MB_BS; in an IDR every
// macroblock is intra (4 on its edges inside the slice, 3 inside it).
uint strengthWord(int k, int mb, int mbX, int mbY) {
    if (u_pic.x == 1) return mbs[mb * MB_WORDS + MB_BS + k];
    bool vertical = k < 2;
    uint edge0 = (vertical ? mbX > 0 : rowAbove(mbY)) ? 4u : 0u;
    // Entries 8(k & 1) to 8(k & 1) + 7: edge (k & 1) * 2 and the next, four segments each.
    return (k & 1) == 0 ? (edge0 * 0x1111u) | 0x33330000u : 0x33333333u;
}
// Entry i of the macroblock's strengths (strengthAt's order) from sBSWord.
int strengthOf(int i) { return int((sBSWord[i >> 3] >> uint(4 * (i & 7))) & 15u); }

// Row mbY's filtering, macroblocks first..end - 1. On a walk each waits
// until its own row has decided it (P pictures) and the row above has
// filtered two macroblocks ahead (its count at progress[row]).
void filterRow(int t, int mbY, int first, int end, bool walk) {
    int mbW = u_size.z;
    bool decided = u_pic.x == 1;
    uint seen = 0u, seenDecided = 0u, bsWord = 0u;
    uint own[OWN_WORDS];
    bool ahead = false;   // own and bsWord were read the step before
    bool luma = t < 16;
    // The words of the region this invocation writes (regionWord): before
    // the count moves, one of the rows the row below reads (luma 12-15,
    // chroma 6-7: words 80-99 and 140-149) on invocations 0-19 and 32-41;
    // after, words t and t + 64 of the rest (words 0-79 and 100-139).
    bool writesEarly = t < 20 || (t >= 32 && t < 42);
    RegionWord early = regionWord(t < 20 ? 80 + t : 140 + (t - 32), mbY);
    RegionWord late0 = regionWord(t, mbY), late1 = regionWord(t + 64 < 80 ? t + 64 : t + 84, mbY);
    int u = t - 32;   // chroma invocations (0-15): component u >> 3, line u & 7
    bool chroma = u >= 0 && u < 16;
    for (int mbX = first; mbX < end; mbX++) {
        int mb = mbY * mbW + mbX;
        // The left neighbour's last four columns (two of chroma): on a walk
        // as this work group left them (nobody else writes them before this
        // macroblock is done), on a wavefront step from memory.
        if (mbX > 0 && walk) {
            if (luma) for (int k = 0; k < 4; k++) sY[(t + 4) * 20 + k] = sY[(t + 4) * 20 + 16 + k];
            else if (u >= 0 && u < 8) for (int c = 0; c < 2; c++) for (int k = 0; k < 2; k++) sC[c * 100 + (u + 2) * 10 + k] = sC[c * 100 + (u + 2) * 10 + 8 + k];
        } else if (mbX > 0) {
            int rowWords = u_layout.z >> 2;
            if (luma) storeWord(recon[(mbY * 16 + t) * rowWords + mbX * 4 - 1], false, t, -1);
            else if (u >= 0 && u < 8) storeWord(recon[(u_layout.w >> 2) + (mbY * 8 + u) * rowWords + mbX * 4 - 1], true, u, -1);
        }
        // The macroblock's decision and the row above's filtering of the
        // upper right neighbour. (A wavefront step's dispatch comes after
        // the step before it ended.)
        if (walk && t == 0) {
            if (decided) waitFor(u_size.w + mbY, mbX + 1, seenDecided);
            if (rowAbove(mbY)) waitFor(mbY - 1, min(mbX + 2, mbW), seen);
            memoryBarrierBuffer();
            sAhead = !decided || ((seenDecided >> 16) == pictureTag() && seenDecided >= ((pictureTag() << 16) | uint(mbX + 2)));
        }
        barrier();
        // The macroblock's own samples and edge strengths, final since its
        // decision; on a walk, the next macroblock's too where it is decided
        // already: they arrive while this one filters.
        if (!ahead) {
            fetchOwn(t, mbX, mbY, own);
            if (t < 4) bsWord = strengthWord(t, mb, mbX, mbY);
        }
        placeOwn(t, own);
        if (t < 4) sBSWord[t] = bsWord;
        ahead = walk && mbX + 1 < end && sAhead;
        if (ahead) {
            fetchOwn(t, mbX + 1, mbY, own);
            if (t < 4) bsWord = strengthWord(t, mb + 1, mbX + 1, mbY);
        }
        // The four last rows (two of chroma) above this macroblock.
        if (rowAbove(mbY) && t < 24) loadAbove(t, mbX, mbY);
        barrier();

        // Eight stages in two phases. Luma (line t): vertical edges left to
        // right, then horizontal edges top to bottom. Chroma (4:2:0;
        // component u >> 3, line u & 7): its edges 0 and 4 with the bS of
        // luma edges 0 and 8, vertical then horizontal. A vertical edge's
        // line is a row and a horizontal edge's a column, so within a phase
        // each invocation reads and writes only its own line: one barrier
        // a phase, not a stage.
        for (int phase = 0; phase < 2; phase++) {
            bool vertical = phase == 0;
            if (luma) {
                for (int edge = 0; edge < 4; edge++) {
                    int bS = strengthOf((vertical ? 0 : 16) + edge * 4 + (t >> 2));
                    if (bS > 0) {
                        int p[4], q[4];
                        int o = vertical ? (t + 4) * 20 + 4 * edge + 4 : (4 * edge + 4) * 20 + t + 4;
                        int stride = vertical ? 1 : 20;
                        for (int i = 0; i < 4; i++) { p[i] = sY[o - (1 + i) * stride]; q[i] = sY[o + i * stride]; }
                        filterLuma(p, q, bS);
                        for (int i = 0; i < 3; i++) { sY[o - (1 + i) * stride] = p[i]; sY[o + i * stride] = q[i]; }
                    }
                }
            } else if (chroma) {
                for (int edge = 0; edge < 2; edge++) {
                    int c = u >> 3, line = u & 7;
                    int bS = strengthOf((vertical ? 0 : 16) + edge * 8 + (line >> 1));
                    if (bS > 0) {
                        int o = vertical ? c * 100 + (line + 2) * 10 + 4 * edge + 2 : c * 100 + (4 * edge + 2) * 10 + line + 2;
                        int stride = vertical ? 1 : 10;
                        int p0 = sC[o - stride], q0 = sC[o];
                        filterChroma(p0, sC[o - 2 * stride], q0, sC[o + stride], bS);
                        sC[o - stride] = p0; sC[o] = q0;
                    }
                }
            }
            barrier();
        }

        // The rows the row below reads (luma 12-15, chroma 6-7: words 80-99
        // and 140-149), then the count it waits for, then the rest (rows
        // above this macroblock and its own rows 0-11, which nothing in this
        // walk reads again).
        if (writesEarly) writeWord(early, mbX);
        memoryBarrierBuffer();
        barrier();
        if (t == 0 && walk) atomicExchange(progress[mbY], (pictureTag() << 16) | uint(mbX + 1));
        writeWord(late0, mbX);
        if (t + 64 < 120) writeWord(late1, mbX);
        barrier();
    }
}

void main() {
    // 64 invocations: luma lines on 0-15 (the first half), chroma lines on 32-47 (the second).
    int t = int(gl_LocalInvocationIndex);
    int mbY = int(gl_WorkGroupID.x);
    if (u_pic.w == 0) return;
    bool walk = u_step < 0;
    // Wavefront step d filters macroblock d - 2y of every row y of a slice.
    int first = walk ? 0 : u_step - 2 * (mbY % u_sliceRows);
    if (first < 0 || first >= u_size.z) return;
    filterRow(t, mbY, first, walk ? u_size.z : first + 1, walk);
}
#endif

#ifdef DECIDE
// Per row of the slice (at most 128, `H264ComputeEncoder.maxSliceRows`):
// its last four decided macroblocks (macroblock x at 8r + 2(x & 3)): its
// coded 4×4 luma blocks (bit 4by + bx) and intra (bit 16), then its
// vector; the macroblock it decides this step (its MB_INFO, vector, coded
// blocks, P_Skip vector, predictor, and the bits P takes beyond a skip).
shared uint sFinal[128 * 8];
shared uint sRowInfo[128], sRowMV[128], sRowCoded[128], sRowSkip[128], sRowMVP[128];
shared int sRowExtra[128];
// Step s's rows to probe (probed at the step), and its new P_Skips to
// reconstruct (at the next step: each its row and vector): three lists of
// each, list s % 3, emptied at the step before and two steps after it is
// written (its readers passed a barrier since, its next writers will pass
// one before).
shared int sProbeRows[3 * 128], sProbeCount[3];
shared uint sReconRow[3 * 128], sReconMV[3 * 128];
shared int sReconCount[3];
#define FINAL_INTRA (1u << 16)
// Steps between the moves of the rows' counts, each after a memory barrier
// that makes the steps' writes visible (the filter runs behind).
#define COUNT_STEPS 4

// What a decision reads of its own macroblock's record, read a step ahead
// and used only at its step, so the reads arrive while the step before
// runs: MB_INFO, MB_MV, the right and lower neighbours' MB_INFO; luma's
// total_coeff (MB_NNZ 0-3); the probe words (MB_PROBEMV to MB_PROBE2, then
// MB_PROBEMV3, MB_PROBE3).
struct Own { uvec4 a; uvec4 nnz; uvec4 p; uvec2 p3; };

// The coded 4×4 luma blocks (bit 4by + bx) of a P macroblock: its coded
// block pattern's 8×8 quadrant and the block's total_coeff.
uint codedBlocks(uint info, uvec4 nnz) {
    uint m = 0u;
    int cbp = infoCBP(info);
    for (int blk = 0; blk < 16; blk++) {
        int bx = blkX(blk), by = blkY(blk);
        if (((cbp >> ((by >> 1) * 2 + (bx >> 1))) & 1) != 0 && readByte(nnz[blk >> 2], blk & 3) != 0u) m |= 1u << uint(4 * by + bx);
    }
    return m;
}
Own fetchOwnRecord(int mb, int mbX, int mbY) {
    Own o;
    int r = mb * MB_WORDS;
    o.a = uvec4(mbs[r + MB_INFO], mbs[r + MB_MV], mbX + 1 < u_size.z ? mbs[r + MB_WORDS + MB_INFO] : 0u,
                mbY + 1 < u_size.w ? mbs[r + u_size.z * MB_WORDS + MB_INFO] : 0u);
    o.nnz = uvec4(mbs[r + MB_NNZ], mbs[r + MB_NNZ + 1], mbs[r + MB_NNZ + 2], mbs[r + MB_NNZ + 3]);
    o.p = uvec4(mbs[r + MB_PROBEMV], mbs[r + MB_PROBE], mbs[r + MB_PROBEMV2], mbs[r + MB_PROBE2]);
    o.p3 = uvec2(mbs[r + MB_PROBEMV3], mbs[r + MB_PROBE3]);
    return o;
}

// A decided neighbour in sFinal (row r of the slice, macroblock x).
Neighbour finalNeighbour(bool available, int r, int x) {
    int at = r * 8 + (x & 3) * 2;
    return neighbourOf(available, (sFinal[at] & FINAL_INTRA) != 0u ? KIND_I16 : KIND_P16, sFinal[at + 1]);
}

// Row r's macroblock (mbX, mbY) decided (the invocation that decided it):
// its record where it became a P_Skip; for CAVLC and the finish pass, the
// final record's vector predictor and whether it is coded as a P_Skip; its
// decision into sFinal for the next steps.
void finish(int r, int mbX, int mbY, bool skipped) {
    int mb = mbY * u_size.z + mbX;
    uint info = sRowInfo[r], mv = sRowMV[r], coded = sRowCoded[r];
    bool p16 = infoKind(info) == KIND_P16;
    if (skipped) {
        info &= ~(63u << 8);
        mv = sRowSkip[r];
        coded = 0u;
        mbs[mb * MB_WORDS + MB_MV] = mv;
        for (int k = 0; k < 6; k++) mbs[mb * MB_WORDS + MB_NNZ + k] = 0u;
    }
    if (p16) {
        mbs[mb * MB_WORDS + MB_MVP] = sRowMVP[r];
        if (infoCBP(info) == 0 && unpackMV(mv) == unpackMV(sRowSkip[r])) info |= 4u;
        if (info != sRowInfo[r]) mbs[mb * MB_WORDS + MB_INFO] = info;
    }
    sFinal[r * 8 + (mbX & 3) * 2] = coded | (p16 ? 0u : FINAL_INTRA);
    sFinal[r * 8 + (mbX & 3) * 2 + 1] = mv;
}

// Row r's decision at step s (its macroblock (mbX, mbY), record o), the
// row's invocation: decided here, or listed for the step's probes.
void decide(int r, int s, int mbX, int mbY, Own o) {
    int take = 0;
    uint info = o.a.x;
    sRowInfo[r] = info;
    sRowMV[r] = o.a.y;
    sRowCoded[r] = infoKind(info) == KIND_P16 ? codedBlocks(info, o.nnz) : 0u;
    if (infoKind(info) == KIND_P16) {
        bool hasB = rowAbove(mbY), hasC = hasB && mbX + 1 < u_size.z, hasD = hasB && mbX > 0;
        ivec2 mvp, skip;
        predictorsOf(finalNeighbour(mbX > 0, r, mbX - 1), finalNeighbour(hasB, r - 1, mbX),
                     finalNeighbour(hasC, r - 1, mbX + 1), finalNeighbour(hasD, r - 1, mbX - 1), mvp, skip);
        ivec2 mv = unpackMV(o.a.y);
        bool rightIntra = mbX + 1 < u_size.z && infoKind(o.a.z) != KIND_P16;
        bool belowIntra = mbY + 1 < u_size.w && rowAbove(mbY + 1) && infoKind(o.a.w) != KIND_P16;
        int extraBits = 2 + mvdBits(mv, mvp);
        if (!(infoCBP(info) == 0 && mv == skip) && !rightIntra && !belowIntra) {
            // A probe before at this vector (the macroblock pass's or a round's), else one here.
            uvec2 probe = unpackMV(o.p.x) == skip ? o.p.xy : unpackMV(o.p.z) == skip ? o.p.zw : o.p3;
            bool cheap = probeMargin(probe.y) <= u_pic.z * extraBits;
            if (unpackMV(probe.x) != skip) take = 1;
            else if (probeState(probe.y) == PROBE_UNKNOWN) take = cheap ? 1 : 0;
            else take = probeState(probe.y) == PROBE_EMPTY && cheap ? 2 : 0;
        }
        sRowSkip[r] = packMV(skip);
        sRowMVP[r] = packMV(mvp);
        sRowExtra[r] = extraBits;
    }
    if (take == 1) {
        sProbeRows[(s % 3) * 128 + atomicAdd(sProbeCount[s % 3], 1)] = r;
    } else {
        finish(r, mbX, mbY, take == 2);
        if (take == 2) {
            int i = (s % 3) * 128 + atomicAdd(sReconCount[s % 3], 1);
            sReconRow[i] = uint(r);
            sReconMV[i] = sRowSkip[r];
        }
    }
}

// Part p (0-23) of the reconstruction of a macroblock that became a P_Skip,
// its prediction at mv (the probe's, where it was probed here): luma block
// p's rows, or chroma row p - 16 (both components, interleaved).
void skipRecon(int p, int mbX, int mbY, ivec2 mv, bool probed) {
    int rowWords = u_layout.z >> 2;
    if (p < 16) {
        int bx = blkX(p) * 4, by = blkY(p) * 4;
        for (int y = 0; y < 4; y++)
            recon[(mbY * 16 + by + y) * rowWords + mbX * 4 + (bx >> 2)] = probed ? sPredY[p * 4 + y] : predWord(mbX * 16 + bx, mbY * 16 + by + y, mv);
    } else {
        int y = p - 16;
        ivec4 pr[4];   // Cb columns 0-3 and 4-7, then Cr's
        for (int c = 0; c < 2; c++) for (int h = 0; h < 2; h++) {
            if (probed) { for (int x = 0; x < 4; x++) pr[c * 2 + h][x] = sPredC[c * 64 + y * 8 + 4 * h + x]; }
            else pr[c * 2 + h] = predChroma4(mbX * 8 + 4 * h, mbY * 8 + y, mv, c);
        }
        // Bytes 4wc..4wc + 3 of the row: Cb, Cr of columns 2wc and 2wc + 1.
        for (int wc = 0; wc < 4; wc++) {
            int h = wc >> 1, x = (wc & 1) * 2;
            recon[(u_layout.w >> 2) + (mbY * 8 + y) * rowWords + mbX * 4 + wc] =
                uint(pr[h][x]) | uint(pr[2 + h][x]) << 8 | uint(pr[h][x + 1]) << 16 | uint(pr[2 + h][x + 1]) << 24;
        }
    }
}

// bS of the edge between block (pbx, pby) of the macroblock p and (qbx,
// qby) of q, decided (sFinal words; 8.7.2.1).
int strength(uvec2 p, int pbx, int pby, uvec2 q, int qbx, int qby, bool mbEdge) {
    if (((p.x | q.x) & FINAL_INTRA) != 0u) return mbEdge ? 4 : 3;
    if (((p.x >> uint(4 * pby + pbx)) & 1u) != 0u || ((q.x >> uint(4 * qby + qbx)) & 1u) != 0u) return 2;
    if (!mbEdge) return 0;
    ivec2 d = abs(unpackMV(p.y) - unpackMV(q.y));
    return (d.x >= 4 || d.y >= 4) ? 1 : 0;
}
uvec2 finalAt(int r, int x) { int at = r * 8 + (x & 3) * 2; return uvec2(sFinal[at], sFinal[at + 1]); }
// Word k (0-3) of the edge strengths of row r's macroblock (mbX, mbY):
// entries 8k to 8k + 7 (entry i: vertical edge i >> 2's segment i & 3, then
// horizontal edge (i - 16) >> 2's segment (i - 16) & 3), four bits each.
uint strengthWord(int k, int r, int mbX, int mbY) {
    uvec2 own = finalAt(r, mbX);
    uvec2 left = mbX > 0 ? finalAt(r, mbX - 1) : own, up = rowAbove(mbY) ? finalAt(r - 1, mbX) : own;
    uint w = 0u;
    for (int j = 0; j < 8; j++) {
        int i = 8 * k + j, e = (i & 15) >> 2, s = i & 3, bS;
        if (i < 16) bS = e == 0 && mbX == 0 ? 0 : strength(e == 0 ? left : own, e == 0 ? 3 : e - 1, s, own, e, s, e == 0);
        else bS = e == 0 && !rowAbove(mbY) ? 0 : strength(e == 0 ? up : own, s, e == 0 ? 3 : e - 1, own, s, e, e == 0);
        w |= uint(bS) << uint(4 * j);
    }
    return w;
}

// A step (one barrier): the rows decide (invocations 0 to rows - 1) while
// invocations 64-127 write what the step before decided: its new P_Skips'
// reconstructions (24 parts each) and its macroblocks' edge strengths; then
// the step's rows to probe, one after another over the work group. Every
// COUNT_STEPS steps the rows' counts move, after a memory barrier that made
// the steps' writes visible (the filter runs behind).
void main() {
    int t = int(gl_LocalInvocationIndex);
    if (u_pic.x == 0) return;   // an IDR: nothing to decide
    int mbW = u_size.z, first = int(gl_WorkGroupID.x) * u_sliceRows;
    int rows = min(u_sliceRows, u_size.w - first), steps = mbW + 2 * (rows - 1);
    bool filtered = u_pic.w == 1;
    int mbY = first + t;
    Own next;
    if (t < rows) next = fetchOwnRecord(mbY * mbW, 0, mbY);
    if (t < 3) { sProbeCount[t] = 0; sReconCount[t] = 0; }
    barrier();
    // One step more than the decisions: the last one's writes.
    for (int s = 0; s <= steps; s++) {
        int mbX = s - 2 * t;
        if (t < rows && s < steps && mbX >= 0 && mbX < mbW) {
            Own o = next;
            if (mbX + 1 < mbW) next = fetchOwnRecord(mbY * mbW + mbX + 1, mbX + 1, mbY);
            decide(t, s, mbX, mbY, o);
        }
        if (t == 0) { sProbeCount[(s + 1) % 3] = 0; sReconCount[(s + 1) % 3] = 0; }
        if (t >= 64 && s > 0) {
            int u = t - 64, b = ((s - 1) % 3) * 128;
            for (int k = u; k < 24 * sReconCount[(s - 1) % 3]; k += 64) {
                int r = int(sReconRow[b + k / 24]);
                skipRecon(k % 24, s - 1 - 2 * r, first + r, unpackMV(sReconMV[b + k / 24]), false);
            }
            if (filtered) {
                for (int k = u; k < 4 * rows; k += 64) {
                    int r = k >> 2, x = s - 1 - 2 * r;
                    if (x >= 0 && x < mbW) mbs[((first + r) * mbW + x) * MB_WORDS + MB_BS + (k & 3)] = strengthWord(k & 3, r, x, first + r);
                }
            }
        }
        bool counted = s % COUNT_STEPS == COUNT_STEPS - 1 || s == steps;
        if (counted) memoryBarrierBuffer();
        barrier();
        // The count of the row's macroblocks decided before this step (their writes done).
        if (counted && t < rows && s - 2 * t >= 1 && (s == steps || s - 2 * t - COUNT_STEPS < mbW))
            progress[u_size.w + mbY] = (pictureTag() << 16) | uint(min(s - 2 * t, mbW));
        // Probes, one macroblock after another over the work group.
        int probes = s < steps ? sProbeCount[s % 3] : 0;
        for (int i = 0; i < probes; i++) {
            int r = sProbeRows[(s % 3) * 128 + i], px = s - 2 * r, py = first + r;
            if (t == 0) {
                sSkipMV = unpackMV(sRowSkip[r]);
                sExtraBits = sRowExtra[r];
                sSadSkip = 0u;
                sSadNow = 0u;
            }
            loadOwnY(t, px, py);
            barrier();
            probeSkip(t, px, py);
            if (t == 0) finish(r, px, py, sTake == 2);
            if (sTake == 2 && t < 24) skipRecon(t, px, py, sSkipMV, true);
            barrier();
        }
    }
}
#endif

#if defined(PROBE_ROUND) || defined(PROBE_GUESS)
// A probe round (u_step 1 or 2; P pictures, after the macroblock passes and
// before the decision), in two passes: the guess (PROBE_GUESS, an invocation a
// macroblock) lists the macroblocks to probe, and the probe (PROBE_ROUND, a
// work group each, dispatched indirectly by the list's count) probes them.
// The round before's probe words of each macroblock (round 1: MB_PROBEMV,
// MB_PROBE; round 2: MB_PROBEMV2, MB_PROBE2), and this round's (MB_PROBEMV2
// and MB_PROBEMV3).
int probeWordBefore() { return u_step == 1 ? MB_PROBEMV : MB_PROBEMV2; }
int probeWordNow() { return u_step == 1 ? MB_PROBEMV2 : MB_PROBEMV3; }

// The macroblocks to probe, a list a round: an indirect dispatch's three
// words (their count, 1, 1), then their indices. Round r's list at
// probeListAt(r); each round's guess empties the other round's (used by
// then: the other list's probe pass ran before it, in this picture or the
// last), so no list is emptied between passes by the host.
layout(std430, binding = 12) coherent buffer ProbeList { uint probeList[]; };
uint probeListAt(int round) { return uint((round - 1) * (3 + u_size.z * u_size.w)); }
#endif

#ifdef PROBE_GUESS
// The guess at the final vector of P macroblock (x, y) (record `info`,
// vector `mv`): the P_Skip vector the round before probed where the residual
// vanished there and its SAD does not rule the skip out (round 1: the
// macroblock pass's probe, marked empty only then), and no intra right or
// lower neighbour keeps it from changing; else its own.
uint guessedVector(int x, int y, uint info, uint mv) {
    if (infoKind(info) != KIND_P16) return mv;
    int i = y * u_size.z + x, w = probeWordBefore();
    uint probe = mbs[i * MB_WORDS + w + 1], skip = mbs[i * MB_WORDS + w];
    if (probeState(probe) != PROBE_EMPTY) return mv;
    if (u_step > 1 && probeMargin(probe) > u_pic.z * (2 + mvdBits(unpackMV(mv), unpackMV(skip)))) return mv;
    bool rightIntra = x + 1 < u_size.z && infoKind(mbs[(i + 1) * MB_WORDS + MB_INFO]) != KIND_P16;
    bool belowIntra = y + 1 < u_size.w && rowAbove(y + 1) && infoKind(mbs[(i + u_size.z) * MB_WORDS + MB_INFO]) != KIND_P16;
    return rightIntra || belowIntra ? mv : skip;
}

// The guessed neighbour at (x, y) of a macroblock in row `row`.
Neighbour guessedNeighbour(int x, int y, int row) {
    if (x < 0 || x >= u_size.z || (y != row && !rowAbove(row))) return neighbourOf(false, 0u, 0u);
    int i = y * u_size.z + x;
    uint info = mbs[i * MB_WORDS + MB_INFO];
    return neighbourOf(true, info, guessedVector(x, y, info, mbs[i * MB_WORDS + MB_MV]));
}

void main() {
    int mb = int(gl_GlobalInvocationID.x), mbW = u_size.z;
    uint list = probeListAt(u_step);
    if (mb == 0) probeList[probeListAt(3 - u_step)] = 0u;
    if (mb >= mbW * u_size.w) return;
    int mbX = mb % mbW, mbY = mb / mbW, rec = mb * MB_WORDS;
    int before = probeWordBefore(), now = probeWordNow();
    uint info = mbs[rec + MB_INFO];
    if (infoKind(info) != KIND_P16) return;
    // The P_Skip vector the guesses give; a probe there where the decision
    // might take the skip and no probe so far was at it.
    ivec2 mv = unpackMV(mbs[rec + MB_MV]);
    ivec2 mvp, skip;
    predictorsOf(guessedNeighbour(mbX - 1, mbY, mbY), guessedNeighbour(mbX, mbY - 1, mbY),
                 guessedNeighbour(mbX + 1, mbY - 1, mbY), guessedNeighbour(mbX - 1, mbY - 1, mbY), mvp, skip);
    bool rightIntra = mbX + 1 < mbW && infoKind(mbs[rec + MB_WORDS + MB_INFO]) != KIND_P16;
    bool belowIntra = mbY + 1 < u_size.w && rowAbove(mbY + 1) && infoKind(mbs[rec + mbW * MB_WORDS + MB_INFO]) != KIND_P16;
    if (!(infoCBP(info) == 0 && mv == skip) && !rightIntra && !belowIntra
        && skip != unpackMV(mbs[rec + MB_PROBEMV]) && skip != unpackMV(mbs[rec + before])) {
        // The vector now; the probe pass writes the probe beside it.
        mbs[rec + now] = packMV(skip);
        probeList[list + 3u + atomicAdd(probeList[list], 1u)] = uint(mb);
    } else {
        // The round before's words again: the decision finds nothing new here.
        mbs[rec + now] = mbs[rec + before];
        mbs[rec + now + 1] = mbs[rec + before + 1];
    }
}
#endif

#ifdef PROBE_ROUND
// The probe of the listed macroblock at the vector the guess wrote.
void main() {
    int t = int(gl_LocalInvocationIndex);
    int mb = int(probeList[probeListAt(u_step) + 3u + gl_WorkGroupID.x]), mbW = u_size.z;
    int mbX = mb % mbW, mbY = mb / mbW, rec = mb * MB_WORDS, now = probeWordNow();
    if (t == 0) {
        sSkipMV = unpackMV(mbs[rec + now]);
        sExtraBits = 0;
        sSadSkip = 0u;
        sSadNow = 0u;
    }
    loadOwnY(t, mbX, mbY);
    barrier();
    probeSkip(t, mbX, mbY);
    if (t == 0) mbs[rec + now + 1] = packProbe(sVanish ? PROBE_EMPTY : PROBE_FULL, int(sSadSkip) - int(sSadNow));
}
#endif
