#version 310 es
// H.264 encoder, the in-loop deblocking filter (ITU-T H.264 8.7;
// docs/ARCHITECTURE.md, "The GPU encoder"), run on the picture's
// reconstruction once every macroblock is in it, so the next picture
// predicts from what a decoder shows. The standard filters macroblock by
// macroblock in raster order, and each one reads samples its left and upper
// neighbours (and the upper right one, through the upper's right columns)
// have filtered: one work group per macroblock row walks the row left to
// right, and a row waits until the row above is two macroblocks ahead
// (`progress`: per row, the picture's 16-bit tag over the macroblocks done,
// so a count left by an earlier picture is never taken for this one's;
// the decisions' counts after the filter's, below).
// A work group waits only for groups of lower index (the row above; a
// filtering row for its decisions, below), which started first, so every wait ends.
// Where work groups of one dispatch cannot wait on each other (llvmpipe runs
// a dispatch's groups in fixed shares per thread, and ends every loop of a
// shader after 65,535 iterations in all, so a long wait ends early), the
// walk is a wavefront of dispatches instead, in the same order (u_step, −1
// for the walk; its steps below).
//
// In P pictures a second walk, beside the filter's, makes the P_Skip
// decision in the standard's order: its own work groups (0 to mbHeight - 1,
// the filter's after them), a row waiting until the row above has decided
// two macroblocks ahead, and the filter of a macroblock waiting until its
// row has decided it (the decisions' count at progress[mbHeight + row]). A
// deciding row learns what it needs of the row above from one word a
// macroblock that the row above writes as soon as it has decided it
// (`finalWord`: the vector, intra or not, whether it became a P_Skip, and
// the P picture's tag, at progress[2 mbHeight + macroblock]): it waits on
// those words themselves, so its wait and its reads are one round trip and
// the row above's count, fence and record writes are off its chain. The two
// chains run on different multiprocessors, so a step of each is shorter
// than a step that decided and filtered; a wavefront step d decides
// macroblock d − 2y of every row y and filters d − 1 − 2y. Until here every macroblock chose its vector knowing
// only what its neighbours were about to choose; now the left, upper and
// upper right neighbours are final, so the P_Skip vector is the one a
// decoder derives. A P macroblock that is not already a P_Skip becomes one
// where its residual at that vector quantises to nothing (after
// decimation) and its SAD there, against the bits P_L0_16x16 takes beyond
// a skip (mb_type, the vector's difference, coded_block_pattern), costs no
// more than its own: its record and its reconstruction (the prediction)
// change before it is filtered. Not where its right or lower neighbour is
// intra: those predicted from its reconstruction. The macroblock pass
// already probed at the P_Skip vector the neighbours' choices gave
// (MB_PROBEMV, MB_PROBE); where the final vector is that one, the
// decision reads the probe. Where they differ, it is often because a
// neighbour became a P_Skip here: so before the walk, two parallel rounds
// of this program (PROBE_GUESS, then PROBE_ROUND) guess each macroblock's
// final vector (its P_Skip vector where the probe before found the residual
// vanishing, else its own), work out the P_Skip vector those guesses give
// each macroblock, and probe there where no probe was (MB_PROBEMV2,
// MB_PROBEMV3). The chain
// of the decision's walk probes only where the final vector is none of the
// three (over all 64 invocations, its prediction kept for the
// reconstruction: every row below waits on such a step). A decision step,
// between two barriers: the first invocation waits for the upper
// neighbours' final words while the others place the records and the
// second half works out the step before's edge strengths; then it decides
// and writes the record and the final word before the step's second
// barrier (where the chain probes, after the probe); a macroblock that
// became a P_Skip without a probe there gets its reconstruction (the
// prediction) the step after, beside the wait, off the rows' chain. A filter step: wait for the
// decision and the row above, read the samples above, filter in shared
// memory, write; the macroblock's own samples and strengths were read the
// step before where it was decided by then.
// The walk's work group is two halves of 32 invocations, each an NVIDIA
// warp (luma's lines on the first, chroma's on the second, side by side
// where the hardware runs the halves apart); a probe round's is 32.
#if defined(PROBE_ROUND) || defined(PROBE_GUESS)
layout(local_size_x = 32) in;
#else
layout(local_size_x = 64) in;
#endif
const int GROUP = int(gl_WorkGroupSize.x);
#define OWN_WORDS ((96 + GROUP - 1) / GROUP)

