#version 310 es
// H.264 encoder, macroblock analysis and reconstruction (docs/ARCHITECTURE.md,
// "The GPU encoder"): one work group of 64 invocations per macroblock.
// INTRA: Intra_16x16 over a wavefront (u_code.w is the diagonal x + y this
// dispatch runs, so left, top and top-left neighbours are reconstructed).
// INTER + SEARCH: P_L0_16x16 motion search, all macroblocks at once: a
// full-sample search (predictors and a coarse grid, then every vector within ±4 of the best),
// then half and quarter samples; it leaves the vector and its SATD in the record.
// INTER + DECIDE: over a wavefront of diagonals x + 2y (u_code.w >> 3), so the
// neighbours' final vectors give the exact predictor and P_Skip vector: P_Skip
// when its residual quantises to nothing, else the searched or the skip vector,
// or Intra_16x16 where that predicts better.
// INTRA and DECIDE transform, quantise, reconstruct into the current picture and
// write the macroblock's record for the entropy pass.
layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Src { uint src[]; };
layout(std430, binding = 1) buffer Recon { uint recon[]; };
layout(std430, binding = 3) buffer MBs { uint mbs[]; };
#ifdef INTER
layout(std430, binding = 2) readonly buffer Ref { uint ref[]; };
layout(std430, binding = 4) readonly buffer Prev { uint prevMBs[]; };
#endif

uniform ivec4 u_size;    // width, height, MBs across, MBs down
uniform ivec4 u_layout;  // source row bytes, source UV offset, picture row bytes, picture UV offset
uniform ivec4 u_code;    // qp, P slice, lambda, INTRA: wavefront diagonal; INTER: 1 quarter-sample motion, 2 decimation, 4 Intra_16x16 in P, diagonal << 3

#define RANGE 16
#define WIN 48

shared int sCur[256];
shared int sCurC[128];       // U then V, 8×8 each
shared int sPred[256];
shared int sPredC[128];
shared int sLevels[384];     // 24 blocks × 16, raster order: luma by luma4x4BlkIdx, Cb 0-3, Cr 0-3
shared int sNNZ[24];
shared int sDC[24];          // luma DC by block position (raster), then Cb, Cr DC
shared int sDCLevels[24];
shared int sReconC[128];
shared uint sBest;
shared uint sBestC;
#ifdef INTER
shared int sWin[WIN * WIN];
shared ivec2 sCentre;
#endif
#if !defined(SEARCH)
shared int sTop[16];
shared int sLeft[16];
shared int sTopC[16];        // U 0-7, V 8-15
shared int sLeftC[16];
shared int sCorner[3];       // Y, U, V at (-1, -1)
#endif

int mbX, mbY, qp, qpc;

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
int picY(int x, int y) {
    int o = y * u_layout.z + x;
    return int(readByte(recon[o >> 2], o & 3));
}
int picC(int x, int y, int c) {
    int o = u_layout.w + y * u_layout.z + 2 * x + c;
    return int(readByte(recon[o >> 2], o & 3));
}

#ifdef INTER
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

int seBits(int v) {
    uint k = v > 0 ? uint(2 * v) : uint(-2 * v + 1);   // codeNum + 1
    return 2 * findMSB(k) + 1;
}

uint sadAt(ivec2 d) {
    int s = 0;
    int base = (d.y + RANGE) * WIN + d.x + RANGE;
    for (int y = 0; y < 16; y++)
        for (int x = 0; x < 16; x++) s += abs(sCur[y * 16 + x] - sWin[base + y * WIN + x]);
    return uint(s);
}

uint costAt(ivec2 d) {
    return sadAt(d) + uint(u_code.z * (seBits(4 * d.x) + seBits(4 * d.y)));
}

ivec2 prevVector(int x, int y) {
    if (x < 0 || y < 0 || x >= u_size.z || y >= u_size.w) return ivec2(0);
    return unpackMV(prevMBs[(y * u_size.z + x) * MB_WORDS + MB_MV]) >> 2;
}

