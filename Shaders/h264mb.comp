#version 310 es
// H.264 encoder, macroblock analysis and reconstruction (docs/ARCHITECTURE.md,
// "The GPU encoder"): one work group of 64 invocations per macroblock.
// INTRA: Intra_16x16 or Intra_4x4 over a wavefront (u_code.w is the
// diagonal x + y this dispatch runs, y counted from the slice's first row,
// so left, top and top-left neighbours are reconstructed).
// PINTRA: Intra_16x16 in P pictures where it beats P, over a checkerboard
// (below). Not Intra_4x4: in P pictures it bought at most 0.4 % BD-rate on
// the quality clips for two passes of its own (docs/ARCHITECTURE.md).
// SEARCH (with INTER): the full-sample motion search of P_L0_16x16
// (predictors, a diamond walk, its diagonal neighbours, within ±255), all
// macroblocks at once, reading the reference where it lies (no window in
// shared memory: more work groups resident); it writes only the vector into
// the macroblock's record. A pass of its own, so the transform and
// reconstruction run with the resources they need, not the search's.
// REFINE (with INTER and SEARCH): the walk again, from the vectors the
// search found for this macroblock and seven of its neighbours in this
// picture (all but the lower left), sixteen diamond steps at most, into
// MB_REFINEMV and a copy in MB_MV (the sub-sample pass reads the copy
// around it and writes MB_REFINEMV: a neighbour must never see a vector
// another work group of the same pass wrote, or the bits depend on when
// work groups run): motion the
// previous picture's vectors miss spreads from the neighbours (on bikes
// scaled to 1920x816, BD-rate against x264 ultrafast +111.7 → +78.3 %).
// Where the search stopped by itself (MB_SEARCHSAD) and all seven
// neighbours found its vector, the work group stops at once.
// SUBPEL (with INTER and SEARCH): the refinement's vector to the quarter
// sample: its eight half-sample neighbours, then the eight quarter-sample
// neighbours of the best, priced by SAD against the reference's sub-sample
// planes (h264interp.comp) plus lambda times the bits of the difference from
// the predictor the neighbours' refined vectors give.
// CHOOSE (with INTER and SEARCH): the vector among the refinement's and two
// worked out from the neighbours', all macroblocks at once; in the rounds
// after the first, a macroblock whose neighbours' vectors did not move keeps
// its choice and stops at once.
// INTER: P_L0_16x16 with the chosen vector (quarter samples), all macroblocks at once.
// Vectors are in quarter samples from the sub-sample pass on; the search and
// the refinement find whole-sample ones.
// INTRA and INTER choose, transform, quantise, reconstruct into the current
// picture and write the macroblock's record for the entropy pass.
layout(local_size_x = 64) in;

#ifdef INTRA_WALK
// The walk reads what other work groups of its dispatch wrote (the row above).
layout(std430, binding = 1) coherent buffer Recon { uint recon[]; };
layout(std430, binding = 3) coherent buffer MBs { uint mbs[]; };
layout(std430, binding = 10) coherent volatile buffer Progress { uint progress[]; };
#else
layout(std430, binding = 1) buffer Recon { uint recon[]; };
layout(std430, binding = 3) buffer MBs { uint mbs[]; };
#endif
#ifdef INTER
layout(std430, binding = 4) readonly buffer Prev { uint prevMBs[]; };
#endif

uniform ivec4 u_layout;  // source row bytes, source UV offset, picture row bytes, picture UV offset
uniform ivec4 u_code;    // qp, P slice, lambda, wavefront diagonal

#include "h264source.glsl"
#ifdef INTER
#include "h264motion.glsl"
#endif

// Vectors within ±RANGE samples: inside the vertical range of level 3 (the
// lowest the parameter sets name: −256 to 255.75). A range of 16 cost 10-30 %
// more bits on clips with fast local motion.
#define RANGE 255
// Intra in P pictures: its cost (Intra_16x16's SAD) plus this many lambdas must beat P's.
#define INTRA_BIAS 12
// Intra is not tried in P pictures where P costs at most this many lambdas
// (on bikes scaled to 1920x816, BD-rate against x264 ultrafast +0.8 % with
// 32, −2.0 % with 48, −1.0 % with 64, +6.0 % with 96; the small clips the
// same within 0.3 points).
#define INTRA_GATE 48
// A sub-sample vector must beat the whole-sample one it starts from by this
// many lambdas more than its bits (on bikes scaled to 1920x816, BD-rate
// against x264 ultrafast +5.9 % with none, +1.6 % with 2, +0.8 % with 4,
// +1.0 % with 8).
#define SUBPEL_BIAS 4
// CHOICE_ROUNDS, the choice pass's rounds, comes with the source (H264ComputeEncoder.choiceRounds).
// Intra_4x4 against Intra_16x16: its SADs and mode bits plus this many
// lambdas must be lower (on three clips 16 beat 4, 8, 12, 20 and 24).
#define I4_EXTRA 16
#ifdef PINTRA
#define P_INTRA true
#else
#define P_INTRA false
#endif

// Shared memory a work group bounds how many of a pass's groups a
// multiprocessor runs at once (docs/ARCHITECTURE.md, "The GPU encoder"), so
// what these passes keep there is packed. The source macroblock, four
// samples a word (row y's columns 4k..4k + 3 in word 4y + k); the
// prediction likewise.
shared uint sCurW[64];
int curAt(int i) { return int(bitfieldExtract(sCurW[i >> 2], 8 * (i & 3), 8)); }
#ifndef SEARCH
shared int sCurC[128];       // U then V, 8×8 each
shared uint sPredW[64];
int predAt(int i) { return int(bitfieldExtract(sPredW[i >> 2], 8 * (i & 3), 8)); }
shared int sPredC[128];
// The levels of 24 blocks, 16 each in raster order (luma by luma4x4BlkIdx,
// Cb 0-3, Cr 0-3), two a word (16 bits each, as the record keeps them).
shared uint sLevels[192];
void putLevels(int b, int i, int lo, int hi) { sLevels[b * 8 + (i >> 1)] = (uint(lo) & 0xffffu) | (uint(hi) << 16); }
int levelAt(int b, int i) { return bitfieldExtract(int(sLevels[b * 8 + (i >> 1)]), 16 * (i & 1), 16); }
shared int sNNZ[24];
shared int sDC[24];          // luma DC by block position (raster), then Cb, Cr DC
shared int sDCLevels[24];
shared uint sBest;
shared uint sBestC;
#ifdef INTER
shared int sScore[24];
shared uint sSadNow, sSadSkip;   // luma SADs of the reconstruction and of the P_Skip probe

#endif
#endif
#ifdef SEARCH
shared uint sSad[4];
shared ivec2 sCand[4];
shared bool sValid[4];
shared uint sBestCost;
shared ivec2 sBestMV;
shared int sPhase;
shared int sRound;
shared bool sStopped;
shared ivec2 sCentre;         // the sub-sample pass's ring centre         // the search: no diamond step cut off by the limit, no diagonal move
// The refinement's neighbour k (1-7: left, top, right, bottom, upper left,
// upper right, lower right); 0 and the rest: the macroblock itself.
ivec2 refineNeighbour(int k) {
    return k == 1 ? ivec2(-1, 0) : k == 2 ? ivec2(0, -1) : k == 3 ? ivec2(1, 0) : k == 4 ? ivec2(0, 1)
         : k == 5 ? ivec2(-1, -1) : k == 6 ? ivec2(1, -1) : k == 7 ? ivec2(1, 1) : ivec2(0);
}
// Candidate k of a diamond round: (0, -1), (-1, 0), (1, 0), (0, 1); of the diagonal round: (±1, ±1).
ivec2 diamond(int k) { return ivec2(k == 1 ? -1 : (k == 2 ? 1 : 0), k == 0 ? -1 : (k == 3 ? 1 : 0)); }
ivec2 diagonal(int k) { return ivec2((k & 1) != 0 ? 1 : -1, k >= 2 ? 1 : -1); }
#elif !defined(INTER)
// Intra_4x4: this macroblock's luma reconstruction block by block, each
// wave slot's SADs by mode, the modes.
shared int sRec4[256];
// Each wave slot's Intra_4x4 prediction line (predIndex): e[j], F3[j], F2[j], DC.
#define LINE4 37
#define LE 4     // e[j], j -4..8, at LE + j
#define LF3 17   // F3[j], j -4..8, at LF3 + j
#define LF2 30   // F2[j], j -4..5, at LF2 + j
#define LDC 36
shared int sLine[2 * LINE4];
shared uint sSad4[18];
shared int sNbrMode[8];
shared uint sCost4;
shared int sModes[16];
shared uint sBlk4[16];
// Intra_16x16 and chroma: each mode's SAD (luma 0-3, chroma 4-7), the DC and plane parameters.
shared uint sModeSad[8];
shared int sDC16;
shared ivec3 sPlane;
shared ivec3 sPlaneC[2];
shared int sTop[16];
shared int sLeft[16];
shared int sTopC[16];        // U 0-7, V 8-15
shared int sLeftC[16];
shared int sCorner[3];       // Y, U, V at (-1, -1)
#endif