layout(std430, binding = 1) coherent buffer Recon { uint recon[]; };
layout(std430, binding = 3) coherent buffer MBs { uint mbs[]; };
layout(std430, binding = 10) coherent volatile buffer Progress { uint progress[]; };

uniform ivec4 u_layout;  // source row bytes, source UV offset, picture row bytes, picture UV offset
// The picture's one QP gives every edge the same thresholds (its macroblocks
// carry no QP change): α | β << 8 of luma and α | β << 8 of chroma, then
// tC0 for bS 1, 2, 3 a byte each, of luma and of chroma (Tables 8-16, 8-17);
// then the picture's tag (1 to 65535).
// The tag's low 16 bits the picture's (the counts'), its high bits a tag of 1
// to 63 counting P pictures only (the final words').
uniform ivec4 u_code;
// P picture (1) or IDR (0), its QP, lambda, whether to filter (1) or only decide P_Skip (0).
uniform ivec4 u_pic;
// −1: one work group walks each row; d ≥ 0: wavefront step d. A probe round: the round, 1 or 2.
uniform int u_step;

#include "h264source.glsl"
#include "h264motion.glsl"
#include "h264predict.glsl"

shared int sY[400];      // luma rows -4..15, columns -4..15 of the macroblock
shared int sC[200];      // Cb then Cr: rows -2..7, columns -2..7
shared uint sBSWord[4];  // bS of the vertical edges (edge × 4 + segment), then of the horizontal ones, four bits each, eight a word (the filter's)
shared uint sBSAcc[4];   // the same, as a decision step works them out
// The P_Skip decision: 0 none, 1 tried, 2 taken; the vector; the bits P
// takes beyond a skip; decimation scores (luma blocks, then chroma AC by
// component and block); chroma DC coefficients; SADs at the P_Skip vector
// and of the reconstruction.
shared int sTake;
shared bool sVanish;   // the probe's residual quantises to nothing
shared ivec2 sSkipMV;
shared ivec2 sMVP;     // the vector predictor (8.4.1.3) from the final neighbours
shared int sExtraBits;
shared int sScore[24];
shared int sChromaDC[8];
shared uint sSadSkip, sSadNow;
// The prediction an in-chain probe made (luma block t's rows at 4t..4t+3,
// chroma component c's row y at c * 64 + y * 8): a macroblock that becomes
// a P_Skip there takes it as its reconstruction.
shared uint sPredY[64];
shared int sPredC[128];
shared bool sAhead;    // the filter's next macroblock is decided already
shared int sRes[384];   // the in-chain probe's blocks (luma 0-15, chroma 8), 16 values each
// The records a decision step reads, words MB_INFO, MB_MV, MB_NNZ 0-5 of
// the macroblock (0), its left (8) and upper (16) neighbours; then MB_INFO
// and MB_MV of the upper right neighbour (or the upper left where there is
// none), the macroblock's MB_PROBEMV and MB_PROBE, MB_INFO of its right and
// lower neighbours, its MB_PROBEMV2, MB_PROBE2, MB_PROBEMV3, MB_PROBE3: a
// set of REC_SET words, two sets (a walk's step fills one while the step
// before's is read), the step's at R.
#define REC_SET 34
shared uint sRec[2 * REC_SET];
int R = 0;
#define REC_OWN R             // the macroblock's words 0-7 (recordWord)
#define REC_LEFT (R + 8)      // its left neighbour's
#define REC_UP (R + 16)       // its upper neighbour's
#define REC_CORNER (R + 24)   // MB_INFO, MB_MV of the upper right neighbour (the upper left where there is none)
#define REC_PROBE (R + 26)    // the macroblock's MB_PROBEMV, MB_PROBE
#define REC_RIGHT (R + 28)    // MB_INFO of the right neighbour
#define REC_BELOW (R + 29)    // MB_INFO of the lower neighbour
#define REC_PROBE2 (R + 30)   // the macroblock's MB_PROBEMV2, MB_PROBE2
#define REC_PROBE3 (R + 32)   // and MB_PROBEMV3, MB_PROBE3