// Fractional-sample luma (8.4.2.2.1) around the full-sample vector found, in
// sWin once the full-sample search is done. Coordinates are relative to the
// macroblock displaced by that vector: full samples G for x, y in -3..19, the
// unrounded horizontal 6-tap b1 at x + 1/2 (x in -1..15) for rows -3..19, the
// vertical half samples h at y + 1/2 (x in -1..16, y in -1..15) and the centre
// ones j (x, y in -1..15).
#define OFF_B1 529
#define OFF_H 920
#define OFF_J 1226
int fullAt(int x, int y) { return sWin[(y + 3) * 23 + x + 3]; }
int b1At(int x, int y) { return sWin[OFF_B1 + (y + 3) * 17 + x + 1]; }
int bAt(int x, int y) { return clamp((b1At(x, y) + 16) >> 5, 0, 255); }
int hAt(int x, int y) { return sWin[OFF_H + (y + 1) * 18 + x + 1]; }
int jAt(int x, int y) { return sWin[OFF_J + (y + 1) * 17 + x + 1]; }
int tap6(int a, int b, int c, int d, int e, int f) { return a - 5 * b + 20 * c + 20 * d - 5 * e + f; }

// The three steps that fill those planes, a barrier after each (main() holds the barriers).
void loadFull(int t, ivec2 origin) {
    for (int i = t; i < 529; i += 64) sWin[i] = refY(origin.x + i % 23 - 3, origin.y + i / 23 - 3);
}
void loadHalf(int t) {
    for (int i = t; i < 391; i += 64) {
        int x = i % 17 - 1, y = i / 17 - 3;
        sWin[OFF_B1 + i] = tap6(fullAt(x - 2, y), fullAt(x - 1, y), fullAt(x, y), fullAt(x + 1, y), fullAt(x + 2, y), fullAt(x + 3, y));
    }
    for (int i = t; i < 306; i += 64) {
        int x = i % 18 - 1, y = i / 18 - 1;
        int h1 = tap6(fullAt(x, y - 2), fullAt(x, y - 1), fullAt(x, y), fullAt(x, y + 1), fullAt(x, y + 2), fullAt(x, y + 3));
        sWin[OFF_H + i] = clamp((h1 + 16) >> 5, 0, 255);
    }
}
void loadCentre(int t) {
    for (int i = t; i < 289; i += 64) {
        int x = i % 17 - 1, y = i / 17 - 1;
        int j1 = tap6(b1At(x, y - 2), b1At(x, y - 1), b1At(x, y), b1At(x, y + 1), b1At(x, y + 2), b1At(x, y + 3));
        sWin[OFF_J + i] = clamp((j1 + 512) >> 10, 0, 255);
    }
}

// The luma prediction sample at quarter-sample position (qx, qy), relative as above (Table 8-12).
int lumaAt(int qx, int qy) {
    int x = qx >> 2, y = qy >> 2, fx = qx & 3, fy = qy & 3;
    if (fx == 0 && fy == 0) return fullAt(x, y);
    if (fy == 0) {
        int b = bAt(x, y);
        return fx == 2 ? b : (b + fullAt(x + (fx >> 1), y) + 1) >> 1;
    }
    if (fx == 0) {
        int h = hAt(x, y);
        return fy == 2 ? h : (h + fullAt(x, y + (fy >> 1)) + 1) >> 1;
    }
    if (fx == 2 && fy == 2) return jAt(x, y);
    if (fx == 2) return (jAt(x, y) + bAt(x, y + (fy >> 1)) + 1) >> 1;   // f, q
    if (fy == 2) return (jAt(x, y) + hAt(x + (fx >> 1), y) + 1) >> 1;   // i, k
    return (bAt(x, y + (fy >> 1)) + hAt(x + (fx >> 1), y) + 1) >> 1;    // e, g, p, r
}

shared uint sCand[9];
shared int sScore[24];

// Run lengths → decimation score of a lone ±1 level after that many zeros.
const int DECIMATE4[16] = int[16](3, 2, 2, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);