int mbX, mbY, qp, qpc;


int picY(int x, int y) {
    int o = y * u_layout.z + x;
    return int(readByte(recon[o >> 2], o & 3));
}
int picC(int x, int y, int c) {
    int o = u_layout.w + y * u_layout.z + 2 * x + c;
    return int(readByte(recon[o >> 2], o & 3));
}

#ifdef INTER
// Four samples of row `row` of this macroblock's source from column x, packed in a word.
uint curWord(int row, int x) { return sCurW[row * 4 + (x >> 2)]; }

// The SAD of row `row` of the macroblock (`cur`, its 16 samples packed in
// four words) against the reference displaced by `d`: whole words realigned
// where the row lies inside the picture, else word by word as refWord reads
// them. No array indexed by a variable: NVIDIA keeps those in local memory.
int rowSAD(uvec4 cur, int row, ivec2 d) {
    int x0 = mbX * 16 + d.x, y = clamp(mbY * 16 + row + d.y, 0, u_size.w * 16 - 1);
    if (x0 >= 0 && x0 + 16 <= u_size.z * 16) {
        int o = y * u_layout.z + x0;
        int i = o >> 2;
        uint sh = uint(8 * (o & 3));
        uint w0 = ref[i], w1 = ref[i + 1], w2 = ref[i + 2], w3 = ref[i + 3];
        // The fifth word only when the row is not word aligned (then it lies inside the row).
        uint w4 = sh == 0u ? 0u : ref[i + 4];
        uvec4 a = sh == 0u ? uvec4(w0, w1, w2, w3)
                           : (uvec4(w0, w1, w2, w3) >> sh) | (uvec4(w1, w2, w3, w4) << (32u - sh));
        return sad4(cur.x, a.x) + sad4(cur.y, a.y) + sad4(cur.z, a.z) + sad4(cur.w, a.w);
    }
    return sad4(cur.x, refWord(x0, y)) + sad4(cur.y, refWord(x0 + 4, y)) + sad4(cur.z, refWord(x0 + 8, y))
         + sad4(cur.w, refWord(x0 + 12, y));
}

// rowSAD for a quarter-sample vector q.
int qRowSAD(uvec4 cur, int row, ivec2 q) {
    ivec2 w = q >> 2;
    int fx = q.x & 3, fy = q.y & 3;
    if (fx == 0 && fy == 0) return rowSAD(cur, row, w);
    ivec3 a, b;
    qpelPair(fx, fy, a, b);
    int x = mbX * 16 + w.x, y = mbY * 16 + row + w.y;
    uvec4 p = planeRow(a.x, x + a.y, y + a.z);
    if (a != b) p = avgUp(p, planeRow(b.x, x + b.y, y + b.z));
    return sad4(cur.x, p.x) + sad4(cur.y, p.y) + sad4(cur.z, p.z) + sad4(cur.w, p.w);
}

// The predictors a macroblock's vector is priced against, from its
// neighbours' vectors in record word `word` (quarter samples), as 8.4.1.3
// derives them from the final ones: the median predictor, the P_Skip
// vector (8.4.1.1) and the left neighbour's vector (the macroblock's own, `own`, where it has none).
void neighbourPredictors(int mb, int word, ivec2 own, out ivec2 mvp, out ivec2 skip, out ivec2 leftMV) {
    bool hasA = mbX > 0, hasB = rowAbove(mbY), hasC = hasB && mbX + 1 < u_size.z, hasD = mbX > 0 && hasB;
    ivec2 a = hasA ? unpackMV(mbs[(mb - 1) * MB_WORDS + word]) : ivec2(0);
    ivec2 b = hasB ? unpackMV(mbs[(mb - u_size.z) * MB_WORDS + word]) : ivec2(0);
    ivec2 c = hasC ? unpackMV(mbs[(mb - u_size.z + 1) * MB_WORDS + word])
                   : (hasD ? unpackMV(mbs[(mb - u_size.z - 1) * MB_WORDS + word]) : ivec2(0));
    bool cAvail = hasC || hasD;
    if (!hasB && !cAvail && hasA) { b = a; c = a; }
    int n = (hasA ? 1 : 0) + ((hasB || (!cAvail && hasA)) ? 1 : 0) + ((cAvail || (!hasB && hasA)) ? 1 : 0);
    if (n == 1) mvp = hasA ? a : (hasB ? b : c);
    else mvp = ivec2(max(min(a.x, b.x), min(max(a.x, b.x), c.x)), max(min(a.y, b.y), min(max(a.y, b.y), c.y)));
    skip = (!hasA || !hasB || a == ivec2(0) || b == ivec2(0)) ? ivec2(0) : mvp;
    leftMV = hasA ? a : own;
}


ivec2 prevVector(int x, int y) {
    if (x < 0 || y < 0 || x >= u_size.z || y >= u_size.w) return ivec2(0);
    return unpackMV(prevMBs[(y * u_size.z + x) * MB_WORDS + MB_MV]) / 4;
}
#else
int top(int i) { return i < 0 ? sCorner[0] : sTop[i]; }
int left(int i) { return i < 0 ? sCorner[0] : sLeft[i]; }
int topC(int i, int c) { return i < 0 ? sCorner[1 + c] : sTopC[c * 8 + i]; }
int leftC(int i, int c) { return i < 0 ? sCorner[1 + c] : sLeftC[c * 8 + i]; }

// Intra_16x16 prediction (8.3.3): 0 vertical, 1 horizontal, 2 DC, 3 plane.
int predictLuma(int mode, int x, int y, int dc, ivec3 plane) {
    if (mode == 0) return sTop[x];
    if (mode == 1) return sLeft[y];
    if (mode == 2) return dc;
    return clamp((plane.x + plane.y * (x - 7) + plane.z * (y - 7) + 16) >> 5, 0, 255);
}

int lumaDC(bool hasTop, bool hasLeft) {
    int s = 0;
    if (hasTop) for (int i = 0; i < 16; i++) s += sTop[i];
    if (hasLeft) for (int i = 0; i < 16; i++) s += sLeft[i];
    if (hasTop && hasLeft) return (s + 16) >> 5;
    if (hasTop || hasLeft) return (s + 8) >> 4;
    return 128;
}

ivec3 lumaPlane() {
    int h = 0, v = 0;
    for (int i = 0; i < 8; i++) {
        h += (i + 1) * (top(8 + i) - top(6 - i));
        v += (i + 1) * (left(8 + i) - left(6 - i));
    }
    return ivec3(16 * (left(15) + top(15)), (5 * h + 32) >> 6, (5 * v + 32) >> 6);
}