// Word k (0-7) of the record in sRec: MB_INFO, MB_MV, then MB_NNZ 0-5.
uint recordWord(int mb, int k) { return mbs[mb * MB_WORDS + (k < 2 ? k : MB_NNZ + k - 2)]; }

bool intraKind(uint info) { return infoKind(info) != KIND_P16; }

// Whether 4×4 luma block (bx, by) of the P macroblock whose record is at sRec[r] has coefficients.
bool coded(int r, int bx, int by) {
    if (((infoCBP(sRec[r]) >> ((by >> 1) * 2 + (bx >> 1))) & 1) == 0) return false;
    int blk = (by >> 1) * 8 + (bx >> 1) * 4 + (by & 1) * 2 + (bx & 1);
    return ((sRec[r + 2 + (blk >> 2)] >> uint(8 * (blk & 3))) & 255u) != 0u;
}

// bS of the edge between block (pbx, pby) of the macroblock whose record is
// at sRec[p] and (qbx, qby) of the one at sRec[q] (8.7.2.1).
int strength(int p, int pbx, int pby, int q, int qbx, int qby) {
    bool mbEdge = p != q;
    if (intraKind(sRec[p]) || intraKind(sRec[q])) return mbEdge ? 4 : 3;
    if (coded(p, pbx, pby) || coded(q, qbx, qby)) return 2;
    if (!mbEdge) return 0;
    ivec2 d = abs(unpackMV(sRec[p + 1]) - unpackMV(sRec[q + 1]));
    return (d.x >= 4 || d.y >= 4) ? 1 : 0;
}

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
void loadOwn(int t, int mbX, int mbY) {
    uint w[OWN_WORDS];
    fetchOwn(t, mbX, mbY, w);
    placeOwn(t, w);
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

// The P_Skip probe at sSkipMV, the macroblock's own samples in sY: sVanish,
// whether its residual there quantises to nothing, and both luma SADs
// (sSadSkip, sSadNow, zero before); sTake becomes 2 where the macroblock
// becomes a P_Skip (in the walk's chain, where no probe before was at the
// vector), else 0. A probe round's (32 invocations) works out a block an
// invocation, chroma's only where luma's leaves the skip a chance. The
// chain's, which every row below waits on, is spread over the 64: a row's
// residual and its horizontal transform (luma two rows an invocation on the
// first half, chroma a row on the second), then the columns' and the
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
                sadNow += uint(abs(s - sY[(by + y + 4) * 20 + bx + x + 4]));
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
                sadNow += uint(abs(sv - sY[(by + y + 4) * 20 + bx + x + 4]));
            }
            ivec4 f = forward4(d);
            for (int x = 0; x < 4; x++) sRes[b * 16 + y * 4 + x] = f[x];
        }
        atomicAdd(sSadSkip, sadSkip);
        atomicAdd(sSadNow, sadNow);
    } else {
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
    {
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

#if !defined(PROBE_ROUND) && !defined(PROBE_GUESS)
void skipRecon(int t, int mbX, int mbY, ivec2 mv, bool probed);
uint finalWord(ivec2 mv, bool intra, bool skipped);

// The decided macroblock's records where it became a P_Skip (the first
// invocation): in the picture's records, and in sRec for the next step's
// left neighbour and the edge strengths the next step works out.
void applySkip(int mb, ivec2 mv) {
    mbs[mb * MB_WORDS + MB_INFO] = sRec[REC_OWN] & ~(63u << 8);
    mbs[mb * MB_WORDS + MB_MV] = packMV(mv);
    for (int k = 0; k < 6; k++) mbs[mb * MB_WORDS + MB_NNZ + k] = 0u;
    sRec[REC_OWN] &= ~(63u << 8);
    sRec[REC_OWN + 1] = packMV(mv);
    for (int k = 2; k < 8; k++) sRec[REC_OWN + k] = 0u;
}

// The decided macroblock's final word for the row below; then, for CAVLC and
// the finish pass, the final record's vector predictor and whether it is
// coded as a P_Skip (nothing in this pass reads MB_MVP, and the skip flag
// leaves the kind the row below reads as it was). The first invocation.
void writeFinal(int mb, bool skipped) {
    uint info = sRec[REC_OWN];
    ivec2 mv = unpackMV(sRec[REC_OWN + 1]);
    progress[2 * u_size.w + mb] = finalWord(mv, infoKind(info) != KIND_P16, skipped);
    if (infoKind(info) == KIND_P16) {
        mbs[mb * MB_WORDS + MB_MVP] = packMV(sMVP);
        if (infoCBP(info) == 0 && mv == sSkipMV) mbs[mb * MB_WORDS + MB_INFO] = info | 4u;
    }
}

// The P_Skip decision for macroblock (mbX, mbY) (top of the file): the
// first invocation decides; the chain's probe, where it asks for one, runs
// on all 64 (probeSkip); a new P_Skip's reconstruction on 16-39
// (skipRecon: the first invocation writes none of it). Every path through
// it ends at a barrier after its last change to shared memory. Where no
// probe is needed here the first invocation decides, updates the records
// and writes the final word before the first barrier, so the row below
// goes on while this one finishes; true where the macroblock then became a
// P_Skip, whose reconstruction (skipRecon at sSkipMV) the caller writes
// the next step. After a probe here, all of it happens in this step.
bool decideSkip(int t, int mb, int mbX, int mbY) {
    if (t == 0) {
        int take = 0;
        uint info = sRec[REC_OWN];
        if (infoKind(info) == KIND_P16) {
            ivec2 mvp, skip;
            bool hasB = rowAbove(mbY), hasC = hasB && mbX + 1 < u_size.z, hasD = hasB && mbX > 0;
            predictorsOf(neighbourOf(mbX > 0, sRec[REC_LEFT], sRec[REC_LEFT + 1]), neighbourOf(hasB, sRec[REC_UP], sRec[REC_UP + 1]),
                         neighbourOf(hasC, sRec[REC_CORNER], sRec[REC_CORNER + 1]), neighbourOf(hasD, sRec[REC_CORNER], sRec[REC_CORNER + 1]), mvp, skip);
            ivec2 mv = unpackMV(sRec[REC_OWN + 1]);
            bool rightIntra = mbX + 1 < u_size.z && infoKind(sRec[REC_RIGHT]) != KIND_P16;
            bool belowIntra = mbY + 1 < u_size.w && rowAbove(mbY + 1) && infoKind(sRec[REC_BELOW]) != KIND_P16;
            int extraBits = 2 + mvdBits(mv, mvp);
            if (!(infoCBP(info) == 0 && mv == skip) && !rightIntra && !belowIntra) {
                // A probe before at this vector (the macroblock pass's or a round's), else one here.
                int r = unpackMV(sRec[REC_PROBE]) == skip ? REC_PROBE : unpackMV(sRec[REC_PROBE2]) == skip ? REC_PROBE2 : REC_PROBE3;
                uint probe = sRec[r + 1];
                bool cheap = probeMargin(probe) <= u_pic.z * extraBits;
                if (unpackMV(sRec[r]) != skip) take = 1;
                else if (probeState(probe) == PROBE_UNKNOWN) take = cheap ? 1 : 0;
                else take = probeState(probe) == PROBE_EMPTY && cheap ? 2 : 0;
            }
            sSkipMV = skip;
            sMVP = mvp;
            sExtraBits = extraBits;
        }
        sTake = take;
        sSadSkip = 0u;
        sSadNow = 0u;
        if (take == 2) applySkip(mb, sSkipMV);
        if (take != 1) writeFinal(mb, take == 2);
    }
    barrier();
    if (sTake != 1) return sTake == 2;
    // The probe reads the macroblock's own samples (its reconstruction); decided after it.
    loadOwn(t, mbX, mbY);
    barrier();
    probeSkip(t, mbX, mbY);
    if (sTake != 2) {
        if (t == 0) writeFinal(mb, false);
        return false;
    }
    if (t == 0) {
        applySkip(mb, sSkipMV);
        writeFinal(mb, true);
    }
    skipRecon(t, mbX, mbY, sSkipMV, true);
    barrier();
    return false;
}

// The reconstruction of a macroblock that became a P_Skip is its
// prediction at the P_Skip vector (the probe's, where it was probed in the
// chain), into the picture for the filter: luma block t - 16's rows, or
// chroma row t - 32 (both components, interleaved).
void skipRecon(int t, int mbX, int mbY, ivec2 mv, bool probed) {
    int rowWords = u_layout.z >> 2;
    int b = t - 16;   // luma block b on invocations 16-31
    if (b >= 0 && b < 16) {
        int bx = blkX(b) * 4, by = blkY(b) * 4;
        for (int y = 0; y < 4; y++)
            recon[(mbY * 16 + by + y) * rowWords + mbX * 4 + (bx >> 2)] = probed ? sPredY[b * 4 + y] : predWord(mbX * 16 + bx, mbY * 16 + by + y, mv);
    } else if (t >= 32 && t < 40) {
        int y = t - 32;
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
#endif

#if !defined(PROBE_ROUND) && !defined(PROBE_GUESS)
// The record words of macroblock `mb` a step reads that the row above does
// not write, a word an invocation: t < 8 its words 0-7 (recordWord), 8-15
// its left neighbour's, 16-17 MB_PROBEMV and MB_PROBE, 18 the right
// neighbour's MB_INFO, 19 the lower one's, 20-23 the probe rounds' vectors and probes.
uint fetchRecord(int t, int mb, int mbX, int mbY) {
    int mbW = u_size.z;
    if (t < 8) return recordWord(mb, t);
    if (t < 16) return mbX > 0 ? recordWord(mb - 1, t - 8) : 0u;
    if (t < 18) return mbs[mb * MB_WORDS + MB_PROBEMV + t - 16];
    if (t == 18) return mbX + 1 < mbW ? mbs[(mb + 1) * MB_WORDS + MB_INFO] : 0u;
    if (t == 19) return mbY + 1 < u_size.w ? mbs[(mb + mbW) * MB_WORDS + MB_INFO] : 0u;
    if (t < 22) return mbs[mb * MB_WORDS + MB_PROBEMV2 + t - 20];
    if (t < 24) return mbs[mb * MB_WORDS + MB_PROBEMV3 + t - 22];
    return 0u;
}
// The picture's tag in the progress counts (1 to 65535).
uint pictureTag() { return uint(u_code.w) & 0xffffu; }

// Waits (the first invocation) until count `at` of `progress` shows the
// picture's tag and at least `n` macroblocks; `seen` is the count it last read.
void waitFor(int at, int n, inout uint seen) {
    while (!countReached(seen, pictureTag(), n)) seen = progress[at];
}

// A decided macroblock's final word for the row below: its vector (12 bits
// a component: vectors stay within ±1023 quarter samples), whether it is
// intra, whether it became a P_Skip here, and the P picture's tag (6 bits,
// 1 to 63: consecutive P pictures differ, and a word never written is 0).
#define FINAL_INTRA (1u << 24)
#define FINAL_SKIPPED (1u << 25)
uint finalWord(ivec2 mv, bool intra, bool skipped) {
    return (uint(mv.x) & 0xfffu) | ((uint(mv.y) & 0xfffu) << 12) | (intra ? FINAL_INTRA : 0u) | (skipped ? FINAL_SKIPPED : 0u)
         | ((uint(u_code.w) >> 16) << 26);
}
// Its vector as MB_MV holds one.
uint finalMV(uint w) { return packMV(ivec2(bitfieldExtract(int(w), 0, 12), bitfieldExtract(int(w), 12, 12))); }
// Waits (the first invocation) for macroblock mb's final word of this picture.
uint finalOf(int mb) {
    uint w;
    do { w = progress[2 * u_size.w + mb]; } while ((w >> 26) != (uint(u_code.w) >> 16));
    return w;
}
// Entry k (0-31: vertical edge k >> 2's segment k & 3, then horizontal edge
// (k - 16) >> 2's segment (k - 16) & 3) of the edge strengths of the
// macroblock whose records are at sRec[b] (its own), b + 8 (its left
// neighbour's) and b + 16 (its upper neighbour's).
int strengthAt(int k, int b, int mbX, int mbY) {
    int e = (k & 15) >> 2, s = k & 3;
    if (k < 16) return e == 0 && mbX == 0 ? 0 : strength(e == 0 ? b + 8 : b, e == 0 ? 3 : e - 1, s, b, e, s);
    return e == 0 && !rowAbove(mbY) ? 0 : strength(e == 0 ? b + 16 : b, s, e == 0 ? 3 : e - 1, b, s, e);
}
// The strengths of the macroblock (mbX, mbY) whose records are at sRec[b],
// an entry an invocation of the second half, into sBSAcc (zero before):
// four bits each, eight a word.
void addStrengths(int t, int b, int mbX, int mbY) {
    if (t < 32) return;
    int k = t - 32;
    atomicOr(sBSAcc[k >> 3], uint(strengthAt(k, b, mbX, mbY)) << uint(4 * (k & 7)));
}

// Row mbY's P_Skip decisions, macroblocks first..end - 1 (a walk's whole
// row, or a wavefront step's one macroblock). Each waits for the final words
// of its upper and upper right neighbours and writes its own once decided;
// a new P_Skip's reconstruction follows the step after (the last one's
// after the loop), before the count that covers it.
// Two barriers a step: the records sit in two sets of sRec, the step's and
// the one before's, so a step fills its own while the second half works out
// the edge strengths of the macroblock before (from its final records,
// into MB_BS); the first invocation reads the upper neighbours' final words
// and places what they say itself, then decides. The row's count (the
// filter's) moves two steps late, once the strengths and reconstruction of
// the macroblocks it covers are in memory, made visible by the memory
// barrier each invocation but the first passes at a step's start (the
// first, which waits, writes nothing a count covers).
void decideRow(int t, int mbY, int first, int end) {
    int mbW = u_size.z;
    bool above = rowAbove(mbY), filtered = u_pic.w == 1;
    uint record = fetchRecord(t, mbY * mbW + first, first, mbY);
    uint upper = 0u, upperRight = 0u;   // the first invocation's: the final words it waited for
    bool owed = false;   // a new P_Skip's reconstruction, the step before's, still to write
    ivec2 owedMV = ivec2(0);
    if (t < 4) sBSAcc[t] = 0u;
    barrier();
    for (int mbX = first; mbX < end; mbX++) {
        int mb = mbY * mbW + mbX, before = R;
        R = (mbX & 1) * REC_SET;
        // The step before's writes made visible (the first invocation
        // writes nothing a count covers: only final words, which are their
        // own signal, and records, which the filter does not read: the
        // passes after this one read them, and the row below, whose
        // decision corrects what it read by the final word).
        if (t > 0) memoryBarrierBuffer();
        if (owed) { skipRecon(t, mbX - 1, mbY, owedMV, false); owed = false; }
        if (filtered && mbX > first) addStrengths(t, before, mbX - 1, mbY);
        // The records the row above does not write (read a step ahead), the
        // left neighbour's as the step before left them, and the upper
        // neighbour's as the macroblock passes left them or its decision
        // rewrote them (its final word says which words count).
        if (t < 8) sRec[REC_OWN + t] = record;
        else if (t < 16) sRec[REC_LEFT + t - 8] = mbX > first ? sRec[before + t - 8] : record;
        else if (t < 24) sRec[REC_PROBE + t - 16] = record;   // REC_PROBE, REC_RIGHT, REC_BELOW, REC_PROBE2, REC_PROBE3 in turn
        else if (t < 32) sRec[REC_UP + t - 24] = above ? recordWord(mb - mbW, t - 24) : 0u;
        if (mbX + 1 < end && (t < 8 || (t >= 16 && t < 24))) record = fetchRecord(t, mb + 1, mbX + 1, mbY);
        if (t == 0) {
            if (above) {
                // The upper neighbour was the upper right one the step before.
                upper = mbX == first ? finalOf(mb - mbW) : upperRight;
                upperRight = mbX + 1 < mbW ? finalOf(mb - mbW + 1) : mbX > 0 ? finalOf(mb - mbW - 1) : 0u;
            }
        }
        barrier();
        if (t == 32 && mbX > first + 1) atomicExchange(progress[u_size.w + mbY], countWord(pictureTag(), mbX - 1));
        if (filtered && mbX > first && t >= 32 && t < 36) {
            mbs[(mb - 1) * MB_WORDS + MB_BS + t - 32] = sBSAcc[t - 32];
            sBSAcc[t - 32] = 0u;
        }
        if (t == 0) {
            // The upper neighbour's vector (and, where it became a P_Skip,
            // no coded blocks), the upper right's kind and vector (the upper
            // left's where there is none).
            if (above) {
                if ((upper & FINAL_SKIPPED) != 0u) {
                    sRec[REC_UP] &= ~(63u << 8);
                    for (int k = 2; k < 8; k++) sRec[REC_UP + k] = 0u;
                }
                sRec[REC_UP + 1] = finalMV(upper);
            }
            sRec[REC_CORNER] = above && (upperRight & FINAL_INTRA) != 0u ? KIND_I16 : KIND_P16;
            sRec[REC_CORNER + 1] = above ? finalMV(upperRight) : 0u;
        }
        if (decideSkip(t, mb, mbX, mbY)) { owed = true; owedMV = sSkipMV; }
    }
    // The last macroblock's reconstruction and strengths, then the row's last count.
    if (owed) skipRecon(t, end - 1, mbY, owedMV, false);
    if (filtered) addStrengths(t, R, end - 1, mbY);
    barrier();
    if (filtered && t >= 32 && t < 36) mbs[(mbY * mbW + end - 1) * MB_WORDS + MB_BS + t - 32] = sBSAcc[t - 32];
    memoryBarrierBuffer();
    barrier();
    if (t == 0) atomicExchange(progress[u_size.w + mbY], countWord(pictureTag(), end));
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
            sAhead = !decided || countReached(seenDecided, pictureTag(), mbX + 2);
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
        if (t == 0 && walk) atomicExchange(progress[mbY], countWord(pictureTag(), mbX + 1));
        writeWord(late0, mbX);
        if (t + 64 < 120) writeWord(late1, mbX);
        barrier();
    }
}

void main() {
    // 64 invocations: luma lines on 0-15 (the first half), chroma lines on 32-47 (the second).
    // Work groups 0 to mbHeight - 1 decide, row by row (P pictures);
    // mbHeight to 2 mbHeight - 1 filter (where the picture is filtered).
    int t = int(gl_LocalInvocationIndex);
    bool deciding = int(gl_WorkGroupID.x) < u_size.w;
    int mbY = int(gl_WorkGroupID.x) - (deciding ? 0 : u_size.w);
    if (deciding ? u_pic.x == 0 : u_pic.w == 0) return;
    bool walk = u_step < 0;
    // Wavefront step d decides macroblock d - 2y of every row y and filters d - 1 - 2y.
    int first = walk ? 0 : u_step - (deciding ? 0 : 1) - 2 * (mbY % u_sliceRows);
    if (first < 0 || first >= u_size.z) return;
    int end = walk ? u_size.z : first + 1;
    if (deciding) decideRow(t, mbY, first, end);
    else filterRow(t, mbY, first, end, walk);
}
#endif

#if defined(PROBE_ROUND) || defined(PROBE_GUESS)
// A probe round (u_step 1 or 2; P pictures, after the macroblock passes and
// before the walk), in two passes: the guess (PROBE_GUESS, an invocation a
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
    // The P_Skip vector the guesses give; a probe there where the walk
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
        // The round before's words again: the walk finds nothing new here.
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
    loadOwn(t, mbX, mbY);
    barrier();
    probeSkip(t, mbX, mbY);
    if (t == 0) mbs[rec + now + 1] = packProbe(sVanish ? PROBE_EMPTY : PROBE_FULL, int(sSadSkip) - int(sSadNow));
}
#endif