// How much block b's levels (zig-zag positions first-15) are worth keeping:
// 9 (keep) if any level exceeds 1, else the sum over its ±1s of a weight that
// falls with the zeros before each (x264's rule for P macroblocks).
int decimateScore(int b, int first) {
    int idx = 15;
    while (idx >= first && sLevels[b * 16 + ZIGZAG[idx]] == 0) idx--;
    int score = 0;
    while (idx >= first) {
        if (abs(sLevels[b * 16 + ZIGZAG[idx]]) > 1) return 9;
        idx--;
        int run = 0;
        while (idx >= first && sLevels[b * 16 + ZIGZAG[idx]] == 0) { idx--; run++; }
        score += DECIMATE4[run];
    }
    return score;
}

// One step of the fractional search: the nine offsets `step` quarter samples
// around `centre` (from the full-sample vector `full`), costed by the SATD of
// the 4x4 blocks plus lambda times the vector's bits. satdCandidates adds up
// the SATDs (sCand zeroed, a barrier before and after), bestCandidate picks.
void satdCandidates(int t, ivec2 centre, int step) {
    for (int k = t; k < 144; k += 64) {
        int c = k >> 4, blk = k & 15;
        ivec2 d = centre + ivec2(c % 3 - 1, c / 3 - 1) * step;
        int bx = (blk & 3) * 4, by = (blk >> 2) * 4;
        int r[16];
        for (int i = 0; i < 16; i++) {
            int x = bx + (i & 3), y = by + (i >> 2);
            r[i] = sCur[y * 16 + x] - lumaAt(4 * x + d.x, 4 * y + d.y);
        }
        hadamard4x4(r);
        int s = 0;
        for (int i = 0; i < 16; i++) s += abs(r[i]);
        atomicAdd(sCand[c], uint((s + 1) >> 1));
    }
}
int pickedCand;
ivec2 bestCandidate(ivec2 full, ivec2 centre, int step) {
    uint bestKey = 0xffffffffu;
    for (int c = 0; c < 9; c++) {
        ivec2 mv = full * 4 + centre + ivec2(c % 3 - 1, c / 3 - 1) * step;
        uint cost = sCand[c] + uint(u_code.z * (seBits(mv.x) + seBits(mv.y)));
        bestKey = min(bestKey, (cost << 4) | uint(c == 4 ? 0 : c + 1));   // ties keep the centre
    }
    int c = int(bestKey & 15u);
    c = c == 0 ? 4 : c - 1;
    pickedCand = c;
    return centre + ivec2(c % 3 - 1, c / 3 - 1) * step;
}
#endif
#if !defined(SEARCH)
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
#endif


// Forward transform and quantisation of the residual sCur - sPred: luma blocks
// on invocations 0-15, chroma on 16-23.
void transformQuant(int t, bool intra) {
    int deadzone = intra ? 2 : 1;
    if (t < 24) {
        int r[16];
        bool luma = t < 16;
        int bx = luma ? BLK_X[t] * 4 : ((t - 16) & 1) * 4;
        int by = luma ? BLK_Y[t] * 4 : (((t - 16) >> 1) & 1) * 4;
        int c = (t - 16) >> 2;
        for (int i = 0; i < 16; i++) {
            int x = bx + (i & 3), y = by + (i >> 2);
            r[i] = luma ? sCur[y * 16 + x] - sPred[y * 16 + x] : sCurC[c * 64 + y * 8 + x] - sPredC[c * 64 + y * 8 + x];
        }
        forward4x4(r);
        bool dcApart = !luma || intra;
        if (luma && intra) sDC[BLK_Y[t] * 4 + BLK_X[t]] = r[0];
        if (!luma) sDC[t] = r[0];
        int count = 0;
        Quantiser q = quantiser(luma ? qp : qpc, deadzone);
        for (int i = 0; i < 16; i++) {
            int l = (i == 0 && dcApart) ? 0 : quantWith(q, r[i], i);
            sLevels[t * 16 + i] = l;
            if (l != 0) count++;
        }
        sNNZ[t] = count;
    }
}