// Intra chroma DC of the 4×4 block at (bx, by) (8.3.4.1-3).
int chromaDC(int bx, int by, int c, bool hasTop, bool hasLeft) {
    int st = 0, sl = 0;
    for (int i = 0; i < 4; i++) {
        if (hasTop) st += sTopC[c * 8 + bx * 4 + i];
        if (hasLeft) sl += sLeftC[c * 8 + by * 4 + i];
    }
    bool both = (bx == 0 && by == 0) || (bx == 1 && by == 1);
    if (both) {
        if (hasTop && hasLeft) return (st + sl + 4) >> 3;
        if (hasLeft) return (sl + 2) >> 2;
        if (hasTop) return (st + 2) >> 2;
        return 128;
    }
    if (bx == 1) {   // top right block: top first
        if (hasTop) return (st + 2) >> 2;
        if (hasLeft) return (sl + 2) >> 2;
        return 128;
    }
    if (hasLeft) return (sl + 2) >> 2;   // bottom left block: left first
    if (hasTop) return (st + 2) >> 2;
    return 128;
}

ivec3 chromaPlane(int c) {
    int h = 0, v = 0;
    for (int i = 0; i < 4; i++) {
        h += (i + 1) * (topC(4 + i, c) - topC(2 - i, c));
        v += (i + 1) * (leftC(4 + i, c) - leftC(2 - i, c));
    }
    return ivec3(16 * (leftC(7, c) + topC(7, c)), (34 * h + 32) >> 6, (34 * v + 32) >> 6);
}

// Intra chroma prediction: 0 DC, 1 horizontal, 2 vertical, 3 plane.
int predictChroma(int mode, int x, int y, int c, bool hasTop, bool hasLeft, ivec3 plane) {
    if (mode == 0) return chromaDC(x >> 2, y >> 2, c, hasTop, hasLeft);
    if (mode == 1) return sLeftC[c * 8 + y];
    if (mode == 2) return sTopC[c * 8 + x];
    return clamp((plane.x + plane.y * (x - 3) + plane.z * (y - 3) + 16) >> 5, 0, 255);
}

int blkIndex(int bx, int by) { return (by >> 1) * 8 + (bx >> 1) * 4 + (by & 1) * 2 + (bx & 1); }

// Which neighbours Intra_4x4 block b has (8.3.1.2): top, left, top right
// (its own or substituted), the corner, and whether the top right samples
// may be read: not those of a macroblock written in the same dispatch (the
// top right macroblock's, block 5's, where it exists).
struct Blk4 { int x0; int y0; bool hasT; bool hasL; bool hasTR; bool readTR; bool hasZ; };

Blk4 blk4(int b) {
    Blk4 k;
    int bx = blkX(b), by = blkY(b);
    bool hasTop = rowAbove(mbY), hasLeft = mbX > 0;
    k.x0 = bx * 4; k.y0 = by * 4;
    k.hasT = by > 0 || hasTop;
    k.hasL = bx > 0 || hasLeft;
    k.hasZ = (bx > 0 && by > 0) || (by > 0 && hasLeft) || (bx > 0 && hasTop) || (hasTop && hasLeft);
    k.hasTR = by == 0 ? (bx < 3 ? hasTop : hasTop && mbX + 1 < u_size.z) : (bx < 3 && blkIndex(bx + 1, by - 1) < b);
    k.readTR = k.hasTR && b != 5;
    return k;
}

// Whether block b may be predicted in mode m without reading what may not be read.
bool mode4OK(int m, int b, Blk4 k) {
    return m == 2 || (m == 0 && k.hasT) || (m == 1 && k.hasL) || (m == 8 && k.hasL)
        || ((m == 3 || m == 7) && k.hasT && !(b == 5 && k.hasTR))
        || ((m == 4 || m == 5 || m == 6) && k.hasT && k.hasL && k.hasZ);
}

// Intra_4x4 prediction (8.3.1.2) through a line of each wave slot's block:
// its neighbours e[j] (j = 0 the corner p[-1, -1], 1 to 8 the top row
// p[j - 1, -1], -1 to -4 the left column p[-1, -j - 1]), their three-tap
// filter F3[j] = (e[j - 1] + 2 e[j] + e[j + 1] + 2) >> 2 (e[9] = e[8],
// e[-5] = e[-4]), their two-tap average F2[j] = (e[j] + e[j + 1] + 1) >> 1
// and the DC value. Every sample of every mode is one entry of the line
// (predIndex), so a prediction is one shared-memory read. Its layout
// (LINE4, LE, LF3, LF2, LDC) is by the shared arrays.

// A block's DC prediction from the sums of its top (st) and left (sl) neighbours.
int dc4(int st, int sl, Blk4 k) {
    return k.hasT && k.hasL ? (st + sl + 4) >> 3 : (k.hasL ? (sl + 2) >> 2 : (k.hasT ? (st + 2) >> 2 : 128));
}

// e[j] of the block (j clamped to -4..8), from this macroblock's
// reconstruction so far or the neighbours' (sTop, sLeft, sCorner); 0 where
// the sample may not be read (no mode that reads it is allowed).
int edge4(int j, Blk4 k, int bx, int by) {
    j = clamp(j, -4, 8);
    if (j > 0) {
        int i = j - 1;
        if (i >= 4 && !k.readTR) i = 3;   // top right not available: p[3, -1] instead
        if (!k.hasT) return 0;
        return by > 0 ? sRec4[(k.y0 - 1) * 16 + k.x0 + i] : sTop[k.x0 + i];
    }
    if (j < 0) {
        int i = -j - 1;
        if (!k.hasL) return 0;
        return bx > 0 ? sRec4[(k.y0 + i) * 16 + k.x0 - 1] : sLeft[k.y0 + i];
    }
    if (!k.hasZ) return 0;
    if (bx > 0 && by > 0) return sRec4[(k.y0 - 1) * 16 + k.x0 - 1];
    if (by > 0) return sLeft[k.y0 - 1];
    if (bx > 0) return sTop[k.x0 - 1];
    return sCorner[0];
}

// Where sample (x, y) of the block predicted in mode m (0-8, Table 8-2) lies in its line.
int predIndex(int m, int x, int y) {
    if (m == 0) return LE + x + 1;
    if (m == 1) return LE - y - 1;
    if (m == 2) return LDC;
    if (m == 3) return LF3 + x + y + 2;
    if (m == 4) return LF3 + x - y;
    if (m == 5) {
        int z = 2 * x - y, k = x - (y >> 1);
        if (z >= 0) return (z & 1) == 0 ? LF2 + k : LF3 + k;
        return z == -1 ? LF3 : LF3 + 1 - y;
    }
    if (m == 6) {
        int z = 2 * y - x, k = y - (x >> 1);
        if (z >= 0) return (z & 1) == 0 ? LF2 - k - 1 : LF3 - k;
        return z == -1 ? LF3 : LF3 + x - 1;
    }
    if (m == 7) {
        int k = x + (y >> 1);
        return (y & 1) == 0 ? LF2 + k + 1 : LF3 + k + 2;
    }
    int z = x + 2 * y, k = y + (x >> 1);
    if (z > 5) return LE - 4;
    if (z == 5) return LF3 - 4;
    return (z & 1) == 0 ? LF2 - k - 2 : LF3 - k - 2;
}


// Intra_4x4 mode of block `blk` of macroblock `m` as its record holds it; 2 (DC) when it is not Intra_4x4.
int recordMode(int m, int blk) {
    if (infoKind(mbs[m * MB_WORDS + MB_INFO]) != KIND_I4) return 2;
    return int((mbs[m * MB_WORDS + MB_LUMADC + (blk >> 3)] >> uint(4 * (blk & 7))) & 15u);
}
#endif