// The DC transforms: Intra_16x16 luma DC on invocation 24, chroma DC on 25-26.
void quantDCs(int t, bool intra) {
    if (t == 24 && intra) {
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
}

#ifdef INTER
// Decimation (u_code.w bit 2), after decimateScores and a barrier: an 8x8
// luma quadrant whose blocks score under 4 in all, every luma block when the
// macroblock scores under 6, and a chroma component's AC when its four blocks
// score under 7, are dropped: a few isolated ±1s cost more bits than they
// return in quality.
void decimateScores(int t) {
    if (t < 24) sScore[t] = decimateScore(t, t < 16 ? 0 : 1);
}
void decimateDrop(int t, bool intra) {
    if ((u_code.w & 2) != 0 && !intra && t < 24) {
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
            for (int i = 0; i < 16; i++) sLevels[t * 16 + i] = 0;
            sNNZ[t] = 0;
        }
    }
}

// Chroma prediction for vector mv (quarter luma samples, so eighth chroma
// samples): the bilinear interpolation of 8.4.2.2.2, invocation t's sample of each component.
void predictChromaInter(int t, ivec2 mv) {
    int cx = t & 7, cy = t >> 3;
    int xi = mbX * 8 + cx + (mv.x >> 3), yi = mbY * 8 + cy + (mv.y >> 3);
    int xf = mv.x & 7, yf = mv.y & 7;
    for (int c = 0; c < 2; c++) {
        int a = refC(xi, yi, c), b = refC(xi + 1, yi, c), e = refC(xi, yi + 1, c), f = refC(xi + 1, yi + 1, c);
        sPredC[c * 64 + t] = ((8 - xf) * (8 - yf) * a + xf * (8 - yf) * b + (8 - xf) * yf * e + xf * yf * f + 32) >> 6;
    }
}
#endif

#ifdef DECIDE
// The motion vector predictor and the P_Skip vector from the final vectors of
// the left, top and top-right (else top-left) macroblocks (8.4.1.1, 8.4.1.3),
// as h264finish.comp derives them: those come earlier in this wavefront.
struct Neighbour { bool available; int ref; ivec2 mv; };

Neighbour neighbour(int x, int y) {
    Neighbour n;
    n.available = x >= 0 && y >= 0 && x < u_size.z;
    n.ref = -1;
    n.mv = ivec2(0);
    if (n.available) {
        int i = y * u_size.z + x;
        if (infoKind(mbs[i * MB_WORDS + MB_INFO]) == KIND_P16) {
            n.ref = 0;
            n.mv = unpackMV(mbs[i * MB_WORDS + MB_MV]);
        }
    }
    return n;
}

int median3(int a, int b, int c) { return max(min(a, b), min(max(a, b), c)); }

// x: the predictor, y: the P_Skip vector.
ivec2[2] predictors(int x, int y) {
    Neighbour a = neighbour(x - 1, y), b = neighbour(x, y - 1), c = neighbour(x + 1, y - 1);
    if (!c.available) c = neighbour(x - 1, y - 1);
    ivec2 mvp;
    Neighbour pb = b, pc = c;
    if (!b.available && !c.available && a.available) { pb = a; pc = a; }
    int matches = (a.ref == 0 ? 1 : 0) + (pb.ref == 0 ? 1 : 0) + (pc.ref == 0 ? 1 : 0);
    if (matches == 1) mvp = a.ref == 0 ? a.mv : (pb.ref == 0 ? pb.mv : pc.mv);
    else mvp = ivec2(median3(a.mv.x, pb.mv.x, pc.mv.x), median3(a.mv.y, pb.mv.y, pc.mv.y));
    ivec2 skipMV = mvp;
    if (!a.available || !b.available || (a.ref == 0 && a.mv == ivec2(0)) || (b.ref == 0 && b.mv == ivec2(0)))
        skipMV = ivec2(0);
    return ivec2[2](mvp, skipMV);
}

shared uint sSatd;

// SATD of the luma residual sCur - sPred, added into sSatd by invocations 0-15.
void satdPred(int t) {
    if (t < 16) {
        int bx = (t & 3) * 4, by = (t >> 2) * 4;
        int r[16];
        for (int i = 0; i < 16; i++) {
            int o = (by + (i >> 2)) * 16 + bx + (i & 3);
            r[i] = sCur[o] - sPred[o];
        }
        hadamard4x4(r);
        int s = 0;
        for (int i = 0; i < 16; i++) s += abs(r[i]);
        atomicAdd(sSatd, uint((s + 1) >> 1));
    }
}
#endif


#if !defined(SEARCH)
bool hasTop, hasLeft;

// Intra_16x16 in three steps, a barrier after each: the reconstructed
// neighbours, the luma and chroma modes by SAD (luma on invocations 0-3,
// chroma on 4-7, into sBest and sBestC), the prediction of the modes chosen.
void intraNeighbours(int t, int px, int py) {
    hasTop = mbY > 0; hasLeft = mbX > 0;
    if (t < 16) {
        sTop[t] = hasTop ? picY(px + t, py - 1) : 0;
        sLeft[t] = hasLeft ? picY(px - 1, py + t) : 0;
        int c = t >> 3, i = t & 7;
        sTopC[t] = hasTop ? picC(mbX * 8 + i, mbY * 8 - 1, c) : 0;
        sLeftC[t] = hasLeft ? picC(mbX * 8 - 1, mbY * 8 + i, c) : 0;
    }
    if (t < 3) sCorner[t] = hasTop && hasLeft ? (t == 0 ? picY(px - 1, py - 1) : picC(mbX * 8 - 1, mbY * 8 - 1, t - 1)) : 0;
}

void intraModes(int t) {
    if (t < 4) {
        bool ok = (t == 0 && hasTop) || (t == 1 && hasLeft) || t == 2 || (t == 3 && hasTop && hasLeft);
        if (ok) {
            int dc = lumaDC(hasTop, hasLeft);
            ivec3 plane = t == 3 ? lumaPlane() : ivec3(0);
            uint s = 0u;
            for (int i = 0; i < 256; i++) s += uint(abs(sCur[i] - predictLuma(t, i & 15, i >> 4, dc, plane)));
            atomicMin(sBest, (s << 2) | uint(t));
        }
    } else if (t < 8) {
        int m = t - 4;
        bool ok = m == 0 || (m == 1 && hasLeft) || (m == 2 && hasTop) || (m == 3 && hasTop && hasLeft);
        if (ok) {
            uint s = 0u;
            for (int c = 0; c < 2; c++) {
                ivec3 plane = m == 3 ? chromaPlane(c) : ivec3(0);
                for (int i = 0; i < 64; i++)
                    s += uint(abs(sCurC[c * 64 + i] - predictChroma(m, i & 7, i >> 3, c, hasTop, hasLeft, plane)));
            }
            atomicMin(sBestC, (s << 2) | uint(m));
        }
    }
}

void intraPredict(int t, int lumaMode, int chromaMode) {
    int dc = lumaDC(hasTop, hasLeft);
    ivec3 plane = lumaMode == 3 ? lumaPlane() : ivec3(0);
    for (int k = 0; k < 4; k++) {
        int i = t * 4 + k;
        sPred[i] = predictLuma(lumaMode, i & 15, i >> 4, dc, plane);
    }
    for (int c = 0; c < 2; c++) {
        ivec3 cplane = chromaMode == 3 ? chromaPlane(c) : ivec3(0);
        sPredC[c * 64 + t] = predictChroma(chromaMode, t & 7, t >> 3, c, hasTop, hasLeft, cplane);
    }
}
#endif