void main() {
    int t = int(gl_LocalInvocationIndex);
    qp = u_code.x;
    qpc = chromaQP(qp);
#ifdef INTER
    mbX = int(gl_WorkGroupID.x);
    mbY = int(gl_WorkGroupID.y);
    bool intra = false;
    bool i4 = false;
#else
    int d = u_code.w;
#ifdef PINTRA
    // Half the macroblocks, a checkerboard: phase d takes those with x + y ≡ d (mod 2).
    mbY = int(gl_WorkGroupID.y);
    mbX = 2 * int(gl_WorkGroupID.x) + ((mbY + d) & 1);
#else
#ifdef INTRA_WALK
    // The walk: work group y walks row y left to right, each macroblock once
    // the row above (in the slice) has done it; u_code.w is the picture's
    // tag, its count at progress[mbHeight + row] (the P_Skip decision's
    // counts, which IDR pictures leave unused).
    mbY = int(gl_WorkGroupID.y);
    uint tag = uint(d) & 0xffffu;
    uint seen = 0u;
    for (int walkX = 0; walkX < u_size.z; walkX++) {
    mbX = walkX;
    if (t == 0 && rowAbove(mbY)) {
        while (!countReached(seen, tag, mbX + 1)) seen = progress[u_size.w + mbY - 1];
    }
    memoryBarrierBuffer();
    barrier();
#else
    // Diagonal d of every slice at once (work group y the slice).
    int row = max(0, d - (u_size.z - 1)) + int(gl_WorkGroupID.x);
    mbY = int(gl_WorkGroupID.y) * u_sliceRows + row;
    mbX = d - row;
    if (mbY >= u_size.w) return;
#endif
#endif
    bool intra = true;
    bool i4 = false;
#endif
    int mb = mbY * u_size.z + mbX;
    int px = mbX * 16, py = mbY * 16;
#ifdef CHOOSE
    ivec2 cand[4];
    ivec2 mvp;
    {
        // The neighbours' vectors: refined (round 0), or their choice of the round before.
        ivec2 sv = unpackMV(mbs[mb * MB_WORDS + MB_REFINEMV]), skip, a;
        neighbourPredictors(mb, MB_REFINEMV + u_code.w, sv, mvp, skip, a);
        cand[0] = clamp(skip, ivec2(-4 * RANGE), ivec2(4 * RANGE));
        cand[1] = clamp(mvp, ivec2(-4 * RANGE), ivec2(4 * RANGE));
        cand[2] = sv;
        cand[3] = clamp(a, ivec2(-4 * RANGE), ivec2(4 * RANGE));
    }
    if (cand[0] == cand[2] && cand[1] == cand[2] && cand[3] == cand[2]) {
        // All four are the refinement's vector, whose SAD it left: no SAD to sum.
        if (t == 0) {
            ivec2 d = cand[2];
            mbs[mb * MB_WORDS + (u_code.w + 1 < CHOICE_ROUNDS ? MB_CHOSENMV + u_code.w : MB_MV)] = packMV(d);
            mbs[mb * MB_WORDS + MB_MVP] = mbs[mb * MB_WORDS + MB_SEARCHSAD] + uint(u_code.z * mvdBits(d, mvp));
        }
        return;
    }
#endif
#ifdef CHOOSE
    // Rounds after the first: where none of the neighbours' vectors moved in
    // the round before, the choice and its cost are those this macroblock
    // came to then (the same inputs), so the work group stops here.
    if (u_code.w > 0) {
        int nw = MB_REFINEMV + u_code.w;
        bool same = true;
        if (mbX > 0) same = same && mbs[(mb - 1) * MB_WORDS + nw] == mbs[(mb - 1) * MB_WORDS + nw - 1];
        if (rowAbove(mbY)) {
            same = same && mbs[(mb - u_size.z) * MB_WORDS + nw] == mbs[(mb - u_size.z) * MB_WORDS + nw - 1];
            if (mbX + 1 < u_size.z) same = same && mbs[(mb - u_size.z + 1) * MB_WORDS + nw] == mbs[(mb - u_size.z + 1) * MB_WORDS + nw - 1];
            if (mbX > 0) same = same && mbs[(mb - u_size.z - 1) * MB_WORDS + nw] == mbs[(mb - u_size.z - 1) * MB_WORDS + nw - 1];
        }
        if (same) {
            if (t == 0) mbs[mb * MB_WORDS + (u_code.w + 1 < CHOICE_ROUNDS ? MB_CHOSENMV + u_code.w : MB_MV)] = mbs[mb * MB_WORDS + nw];
            return;
        }
    }
#endif
#ifdef REFINE
    // Where the search stopped by itself and the seven neighbours found the
    // same vector, the walk would start there and stop at once.
    {
        uint own = mbs[mb * MB_WORDS + MB_SEARCHMV];
        bool same = (mbs[mb * MB_WORDS + MB_SEARCHSAD] & 0x10000u) != 0u;
        for (int k = 1; k < 8 && same; k++) {
            ivec2 at = ivec2(mbX, mbY) + refineNeighbour(k);
            if (at.x >= 0 && at.y >= 0 && at.x < u_size.z && at.y < u_size.w) same = mbs[(at.y * u_size.z + at.x) * MB_WORDS + MB_SEARCHMV] == own;
        }
        if (same) {
            if (t == 0) {
                mbs[mb * MB_WORDS + MB_REFINEMV] = own;
                mbs[mb * MB_WORDS + MB_MV] = own;
                mbs[mb * MB_WORDS + MB_SEARCHSAD] &= 0xffffu;
            }
            return;
        }
    }
#endif
#ifdef PINTRA
    // Intra_16x16 in a P picture, after the macroblock pass coded every
    // macroblock as P: left and top neighbours are of the other phase, so
    // their reconstruction is final when this one reads it (what reads the
    // top-left or top-right macroblock, of this phase, is left out: the
    // plane modes). A macroblock of the
    // second phase stays P where its right or lower neighbour became intra
    // (that one predicted from its reconstruction), and where P costs little.
    bool live = mbX < u_size.z;
    uint interCost = live ? mbs[mb * MB_WORDS + MB_MVP] : 0u;
    if (live && d == 1) {
        if (mbX + 1 < u_size.z && infoKind(mbs[(mb + 1) * MB_WORDS + MB_INFO]) != KIND_P16) live = false;
        if (mbY + 1 < u_size.w && rowAbove(mbY + 1) && infoKind(mbs[(mb + u_size.z) * MB_WORDS + MB_INFO]) != KIND_P16) live = false;
    }
    uint bias = uint(INTRA_BIAS * u_code.z);
    if (interCost <= uint(INTRA_GATE * u_code.z)) live = false;
    if (live) {
#endif

    // The source macroblock.
    {
        uint w = srcYWord(px + (t & 3) * 4, py + (t >> 2));
        sCurW[t] = w;
    }
#ifdef SEARCH
    if (t == 0) { sPhase = 0; sRound = 0; sStopped = true; }
#else
    sCurC[t] = srcC(mbX * 8 + (t & 7), mbY * 8 + (t >> 3), 0);
    sCurC[64 + t] = srcC(mbX * 8 + (t & 7), mbY * 8 + (t >> 3), 1);
    if (t == 0) { sBest = 0xffffffffu; sBestC = 0xffffffffu; }
#ifdef INTER
    if (t == 0) { sSadNow = 0u; sSadSkip = 0u; }
#endif
#endif

#ifdef SEARCH
#ifdef CHOOSE
    // The vector: the refinement's, the left neighbour's, or the predictor
    // or the P_Skip vector worked out from the neighbours' vectors (their final vectors are not
    // known yet; the raster-order pass derives the exact ones), whichever costs
    // least by SAD plus lambda times the bits of its difference from that
    // predictor. Ties go to the P_Skip vector, then the predictor. A pass of
    // its own (few registers, many work groups resident), in CHOICE_ROUNDS
    // rounds (u_code.w): the first reads the neighbours' refined vectors,
    // each next their choice of the round before (MB_CHOSENMV + round), so
    // the predictors it prices vectors against come nearer the final ones;
    // the last writes the vector into MB_MV and its cost into MB_MVP for
    // the macroblock pass.
    if (t < 4) sSad[t] = 0u;
    barrier();
    {
        int k = t >> 4, row = t & 15;
        uvec4 cur = uvec4(curWord(row, 0), curWord(row, 4), curWord(row, 8), curWord(row, 12));
        atomicAdd(sSad[k], uint(qRowSAD(cur, row, k == 0 ? cand[0] : (k == 1 ? cand[1] : (k == 2 ? cand[2] : cand[3])))));
    }
    barrier();
    if (t == 0) {
        ivec2 best = cand[0];
        uint cost = 0xffffffffu;
        for (int k = 0; k < 4; k++) {
            ivec2 d = cand[k];
            uint c = sSad[k] + uint(u_code.z * mvdBits(d, mvp));
            if (c < cost) { cost = c; best = d; }
        }
        // Every round writes the cost, which a round that stops early keeps.
        mbs[mb * MB_WORDS + (u_code.w + 1 < CHOICE_ROUNDS ? MB_CHOSENMV + u_code.w : MB_MV)] = packMV(best);
        mbs[mb * MB_WORDS + MB_MVP] = cost;
    }
#elif defined(SUBPEL)
    // The refined vector's eight half-sample neighbours (two rounds of four
    // candidates, 16 invocations a candidate, a row each), then the eight
    // quarter-sample neighbours of the best (two more): SAD plus lambda times
    // the bits of the difference from the predictor. Ties keep the vector
    // found first, the whole-sample one before any other.
    ivec2 mvp, skip, leftMV;
    // (From the copy in MB_MV, which no work group of this pass writes.)
    ivec2 start = unpackMV(mbs[mb * MB_WORDS + MB_MV]);
    neighbourPredictors(mb, MB_MV, start, mvp, skip, leftMV);
    if (t == 0) {
        sBestMV = start;
        sCentre = start;
        sBestCost = (mbs[mb * MB_WORDS + MB_SEARCHSAD] & 0xffffu) + uint(u_code.z * mvdBits(start, mvp));
    }
    barrier();
    uvec4 cur = uvec4(curWord(t & 15, 0), curWord(t & 15, 4), curWord(t & 15, 8), curWord(t & 15, 12));
    for (int step = 0; step < 4; step++) {
        if (t < 4) {
            // Ring position k: the four sides, then the four corners.
            int k = (step & 1) * 4 + t;
            ivec2 r = k < 4 ? diamond(k) : diagonal(k - 4);
            ivec2 c = sCentre + r * (step < 2 ? 2 : 1);
            sCand[t] = c;
            sValid[t] = all(lessThanEqual(abs(c), ivec2(4 * RANGE)));
            sSad[t] = 0u;
        }
        barrier();
        {
            int c = t >> 4, row = t & 15;
            if (sValid[c]) atomicAdd(sSad[c], uint(qRowSAD(cur, row, sCand[c])));
        }
        barrier();
        if (t == 0) {
            for (int c = 0; c < 4; c++) {
                if (!sValid[c]) continue;
                uint cost = sSad[c] + uint(u_code.z * (mvdBits(sCand[c], mvp) + SUBPEL_BIAS));
                if (cost < sBestCost) { sBestCost = cost; sBestMV = sCand[c]; }
            }
            // The quarter-sample ring goes round the best half-sample vector.
            if (step == 1) sCentre = sBestMV;
        }
        barrier();
    }
    if (t == 0) {
        mbs[mb * MB_WORDS + MB_REFINEMV] = packMV(sBestMV);
        mbs[mb * MB_WORDS + MB_SEARCHSAD] = sBestCost - uint(u_code.z * mvdBits(sBestMV, mvp));
    }
#else
    if (t == 0) sBestCost = 0xffffffffu;
    // Predictors (zero, and the vectors of this and the four next macroblocks
    // in the previous picture), then a diamond walk from the best of them,
    // then its diagonal neighbours: four candidates a round, 16 invocations
    // (a row each) per candidate.
    // Each invocation sums one row of the macroblock, always the same: it keeps that row of the source.
    barrier();
    uvec4 cur = uvec4(curWord(t & 15, 0), curWord(t & 15, 4), curWord(t & 15, 8), curWord(t & 15, 12));
    int round = 0;
    for (;;) {
        if (t < 4) {
            sSad[t] = 0u;
            ivec2 c;
            bool valid = true;
            if (round < 2) {
                int k = round * 4 + t;
                c = ivec2(0);
#ifdef REFINE
                ivec2 at = ivec2(mbX, mbY) + refineNeighbour(k);
                bool inside = at.x >= 0 && at.y >= 0 && at.x < u_size.z && at.y < u_size.w;
                if (inside) c = unpackMV(mbs[(at.y * u_size.z + at.x) * MB_WORDS + MB_SEARCHMV]) / 4;
                valid = k < 8 && inside;
#else
                if (k == 1) c = prevVector(mbX, mbY);
                if (k == 2) c = prevVector(mbX - 1, mbY);
                if (k == 3) c = prevVector(mbX, mbY - 1);
                if (k == 4) c = prevVector(mbX + 1, mbY);
                if (k == 5) c = prevVector(mbX, mbY + 1);
                valid = k < 6;
#endif
                c = clamp(c, ivec2(-RANGE), ivec2(RANGE));
            } else {
                ivec2 d = sPhase == 0 ? diamond(t) : diagonal(t);
                c = sBestMV + d;
                valid = all(lessThanEqual(abs(c), ivec2(RANGE)));
            }
            sCand[t] = c;
            sValid[t] = valid;
        }
        barrier();
        {
            int c = t >> 4, row = t & 15;
            if (sValid[c]) {
                atomicAdd(sSad[c], uint(rowSAD(cur, row, sCand[c])));
            }
        }
        barrier();
        if (t == 0) {
            bool moved = false;
            for (int c = 0; c < 4; c++) {
                if (!sValid[c]) continue;
                ivec2 d = sCand[c];
                uint cost = sSad[c] + uint(u_code.z * (seBits(4 * d.x) + seBits(4 * d.y)));
                if (cost < sBestCost) { sBestCost = cost; sBestMV = d; moved = true; }
            }
            // Rounds 0-1: predictors; then the diamond while it moves (16 steps at most); then one diagonal round.
            int next = round + 1;
            if (round >= 2) {
                if ((sPhase == 0 && round >= 17 && moved) || (sPhase == 1 && moved)) sStopped = false;
#ifdef REFINE
                // The refinement: sixteen diamond steps at most, as the search, and no
                // diagonal round (on bikes at 1920x816, BD-rate against x264 ultrafast
                // +50.5 % with four, +48.2 % with eight, +44.4 % with sixteen, at no
                // measurable cost: most work groups stop before their first step).
                if (sPhase == 0 && (!moved || round >= 17)) sPhase = 2;
#else
                if (sPhase == 0 && (!moved || round >= 17)) sPhase = 1;
                else if (sPhase == 1) sPhase = 2;
#endif
            }
            sRound = next;
        }
        barrier();
        if (sPhase == 2) break;
        round = sRound;
    }
#ifdef REFINE
    if (t == 0) {
        mbs[mb * MB_WORDS + MB_REFINEMV] = packMV(sBestMV * 4);
        mbs[mb * MB_WORDS + MB_MV] = packMV(sBestMV * 4);
        mbs[mb * MB_WORDS + MB_SEARCHSAD] = sBestCost - uint(u_code.z * (seBits(4 * sBestMV.x) + seBits(4 * sBestMV.y)));
    }
#else
    if (t == 0) {
        mbs[mb * MB_WORDS + MB_SEARCHMV] = packMV(sBestMV * 4);
        mbs[mb * MB_WORDS + MB_SEARCHSAD] = (sBestCost - uint(u_code.z * (seBits(4 * sBestMV.x) + seBits(4 * sBestMV.y)))) | (sStopped ? 0x10000u : 0u);
    }
#endif
#endif
#elif defined(INTER)
    // The vector and its cost, as the CHOOSE pass left them.
    ivec2 mv = unpackMV(mbs[mb * MB_WORDS + MB_MV]);
    uint interCost = mbs[mb * MB_WORDS + MB_MVP];
    {
        uint w = predWord(px + (t & 3) * 4, py + (t >> 2), mv);
        sPredW[t] = w;
    }
    {
        int cx = mbX * 8 + (t & 7), cy = mbY * 8 + (t >> 3);
        for (int c = 0; c < 2; c++) sPredC[c * 64 + t] = predChroma(cx, cy, mv, c);
    }
    barrier();
    int lumaMode = 0, chromaMode = 0;
#else
    bool hasTop = rowAbove(mbY), hasLeft = mbX > 0;
    if (t < 16) {
        sTop[t] = hasTop ? picY(px + t, py - 1) : 0;
        sLeft[t] = hasLeft ? picY(px - 1, py + t) : 0;
        int c = t >> 3, i = t & 7;
        sTopC[t] = hasTop ? picC(mbX * 8 + i, mbY * 8 - 1, c) : 0;
        sLeftC[t] = hasLeft ? picC(mbX * 8 - 1, mbY * 8 + i, c) : 0;
    }
    if (t < 3) sCorner[t] = hasTop && hasLeft ? (t == 0 ? picY(px - 1, py - 1) : picC(mbX * 8 - 1, mbY * 8 - 1, t - 1)) : 0;
    barrier();
    // Mode decision by SAD: every invocation adds four luma and two chroma
    // samples' differences for every mode; the lowest SAD wins (the lower
    // mode on a tie).
    bool planes = hasTop && hasLeft && !P_INTRA;
    if (t < 8) sModeSad[t] = 0u;
    if (t == 8) sDC16 = lumaDC(hasTop, hasLeft);
    if (t == 9) sPlane = planes ? lumaPlane() : ivec3(0);
    if (t == 10 || t == 11) sPlaneC[t - 10] = planes ? chromaPlane(t - 10) : ivec3(0);
    barrier();
    {
        uint s0 = 0u, s1 = 0u, s2 = 0u, s3 = 0u;
        int y = t >> 2, dc = sDC16;
        ivec3 plane = sPlane;
        for (int k = 0; k < 4; k++) {
            int x = (t & 3) * 4 + k, c = curAt(y * 16 + x);
            s0 += uint(abs(c - sTop[x]));
            s1 += uint(abs(c - sLeft[y]));
            s2 += uint(abs(c - dc));
            s3 += uint(abs(c - clamp((plane.x + plane.y * (x - 7) + plane.z * (y - 7) + 16) >> 5, 0, 255)));
        }
        atomicAdd(sModeSad[0], s0); atomicAdd(sModeSad[1], s1); atomicAdd(sModeSad[2], s2);
        if (planes) atomicAdd(sModeSad[3], s3);
        uint c0 = 0u, c1 = 0u, c2 = 0u, c3 = 0u;
        int cx = t & 7, cy = t >> 3;
        for (int c = 0; c < 2; c++) {
            int v = sCurC[c * 64 + t];
            ivec3 cp = sPlaneC[c];
            c0 += uint(abs(v - chromaDC(cx >> 2, cy >> 2, c, hasTop, hasLeft)));
            c1 += uint(abs(v - sLeftC[c * 8 + cy]));
            c2 += uint(abs(v - sTopC[c * 8 + cx]));
            c3 += uint(abs(v - clamp((cp.x + cp.y * (cx - 3) + cp.z * (cy - 3) + 16) >> 5, 0, 255)));
        }
        atomicAdd(sModeSad[4], c0); atomicAdd(sModeSad[5], c1); atomicAdd(sModeSad[6], c2);
        if (planes) atomicAdd(sModeSad[7], c3);
    }
    barrier();
    if (t == 0) {
        uint best = 0xffffffffu, bestC = 0xffffffffu;
        for (int m = 0; m < 4; m++) {
            bool ok = (m == 0 && hasTop) || (m == 1 && hasLeft) || m == 2 || (m == 3 && planes);
            if (ok) best = min(best, (sModeSad[m] << 2) | uint(m));
            bool okC = m == 0 || (m == 1 && hasLeft) || (m == 2 && hasTop) || (m == 3 && planes);
            if (okC) bestC = min(bestC, (sModeSad[4 + m] << 2) | uint(m));
        }
        sBest = best; sBestC = bestC;
    }
    if (t < 16) sNNZ[t] = 0;
#ifndef PINTRA
    if (t == 0) sCost4 = uint(I4_EXTRA * u_code.z);
    if (t < 16) sBlk4[t] = 0xffffffffu;
#endif
    barrier();
    uint cost16 = sBest >> 2;
#ifndef PINTRA

    // Intra_4x4 estimated first, every block at once in its vertical,
    // horizontal and DC modes (the blocks' neighbours inside the macroblock
    // taken from the source): the exact pass below, all nine modes, runs only
    // where the estimate beats Intra_16x16.
    if (t < 48) {
        int b = t / 3, m = t - 3 * b;
        Blk4 k = blk4(b);
        if (mode4OK(m, b, k)) {
            // The block's top (0-3) and left (4-7) neighbours: the source
            // inside the macroblock, the neighbours' reconstruction outside.
            int e[8];
            for (int i = 0; i < 4; i++) {
                e[i] = k.y0 > 0 ? curAt((k.y0 - 1) * 16 + k.x0 + i) : sTop[k.x0 + i];
                e[4 + i] = k.x0 > 0 ? curAt((k.y0 + i) * 16 + k.x0 - 1) : sLeft[k.y0 + i];
            }
            int st = e[0] + e[1] + e[2] + e[3], sl = e[4] + e[5] + e[6] + e[7];
            int dc = dc4(st, sl, k);
            uint sad = 0u;
            for (int i = 0; i < 16; i++) {
                int x = i & 3, y = i >> 2;
                int p = m == 0 ? e[x] : (m == 1 ? e[4 + y] : dc);
                sad += uint(abs(curAt((k.y0 + y) * 16 + k.x0 + x) - p));
            }
            atomicMin(sBlk4[b], sad + (m == 2 ? 1u : 4u) * uint(u_code.z));
        }
    }
    barrier();
    uint estimate4 = uint(I4_EXTRA * u_code.z);
    for (int b = 0; b < 16; b++) estimate4 += sBlk4[b];
    bool exact4 = estimate4 < cost16;
#endif

    // Intra_4x4: the 16 blocks, each predicted from the reconstruction of the
    // blocks before it (SAD plus lambda times its mode's bits), transformed,
    // quantised and reconstructed here as a decoder will, in ten waves of one
    // or two blocks (32 invocations a block for the prediction line and the
    // modes' SADs, one for the rest: three barriers a wave). Samples of macroblocks written in the same
    // dispatch are not read: the top right macroblock's (block 5's modes 3
    // and 7 left out where it exists).
#ifndef PINTRA
    if (exact4) {
        Quantiser q4 = quantiser(qp, 2);
        // The neighbour macroblocks' Intra_4x4 modes next to this one (left: its blocks (3, y), top: (x, 3)).
        if (t < 4) sNbrMode[t] = hasLeft ? recordMode(mb - 1, blkIndex(3, t)) : 2;
        else if (t < 8) sNbrMode[t] = hasTop ? recordMode(mb - u_size.z, blkIndex(t - 4, 3)) : 2;
        // The blocks in waves w = x + 2y (ten): a block's left, top, top-right
        // and top-left neighbours are in earlier waves, so the one or two
        // blocks of a wave are worked out together, 32 invocations each.
        int slot = t >> 5, lt = t & 31, line = slot * LINE4;
        for (int w = 0; w < 10; w++) {
            int byLo = max(0, (w - 2) / 2), byHi = min(3, w / 2);
            int by = byLo + slot, bx = w - 2 * by;
            bool here = by <= byHi && bx >= 0 && bx < 4;
            int b = here ? blkIndex(bx, by) : 0;
            Blk4 k = blk4(b);
            int x0 = k.x0, y0 = k.y0;
            bool hasT = k.hasT, hasL = k.hasL;
            // Its prediction line: e on invocations 0-12 (and F2 on 0-9), F3 on 13-25, DC on 26.
            if (here && lt < 13) {
                int j = lt - 4, e = edge4(j, k, bx, by);
                sLine[line + LE + j] = e;
                if (j <= 5) sLine[line + LF2 + j] = (e + edge4(j + 1, k, bx, by) + 1) >> 1;
            } else if (here && lt < 26) {
                int j = lt - 17;
                sLine[line + LF3 + j] = (edge4(j - 1, k, bx, by) + 2 * edge4(j, k, bx, by) + edge4(j + 1, k, bx, by) + 2) >> 2;
            } else if (here && lt == 26) {
                int st = 0, sl = 0;
                for (int i = 1; i <= 4; i++) { st += edge4(i, k, bx, by); sl += edge4(-i, k, bx, by); }
                sLine[line + LDC] = dc4(st, sl, k);
            } else if (lt >= 27) {
                sSad4[slot * 9 + (lt - 27) * 2] = 0u;
                if (lt < 31) sSad4[slot * 9 + (lt - 27) * 2 + 1] = 0u;
            }
            barrier();
            // Each mode's SAD, 144 (mode, sample) pairs over the block's invocations.
            if (here) {
                for (int p = lt; p < 144; p += 32) {
                    int m = p >> 4, i = p & 15;
                    if (mode4OK(m, b, k))
                        atomicAdd(sSad4[slot * 9 + m], uint(abs(curAt((y0 + (i >> 2)) * 16 + x0 + (i & 3)) - sLine[line + predIndex(m, i & 3, i >> 2)])));
                }
            }
            barrier();
            // One invocation a block codes it: the mode a decoder predicts
            // (8.3.1.1, from the neighbours as they are now), the cheapest
            // mode, then its residual transformed, quantised and
            // reconstructed as a decoder will, in registers.
            if (here && lt == 0) {
                int predMode = 2;
                if (hasT && hasL)
                    predMode = min(bx > 0 ? sModes[blkIndex(bx - 1, by)] : sNbrMode[by],
                                   by > 0 ? sModes[blkIndex(bx, by - 1)] : sNbrMode[4 + bx]);
                uint best = 0xffffffffu;
                for (int m = 0; m < 9; m++) {
                    if (!mode4OK(m, b, k)) continue;
                    best = min(best, ((sSad4[slot * 9 + m] + (m == predMode ? 1u : 4u) * uint(u_code.z)) << 4) | uint(m));
                }
                int mode = int(best & 15u);
                sModes[b] = mode;
                atomicAdd(sCost4, best >> 4);
                int r[16], p[16];
                for (int i = 0; i < 16; i++) {
                    p[i] = sLine[line + predIndex(mode, i & 3, i >> 2)];
                    r[i] = curAt((y0 + (i >> 2)) * 16 + x0 + (i & 3)) - p[i];
                }
                forward4x4(r);
                int count = 0, lo = 0;
                for (int i = 0; i < 16; i++) {
                    int l = quantWith(q4, r[i], i);
                    if ((i & 1) == 0) lo = l; else putLevels(b, i - 1, lo, l);
                    if (l != 0) count++;
                    r[i] = dequantWith(q4, l, i);
                }
                sNNZ[b] = count;
                inverse4x4(r);
                for (int i = 0; i < 16; i++) sRec4[(y0 + (i >> 2)) * 16 + x0 + (i & 3)] = clamp(p[i] + r[i], 0, 255);
            }
            barrier();
        }
    }
    i4 = exact4 && sCost4 < cost16;
#endif
#ifdef PINTRA
    // Intra only where it costs less than P by more than the bias.
    if (cost16 + bias < interCost) {
#endif
    int lumaMode = int(sBest & 3u), chromaMode = int(sBestC & 3u);
    {
        int dc = sDC16;
        ivec3 plane = sPlane;
        uint w = 0u;
        for (int k = 0; k < 4; k++) {
            int i = t * 4 + k;
            w |= uint(predictLuma(lumaMode, i & 15, i >> 4, dc, plane)) << uint(8 * k);
        }
        sPredW[t] = w;
        for (int c = 0; c < 2; c++)
            sPredC[c * 64 + t] = predictChroma(chromaMode, t & 7, t >> 3, c, hasTop, hasLeft, sPlaneC[c]);
    }
    barrier();
    ivec2 mv = ivec2(0);
#endif
#ifndef SEARCH

    // Forward transform and quantisation: luma blocks on invocations 0-15, chroma on 16-23.
    int deadzone = intra ? 2 : 1;
    // (Intra_4x4 luma blocks were transformed and reconstructed block by block above.)
    if (t < 24 && !(i4 && t < 16)) {
        int r[16];
        bool luma = t < 16;
        int bx = luma ? blkX(t) * 4 : ((t - 16) & 1) * 4;
        int by = luma ? blkY(t) * 4 : (((t - 16) >> 1) & 1) * 4;
        int c = (t - 16) >> 2;
        for (int i = 0; i < 16; i++) {
            int x = bx + (i & 3), y = by + (i >> 2);
            r[i] = luma ? curAt(y * 16 + x) - predAt(y * 16 + x) : sCurC[c * 64 + y * 8 + x] - sPredC[c * 64 + y * 8 + x];
        }
        forward4x4(r);
        bool dcApart = !luma || intra;
        if (luma && intra) sDC[blkY(t) * 4 + blkX(t)] = r[0];
        if (!luma) sDC[t] = r[0];
        int count = 0;
        Quantiser q = quantiser(luma ? qp : qpc, deadzone);
        for (int i = 0; i < 16; i++) {
            int l = (i == 0 && dcApart) ? 0 : quantWith(q, r[i], i);
            if ((i & 1) == 1) putLevels(t, i - 1, r[i - 1], l);
            r[i] = l;
            if (l != 0) count++;
        }
        sNNZ[t] = count;
#ifdef INTER
        // How much the block's levels are worth keeping (x264's rule).
        sScore[t] = decimationScore(r, luma);
#endif
    }
    barrier();
#ifdef INTER
    // Decimation: an 8×8 luma quadrant whose blocks score under 4 in all,
    // every luma block when the macroblock scores under 6, and a chroma
    // component's AC when its four blocks score under 7, are dropped: a few
    // isolated ±1s cost more bits than they return in quality.
    if (t < 24) {
        bool drop;
        if (t < 16) {
            int q = t & ~3, total = 0;
            for (int b = 0; b < 16; b++) total += sScore[b];
            drop = sScore[q] + sScore[q + 1] + sScore[q + 2] + sScore[q + 3] < 4 || total < 6;
        } else {
            int c = 16 + ((t - 16) & ~3);
            drop = sScore[c] + sScore[c + 1] + sScore[c + 2] + sScore[c + 3] < 7;
        }
        if (drop) {
            for (int i = 0; i < 8; i++) sLevels[t * 8 + i] = 0u;
            sNNZ[t] = 0;
        }
    }
    barrier();
#endif
    if (t == 24 && intra && !i4) {
        int dc[16];
        for (int i = 0; i < 16; i++) dc[i] = sDC[i];
        quantLumaDC(dc, qp);
        for (int i = 0; i < 16; i++) sDCLevels[i] = dc[i];
        dequantLumaDC(dc, qp);
        for (int i = 0; i < 16; i++) sDC[i] = dc[i];
    }
    if (t == 25 || t == 26) {
        int c = t - 25;
        int dc[4];
        for (int i = 0; i < 4; i++) dc[i] = sDC[16 + c * 4 + i];
        quantChromaDC(dc, qpc, intra);
        for (int i = 0; i < 4; i++) sDCLevels[16 + c * 4 + i] = dc[i];
        dequantChromaDC(dc, qpc);
        for (int i = 0; i < 4; i++) sDC[16 + c * 4 + i] = dc[i];
    }
    barrier();

    // Coded block pattern (7.4.5): every invocation derives the same value.
    int cbpLuma = 0;
    for (int b = 0; b < 16; b++)
        if (sNNZ[b] != 0) cbpLuma |= (intra && !i4) ? 15 : (1 << (b >> 2));
    bool chromaAC = false, chromaDCs = false;
    for (int b = 16; b < 24; b++) {
        if (sNNZ[b] != 0) chromaAC = true;
        if (sDCLevels[b] != 0) chromaDCs = true;
    }
    int cbp = cbpLuma | ((chromaAC ? 2 : (chromaDCs ? 1 : 0)) << 4);

    // Reconstruction (8.5.12): dequantise, inverse transform, add the prediction.
    if (t < 24) {
        bool luma = t < 16;
        int d[16];
        Quantiser q = quantiser(luma ? qp : qpc, 1);
        for (int i = 0; i < 16; i++) d[i] = dequantWith(q, levelAt(t, i), i);
        if (luma && intra) d[0] = sDC[blkY(t) * 4 + blkX(t)];
        if (!luma) d[0] = sDC[t];
        inverse4x4(d);
        if (luma) {
            int bx = blkX(t) * 4, by = blkY(t) * 4;
            uint sad = 0u;
            for (int y = 0; y < 4; y++) {
                uint word = 0u;
                for (int x = 0; x < 4; x++) {
                    int v = clamp(predAt((by + y) * 16 + bx + x) + d[y * 4 + x], 0, 255);
#ifndef INTER
                    if (i4) v = sRec4[(by + y) * 16 + bx + x];
#endif
                    sad += uint(abs(v - curAt((by + y) * 16 + bx + x)));
                    word |= uint(v) << uint(8 * x);
                }
                recon[((py + by + y) * u_layout.z + px + bx) >> 2] = word;
            }
#ifdef INTER
            atomicAdd(sSadNow, sad);
#endif
        } else {
            int b = (t - 16) & 3, c = (t - 16) >> 2;
            int bx = (b & 1) * 4, by = (b >> 1) * 4;
            for (int i = 0; i < 16; i++) {
                int o = c * 64 + (by + (i >> 2)) * 8 + bx + (i & 3);
                sPredC[o] = clamp(sPredC[o] + d[i], 0, 255);   // the reconstruction over the prediction
            }
        }
    }
    barrier();
    if (t < 32) {
        // Interleaved UV rows of the chroma picture: 8 rows of 16 bytes, four words each.
        int row = t >> 2, quarter = t & 3;
        uint word = 0u;
        for (int k = 0; k < 2; k++) {
            int o = row * 8 + quarter * 2 + k;
            word |= (uint(sPredC[o]) | (uint(sPredC[64 + o]) << 8)) << uint(16 * k);
        }
        recon[(u_layout.w + (mbY * 8 + row) * u_layout.z + mbX * 16 + quarter * 4) >> 2] = word;
    }

    // The record for the entropy pass.
    int rec = mb * MB_WORDS;
    if (t < 24) {
        int word = t < 16 ? MB_LUMA + t * 8 : MB_CHROMAAC + (t - 16) * 8;
        for (int k = 0; k < 8; k++) {
            int lo = levelAt(t, zigzag(2 * k)), hi = levelAt(t, zigzag(2 * k + 1));
            mbs[rec + word + k] = (uint(lo) & 0xffffu) | (uint(hi) << 16);
        }
    } else if (t < 32) {
        int k = t - 24;   // luma DC words 0-7, zig-zag order
        int lo = sDCLevels[zigzag(2 * k)], hi = sDCLevels[zigzag(2 * k + 1)];
        uint w = intra ? ((uint(lo) & 0xffffu) | (uint(hi) << 16)) : 0u;
#ifndef INTER
        // Intra_4x4: the blocks' modes, four bits each, in the first two words.
        if (i4) {
            w = 0u;
            if (k < 2) for (int j = 0; j < 8; j++) w |= uint(sModes[k * 8 + j]) << uint(4 * j);
        }
#endif
        mbs[rec + MB_LUMADC + k] = w;
    } else if (t < 36) {
        int k = t - 32;   // chroma DC: Cb 0-1, Cr 2-3
        int lo = sDCLevels[16 + 2 * k], hi = sDCLevels[16 + 2 * k + 1];
        mbs[rec + MB_CHROMADC + k] = (uint(lo) & 0xffffu) | (uint(hi) << 16);
    } else if (t < 42) {
        int k = t - 36;   // total_coeff bytes
        uint w = 0u;
        for (int j = 0; j < 4; j++) w |= uint(sNNZ[k * 4 + j]) << uint(8 * j);
        mbs[rec + MB_NNZ + k] = w;
    } else if (t == 42) {
        mbs[rec + MB_INFO] = packInfo(intra ? (i4 ? KIND_I4 : KIND_I16) : KIND_P16, false, lumaMode, chromaMode, cbp);
        mbs[rec + MB_MV] = packMV(mv);
        // P macroblocks leave their cost here for the intra pass (the raster-order pass writes the predictor over it).
#ifdef INTER
        mbs[rec + MB_MVP] = interCost;
#else
        mbs[rec + MB_MVP] = 0u;
#endif
        // (P pictures: the word holds the search's vector, which neighbours still read; the finish pass writes the run.)
        if (intra) mbs[rec + MB_SKIPRUN] = 0u;
    }
#ifdef INTER
    // The P_Skip probe, for the raster-order pass's decision
    // (h264deblock.comp): at the P_Skip vector the neighbours' choices give
    // (before that pass makes their vectors final; there, where the final
    // one is the same, the decision reads this instead of probing in the
    // chain), the luma SAD there less the reconstruction's, and whether the
    // residual quantises to nothing after decimation (as above). That last
    // only where the SAD leaves the skip a chance (within λ times the bits P
    // takes beyond a skip, by the neighbours' choices): elsewhere it is left
    // unknown, and the decision probes in the chain if the final bits give
    // the skip a chance after all. Where the vector is the macroblock's own,
    // the pass above was the probe.
    ivec2 mvpN, skipN, leftN;
    neighbourPredictors(mb, MB_MV, mv, mvpN, skipN, leftN);
    bool probe = skipN != mv;
    if (probe) {
        uint w = predWord(px + (t & 3) * 4, py + (t >> 2), skipN);
        sPredW[t] = w;
    }
    barrier();
    if (probe && t < 16) {
        int bx = blkX(t) * 4, by = blkY(t) * 4;
        uint sad = 0u;
        for (int i = 0; i < 16; i++) {
            int x = bx + (i & 3), y = by + (i >> 2);
            sad += uint(abs(curAt(y * 16 + x) - predAt(y * 16 + x)));
        }
        atomicAdd(sSadSkip, sad);
    }
    barrier();
    bool full = probe && sSadSkip <= sSadNow + uint(u_code.z * (2 + mvdBits(mv, mvpN)));
    if (full) {
        int cx = mbX * 8 + (t & 7), cy = mbY * 8 + (t >> 3);
        for (int c = 0; c < 2; c++) sPredC[c * 64 + t] = predChroma(cx, cy, skipN, c);
    }
    barrier();
    if (full && t < 24) {
        int r[16];
        bool luma = t < 16;
        int bx = luma ? blkX(t) * 4 : ((t - 16) & 1) * 4;
        int by = luma ? blkY(t) * 4 : (((t - 16) >> 1) & 1) * 4;
        int c = (t - 16) >> 2;
        for (int i = 0; i < 16; i++) {
            int x = bx + (i & 3), y = by + (i >> 2);
            r[i] = luma ? curAt(y * 16 + x) - predAt(y * 16 + x) : sCurC[c * 64 + y * 8 + x] - sPredC[c * 64 + y * 8 + x];
        }
        forward4x4(r);
        if (!luma) sDC[t] = r[0];
        Quantiser q = quantiser(luma ? qp : qpc, 1);
        for (int i = 0; i < 16; i++) r[i] = (i == 0 && !luma) ? 0 : quantWith(q, r[i], i);
        sScore[t] = decimationScore(r, luma);
    }
    barrier();
    if (t == 0) {
        int margin = int(sSadSkip) - int(sSadNow);
        uint state = probe ? (full ? PROBE_FULL : PROBE_UNKNOWN) : (cbp == 0 ? PROBE_EMPTY : PROBE_FULL);
        if (full) {
            int chromaDC[8];
            for (int i = 0; i < 8; i++) chromaDC[i] = sDC[16 + i];
            if (residualVanishes(sScore, chromaDC, qpc)) state = PROBE_EMPTY;
        }
        mbs[rec + MB_PROBEMV] = packMV(skipN);
        mbs[rec + MB_PROBE] = packProbe(state, margin);
    }
#endif
#endif
#ifdef PINTRA
    }
    }
#endif
#ifdef INTRA_WALK
    // The macroblock is done: its writes visible, then its count.
    memoryBarrierBuffer();
    barrier();
    if (t == 0) atomicExchange(progress[u_size.w + mbY], countWord(tag, mbX + 1));
    }
#endif
}