void main() {
    int t = int(gl_LocalInvocationIndex);
    qp = u_code.x;
    qpc = chromaQP(qp);
#if defined(SEARCH)
    mbX = int(gl_WorkGroupID.x);
    mbY = int(gl_WorkGroupID.y);
    bool intra = false;
#elif defined(DECIDE)
    // Diagonal x + 2y: the left, top, top-right and top-left macroblocks are decided.
    int d = u_code.w >> 3;
    mbY = max(0, (d - (u_size.z - 1) + 1) >> 1) + int(gl_WorkGroupID.x);
    mbX = d - 2 * mbY;
    bool intra = false;
#else
    int d = u_code.w;
    mbY = max(0, d - (u_size.z - 1)) + int(gl_WorkGroupID.x);
    mbX = d - mbY;
    bool intra = true;
#endif
    int mb = mbY * u_size.z + mbX;
    int px = mbX * 16, py = mbY * 16;

    // The source macroblock.
    for (int k = 0; k < 4; k++) sCur[t * 4 + k] = srcY(px + (t & 3) * 4 + k, py + (t >> 2));
    sCurC[t] = srcC(mbX * 8 + (t & 7), mbY * 8 + (t >> 3), 0);
    sCurC[64 + t] = srcC(mbX * 8 + (t & 7), mbY * 8 + (t >> 3), 1);
    if (t == 0) { sBest = 0xffffffffu; sBestC = 0xffffffffu; }

#if defined(SEARCH)
    for (int i = t; i < WIN * WIN; i += 64) sWin[i] = refY(px - RANGE + i % WIN, py - RANGE + i / WIN);
    barrier();
    // Predictors: zero, and the vectors of this and the four next macroblocks in the previous picture.
    if (t < 6) {
        ivec2 c = ivec2(0);
        if (t == 1) c = prevVector(mbX, mbY);
        if (t == 2) c = prevVector(mbX - 1, mbY);
        if (t == 3) c = prevVector(mbX, mbY - 1);
        if (t == 4) c = prevVector(mbX + 1, mbY);
        if (t == 5) c = prevVector(mbX, mbY + 1);
        c = clamp(c, ivec2(-(RANGE - 4)), ivec2(RANGE - 4));
        atomicMin(sBest, (costAt(c) << 8) | uint(t));
    }
    // And a coarse grid over the window (every fourth vector), for motion the predictors miss.
    for (int k = t; k < 81; k += 64) {
        ivec2 c = clamp(ivec2(k % 9 - 4, k / 9 - 4) * 4, ivec2(-(RANGE - 4)), ivec2(RANGE - 4));
        atomicMin(sBest, (costAt(c) << 8) | uint(6 + k));
    }
    barrier();
    if (t == 0) {
        int k = int(sBest & 255u);
        ivec2 c = k >= 6 ? ivec2((k - 6) % 9 - 4, (k - 6) / 9 - 4) * 4 : ivec2(0);
        if (k == 1) c = prevVector(mbX, mbY);
        if (k == 2) c = prevVector(mbX - 1, mbY);
        if (k == 3) c = prevVector(mbX, mbY - 1);
        if (k == 4) c = prevVector(mbX + 1, mbY);
        if (k == 5) c = prevVector(mbX, mbY + 1);
        sCentre = clamp(c, ivec2(-(RANGE - 4)), ivec2(RANGE - 4));
        sBest = 0xffffffffu;
    }
    barrier();
    for (int k = t; k < 81; k += 64) {
        ivec2 c = sCentre + ivec2(k % 9 - 4, k / 9 - 4);
        atomicMin(sBest, (costAt(c) << 8) | uint(k));
    }
    barrier();
    int kBest = int(sBest & 255u);
    ivec2 best = sCentre + ivec2(kBest % 9 - 4, kBest / 9 - 4);
    ivec2 mv = best * 4;
    // Half, then quarter samples around the full-sample vector (with the tool
    // off, steps of 0: every candidate is the full-sample vector).
    int step = (u_code.w & 1) != 0 ? 2 : 0;
    barrier();
    loadFull(t, ivec2(px, py) + best);
    barrier();
    loadHalf(t);
    if (t < 9) sCand[t] = 0u;
    barrier();
    loadCentre(t);
    barrier();
    satdCandidates(t, ivec2(0), step);
    barrier();
    ivec2 frac = bestCandidate(best, ivec2(0), step);
    barrier();
    if (t < 9) sCand[t] = 0u;
    barrier();
    satdCandidates(t, frac, step >> 1);
    barrier();
    frac = bestCandidate(best, frac, step >> 1);
    uint satd = sCand[pickedCand];
    mv += frac;
    // The decision pass takes it from here.
    if (t == 0) {
        mbs[mb * MB_WORDS + MB_CAND] = packMV(mv);
        mbs[mb * MB_WORDS + MB_COST] = satd;
    }
#elif defined(DECIDE)
    ivec2 pv[2] = predictors(mbX, mbY);
    ivec2 mvp = pv[0], skipMV = pv[1];
    ivec2 cand = unpackMV(mbs[mb * MB_WORDS + MB_CAND]);
    uint candSatd = mbs[mb * MB_WORDS + MB_COST];
    // P_Skip first: the prediction at the skip vector, and whether its residual
    // quantises (and decimates) to nothing, as the macroblock itself will below.
    if (t == 0) sSatd = 0u;
    loadFull(t, ivec2(px, py) + (skipMV >> 2));
    barrier();
    loadHalf(t);
    barrier();
    loadCentre(t);
    barrier();
    for (int k = 0; k < 4; k++) {
        int i = t * 4 + k;
        sPred[i] = lumaAt(4 * (i & 15) + (skipMV.x & 3), 4 * (i >> 4) + (skipMV.y & 3));
    }
    predictChromaInter(t, skipMV);
    barrier();
    transformQuant(t, false);
    satdPred(t);
    barrier();
    decimateScores(t);
    quantDCs(t, false);
    barrier();
    decimateDrop(t, false);
    barrier();
    bool skip = true;
    for (int b = 0; b < 24; b++) if (sNNZ[b] != 0) skip = false;
    for (int b = 16; b < 24; b++) if (sDCLevels[b] != 0) skip = false;
    // Otherwise the searched vector or the skip vector coded with its mvd, by SATD plus lambda times the bits.
    uint lambda = uint(u_code.z);
    uint costSkipMV = sSatd + lambda * uint(1 + seBits(skipMV.x - mvp.x) + seBits(skipMV.y - mvp.y));
    uint costCand = candSatd + lambda * uint(1 + seBits(cand.x - mvp.x) + seBits(cand.y - mvp.y));
    ivec2 mv = skip || costSkipMV <= costCand ? skipMV : cand;
    uint costInter = min(costSkipMV, costCand);
    // The predictor itself (an mvd of zero), where it is neither of those.
    barrier();
    if (t == 0) sSatd = 0u;
    loadFull(t, ivec2(px, py) + (mvp >> 2));
    barrier();
    loadHalf(t);
    barrier();
    loadCentre(t);
    barrier();
    for (int k = 0; k < 4; k++) {
        int i = t * 4 + k;
        sPred[i] = lumaAt(4 * (i & 15) + (mvp.x & 3), 4 * (i >> 4) + (mvp.y & 3));
    }
    barrier();
    satdPred(t);
    barrier();
    uint costMvp = sSatd + lambda * 3u;
    if (!skip && mvp != skipMV && mvp != cand && costMvp < costInter) { mv = mvp; costInter = costMvp; }
    // Intra_16x16 instead, where it predicts better (occlusions, new content, scene cuts):
    // its modes by SAD, then its SATD plus lambda times about the bits of its mb_type and modes.
    barrier();
    if (t == 0) { sBest = 0xffffffffu; sBestC = 0xffffffffu; sSatd = 0u; }
    intraNeighbours(t, px, py);
    barrier();
    intraModes(t);
    barrier();
    int lumaMode = int(sBest & 3u), chromaMode = int(sBestC & 3u);
    intraPredict(t, lumaMode, chromaMode);
    barrier();
    satdPred(t);
    barrier();
    // Not below QP 10: there an Intra_16x16 DC level can pass the ±2047 that
    // CAVLC codes here and be clamped, which motion-compensated blocks never are.
    intra = (u_code.w & 4) != 0 && qp >= 10 && !skip && sSatd + lambda * 6u < costInter;
    if (intra) mv = ivec2(0);
    barrier();
    loadFull(t, ivec2(px, py) + (mv >> 2));
    barrier();
    loadHalf(t);
    barrier();
    loadCentre(t);
    barrier();
    if (intra) {
        intraPredict(t, lumaMode, chromaMode);
    } else {
        for (int k = 0; k < 4; k++) {
            int i = t * 4 + k;
            sPred[i] = lumaAt(4 * (i & 15) + (mv.x & 3), 4 * (i >> 4) + (mv.y & 3));
        }
        predictChromaInter(t, mv);
        lumaMode = 0; chromaMode = 0;
    }
    barrier();
#else
    intraNeighbours(t, px, py);
    barrier();
    intraModes(t);
    barrier();
    int lumaMode = int(sBest & 3u), chromaMode = int(sBestC & 3u);
    intraPredict(t, lumaMode, chromaMode);
    barrier();
    ivec2 mv = ivec2(0);
#endif

    // The search pass ends here (a return before barrier() is not allowed).
#if !defined(SEARCH)
    transformQuant(t, intra);
    barrier();
#ifdef INTER
    decimateScores(t);
    barrier();
    decimateDrop(t, intra);
#endif
    quantDCs(t, intra);
    barrier();

    // Coded block pattern (7.4.5): every invocation derives the same value.
    int cbpLuma = 0;
    for (int b = 0; b < 16; b++)
        if (sNNZ[b] != 0) cbpLuma |= intra ? 15 : (1 << (b >> 2));
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
        for (int i = 0; i < 16; i++) d[i] = dequantWith(q, sLevels[t * 16 + i], i);
        if (luma && intra) d[0] = sDC[BLK_Y[t] * 4 + BLK_X[t]];
        if (!luma) d[0] = sDC[t];
        inverse4x4(d);
        if (luma) {
            int bx = BLK_X[t] * 4, by = BLK_Y[t] * 4;
            for (int y = 0; y < 4; y++) {
                uint word = 0u;
                for (int x = 0; x < 4; x++)
                    word |= uint(clamp(sPred[(by + y) * 16 + bx + x] + d[y * 4 + x], 0, 255)) << uint(8 * x);
                recon[((py + by + y) * u_layout.z + px + bx) >> 2] = word;
            }
        } else {
            int b = (t - 16) & 3, c = (t - 16) >> 2;
            int bx = (b & 1) * 4, by = (b >> 1) * 4;
            for (int i = 0; i < 16; i++) {
                int o = c * 64 + (by + (i >> 2)) * 8 + bx + (i & 3);
                sReconC[o] = clamp(sPredC[o] + d[i], 0, 255);
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
            word |= (uint(sReconC[o]) | (uint(sReconC[64 + o]) << 8)) << uint(16 * k);
        }
        recon[(u_layout.w + (mbY * 8 + row) * u_layout.z + mbX * 16 + quarter * 4) >> 2] = word;
    }

    // The record for the entropy pass.
    int rec = mb * MB_WORDS;
    if (t < 24) {
        int word = t < 16 ? MB_LUMA + t * 8 : MB_CHROMAAC + (t - 16) * 8;
        for (int k = 0; k < 8; k++) {
            int lo = sLevels[t * 16 + ZIGZAG[2 * k]], hi = sLevels[t * 16 + ZIGZAG[2 * k + 1]];
            mbs[rec + word + k] = (uint(lo) & 0xffffu) | (uint(hi) << 16);
        }
    } else if (t < 32) {
        int k = t - 24;   // luma DC words 0-7, zig-zag order
        int lo = sDCLevels[ZIGZAG[2 * k]], hi = sDCLevels[ZIGZAG[2 * k + 1]];
        mbs[rec + MB_LUMADC + k] = intra ? ((uint(lo) & 0xffffu) | (uint(hi) << 16)) : 0u;
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
        mbs[rec + MB_INFO] = packInfo(intra ? KIND_I16 : KIND_P16, false, lumaMode, chromaMode, cbp);
        mbs[rec + MB_MV] = packMV(mv);
        mbs[rec + MB_MVP] = 0u;
        mbs[rec + MB_SKIPRUN] = 0u;
    }
#endif
}
