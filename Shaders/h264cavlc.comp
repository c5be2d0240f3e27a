#version 310 es
// H.264 encoder, entropy coding (docs/ARCHITECTURE.md, "The GPU encoder"):
// a work group per macroblock writes its slice_data() part with CAVLC
// (ITU-T H.264 7.3.5, 9.2) into its own slot of the bit buffer, MSB first:
// mb_skip_run before it (P slices), mb_type, prediction, coded_block_pattern,
// mb_qp_delta and the residual blocks. The pack pass joins the slots.
// The macroblock's syntax in SEGMENTS parts, one an invocation: the header
// (everything before the residual), Intra_16x16's luma DC, the 16 luma
// blocks, the two chroma DC blocks, the eight chroma AC blocks; a part the
// macroblock does not code is empty. Each invocation counts its part's bits,
// their starts are summed, and each writes its part at its start into the
// slot's words in shared memory: a macroblock's time is its longest part,
// not all of them one after another.
layout(local_size_x = 32) in;
#define SEGMENTS 28

layout(std430, binding = 3) readonly buffer MBs { uint mbs[]; };
layout(std430, binding = 5) buffer Bits { uint bits[]; };
layout(std430, binding = 6) buffer Lens { uint lens[]; };

uniform ivec4 u_code;   // qp, P slice (1) or I slice (0), -, -

// The code tables (H264CAVLCTables: Tables 9-4, 9-5, 9-7 to 9-10, each as
// (code << 8) | length or codeNum), in a storage buffer, each at NAME_AT
// (defined with the source): as constant arrays they were copied into every
// invocation's local memory first.
layout(std430, binding = 9) readonly buffer Tables { uint tables[]; };
#define COEFF_TOKEN(i) tables[COEFF_TOKEN_AT + (i)]
#define CHROMA_DC_TOKEN(i) tables[CHROMA_DC_TOKEN_AT + (i)]
#define TOTAL_ZEROS(i) tables[TOTAL_ZEROS_AT + (i)]
#define CHROMA_DC_TOTAL_ZEROS(i) tables[CHROMA_DC_TOTAL_ZEROS_AT + (i)]
#define RUN_BEFORE(i) tables[RUN_BEFORE_AT + (i)]
#define INTER_CBP_CODE(i) tables[INTER_CBP_CODE_AT + (i)]
#define INTRA4_CBP_CODE(i) tables[INTRA4_CBP_CODE_AT + (i)]

// The slot's words as they are written (SLOT_WORDS, defined with every
// pass's source), each part's bits and start, the macroblock's bits.
shared uint sOut[SLOT_WORDS];
shared uint sLen[SEGMENTS];
shared uint sStart[SEGMENTS];
shared uint sTotal;

// The bit writer: counting (the first round) or writing into sOut at the
// part's start (the second).
bool writing = false;
uint bwBit = 0u;

// `v`'s low `n` bits (0-32), MSB first.
void put(uint v, int n) {
    if (n == 0) return;
    if (writing) {
        if (n < 32) v &= (1u << uint(n)) - 1u;
        uint w = bwBit >> 5u;
        int room = 32 - int(bwBit & 31u);
        if (n <= room) atomicOr(sOut[w], v << uint(room - n));
        else {
            int rest = n - room;
            atomicOr(sOut[w], v >> uint(rest));
            atomicOr(sOut[w + 1u], v << uint(32 - rest));
        }
    }
    bwBit += uint(n);
}

void putCode(uint code) { put(code >> 8, int(code & 255u)); }

void ue(uint v) {
    uint k = v + 1u;
    int len = findMSB(k);
    put(0u, len);
    put(k, len + 1);
}

void se(int v) { ue(v > 0 ? uint(2 * v - 1) : uint(-2 * v)); }

int mbIndex;
int mbX;
int mbY;


int nnzOf(int mb, int blk) {
    uint w = mbs[mb * MB_WORDS + MB_NNZ + (blk >> 2)];
    return int((w >> uint(8 * (blk & 3))) & 255u);
}

// nC of a luma 4×4 block (bx, by) or, for `comp` 0/1, of a chroma block (9.2.1).
int predictedCount(int bx, int by, int comp) {
    int size = comp < 0 ? 4 : 2;
    int nA = 0, nB = 0;
    bool hasA = true, hasB = true;
    int blkA, blkB, mbA = mbIndex, mbB = mbIndex;
    int ax = bx - 1, by2 = by - 1;
    if (ax < 0) { if (mbX == 0) hasA = false; else { mbA = mbIndex - 1; ax = size - 1; } }
    if (by2 < 0) { if (!rowAbove(mbY)) hasB = false; else { mbB = mbIndex - u_size.z; by2 = size - 1; } }
    if (comp < 0) {
        if (hasA) nA = nnzOf(mbA, (by >> 1) * 8 + (ax >> 1) * 4 + (by & 1) * 2 + (ax & 1));
        if (hasB) nB = nnzOf(mbB, (by2 >> 1) * 8 + (bx >> 1) * 4 + (by2 & 1) * 2 + (bx & 1));
    } else {
        if (hasA) nA = nnzOf(mbA, 16 + comp * 4 + by * 2 + ax);
        if (hasB) nB = nnzOf(mbB, 16 + comp * 4 + by2 * 2 + bx);
    }
    if (hasA && hasB) return (nA + nB + 1) >> 1;
    if (hasA) return nA;
    if (hasB) return nB;
    return 0;
}

int blkIndex(int bx, int by) { return (by >> 1) * 8 + (bx >> 1) * 4 + (by & 1) * 2 + (bx & 1); }

// Intra_4x4 mode of block `blk` of macroblock `m`; 2 (DC) when the macroblock is not Intra_4x4 (8.3.1.1).
int modeOf(int m, int blk) {
    if (infoKind(mbs[m * MB_WORDS + MB_INFO]) != KIND_I4) return 2;
    return int((mbs[m * MB_WORDS + MB_LUMADC + (blk >> 3)] >> uint(4 * (blk & 7))) & 15u);
}

// The current block's coefficients, two to a word (low half first), in
// named registers: an array indexed by a variable would live in memory.
uint cw0, cw1, cw2, cw3, cw4, cw5, cw6, cw7;

int coefAt(int i) {
    int k = i >> 1;
    uint w = k < 4 ? (k < 2 ? (k == 0 ? cw0 : cw1) : (k == 2 ? cw2 : cw3))
                   : (k < 6 ? (k == 4 ? cw4 : cw5) : (k == 6 ? cw6 : cw7));
    return bitfieldExtract(int(w), (i & 1) * 16, 16);
}

// residual_block_cavlc (7.3.5.3.2) of `count` coefficients read at `word`
// from scan position `start`; nC -1 is chroma DC. The nonzero coefficients
// are walked from the last in scan order down, through a mask of them.
void residualBlock(int word, int start, int count, int nC, bool empty) {
    if (empty) {
        // No coefficient: TotalCoeff 0, TrailingOnes 0.
        if (nC < 0) putCode(CHROMA_DC_TOKEN(0));
        else putCode(COEFF_TOKEN((nC < 2 ? 0 : (nC < 4 ? 1 : (nC < 8 ? 2 : 3))) * 68));
        return;
    }
    int base = mbIndex * MB_WORDS + word;
    int n = (start + count + 1) >> 1;
    cw0 = mbs[base]; cw1 = mbs[base + 1];
    if (n > 2) { cw2 = mbs[base + 2]; cw3 = mbs[base + 3]; cw4 = mbs[base + 4];
                 cw5 = mbs[base + 5]; cw6 = mbs[base + 6]; cw7 = mbs[base + 7]; }
    uint nz = 0u;
    for (int i = 0; i < 16; i++)
        if (i >= start && i < start + count && coefAt(i) != 0) nz |= 1u << uint(i);
    int total = bitCount(nz);
    int t1 = 0;
    {
        uint m = nz;
        for (int k = 0; k < 3 && m != 0u; k++) {
            int i = findMSB(m);
            if (abs(coefAt(i)) != 1) break;
            t1++;
            m &= ~(1u << uint(i));
        }
    }
    int totalZeros = total > 0 ? findMSB(nz) - start + 1 - total : 0;
    if (nC < 0) putCode(CHROMA_DC_TOKEN(total * 4 + t1));
    else {
        int table = nC < 2 ? 0 : (nC < 4 ? 1 : (nC < 8 ? 2 : 3));
        putCode(COEFF_TOKEN(table * 68 + total * 4 + t1));
    }
    if (total == 0) return;
    // The trailing ones' signs, then the other levels.
    int suffixLength = (total > 10 && t1 < 3) ? 1 : 0;
    uint m = nz;
    for (int k = 0; m != 0u; k++) {
        int i = findMSB(m);
        m &= ~(1u << uint(i));
        int level = coefAt(i);
        if (k < t1) { put(level < 0 ? 1u : 0u, 1); continue; }
        int code = level > 0 ? 2 * level - 2 : -2 * level - 1;
        if (k == t1 && t1 < 3) code -= 2;
        if (suffixLength == 0) {
            if (code < 14) { put(1u, code + 1); }
            else if (code < 30) { put(1u, 15); put(uint(code - 14), 4); }
            else { put(1u, 16); put(uint(code - 30), 12); }
        } else {
            if (code < (15 << suffixLength)) {
                put(1u, (code >> suffixLength) + 1);
                put(uint(code) & ((1u << uint(suffixLength)) - 1u), suffixLength);
            } else {
                put(1u, 16);
                put(uint(code - (15 << suffixLength)), 12);
            }
        }
        if (suffixLength == 0) suffixLength = 1;
        if (abs(level) > (3 << (suffixLength - 1)) && suffixLength < 6) suffixLength++;
    }
    if (total < count) {
        if (nC < 0) putCode(CHROMA_DC_TOTAL_ZEROS((total - 1) * 4 + totalZeros));
        else putCode(TOTAL_ZEROS((total - 1) * 16 + totalZeros));
    }
    // run_before: the zeros just below each coefficient, from the last down.
    int zerosLeft = totalZeros;
    m = nz;
    int i = findMSB(m);
    m &= ~(1u << uint(i));
    for (int k = 0; k < total - 1 && zerosLeft > 0; k++) {
        int next = findMSB(m);
        m &= ~(1u << uint(next));
        int run = i - next - 1;
        putCode(RUN_BEFORE((min(zerosLeft, 7) - 1) * 16 + run));
        zerosLeft -= run;
        i = next;
    }
}

// Part `part` of the macroblock (record word `info`).
void segment(int part, uint info, bool pSlice) {
    int cbp = infoCBP(info);
    int cbpLuma = cbp & 15, cbpChroma = cbp >> 4;
    bool intra = infoKind(info) == KIND_I16;
    bool intra4 = infoKind(info) == KIND_I4;
    if (part == 0) {
        if (pSlice) ue(mbs[mbIndex * MB_WORDS + MB_SKIPRUN]);
        if (intra4) {
            ue(pSlice ? 5u : 0u);   // I_NxN
            for (int b = 0; b < 16; b++) {
                int bx = blkX(b), by = blkY(b);
                int mode = modeOf(mbIndex, b);
                int predMode = 2;
                if ((bx > 0 || mbX > 0) && (by > 0 || rowAbove(mbY))) {
                    int ma = bx > 0 ? modeOf(mbIndex, blkIndex(bx - 1, by)) : modeOf(mbIndex - 1, blkIndex(3, by));
                    int mb_ = by > 0 ? modeOf(mbIndex, blkIndex(bx, by - 1)) : modeOf(mbIndex - u_size.z, blkIndex(bx, 3));
                    predMode = min(ma, mb_);
                }
                if (mode == predMode) put(1u, 1);
                else { put(0u, 1); put(uint(mode < predMode ? mode : mode - 1), 3); }
            }
            ue(uint(infoChromaMode(info)));
            ue(INTRA4_CBP_CODE(cbp));
            if (cbp != 0) se(0);   // mb_qp_delta
        } else if (intra) {
            ue(uint((pSlice ? 5 : 0) + 1 + infoLumaMode(info) + 4 * cbpChroma + (cbpLuma != 0 ? 12 : 0)));
            ue(uint(infoChromaMode(info)));
            se(0);   // mb_qp_delta
        } else {
            ue(0u);   // P_L0_16x16
            ivec2 mv = unpackMV(mbs[mbIndex * MB_WORDS + MB_MV]);
            ivec2 mvp = unpackMV(mbs[mbIndex * MB_WORDS + MB_MVP]);
            se(mv.x - mvp.x);
            se(mv.y - mvp.y);
            ue(INTER_CBP_CODE(cbp));
            if (cbp != 0) se(0);
        }
    } else if (part == 1) {
        if (intra) residualBlock(MB_LUMADC, 0, 16, predictedCount(0, 0, -1), false);
    } else if (part < 18) {
        int b = part - 2;
        if ((cbpLuma & (1 << (b >> 2))) != 0)
            residualBlock(MB_LUMA + b * 8, intra ? 1 : 0, intra ? 15 : 16, predictedCount(blkX(b), blkY(b), -1), nnzOf(mbIndex, b) == 0);
    } else if (part < 20) {
        if (cbpChroma != 0) residualBlock(MB_CHROMADC + 2 * (part - 18), 0, 4, -1, false);
    } else if (cbpChroma == 2) {
        int c = (part - 20) >> 2, b = (part - 20) & 3;
        residualBlock(MB_CHROMAAC + (c * 4 + b) * 8, 1, 15, predictedCount(b & 1, b >> 1, c), nnzOf(mbIndex, 16 + c * 4 + b) == 0);
    }
}

void main() {
    int t = int(gl_LocalInvocationIndex);
    mbIndex = int(gl_WorkGroupID.x);
    mbX = mbIndex % u_size.z;
    mbY = mbIndex / u_size.z;
    bool pSlice = u_code.y == 1;
    int slot = mbSlot(mbIndex);
    uint info = mbs[mbIndex * MB_WORDS + MB_INFO];
    if (infoSkipped(info)) {
        if (t == 0) lens[slot] = 0u;
        return;
    }
    // Each part's bits, then their starts.
    if (t < SEGMENTS) segment(t, info, pSlice);
    if (t < SEGMENTS) sLen[t] = bwBit;
    barrier();
    if (t == 0) {
        uint at = 0u;
        for (int k = 0; k < SEGMENTS; k++) { sStart[k] = at; at += sLen[k]; }
        sTotal = at;
    }
    barrier();
    // A slot holds SLOT_WORDS - 1 whole words of a macroblock (a longer one is marked).
    uint total = sTotal;
    if (total >= uint((SLOT_WORDS - 1) * 32)) {
        if (t == 0) lens[slot] = 0xffffffffu;
        return;
    }
    uint words = (total + 31u) >> 5u;
    for (uint i = uint(t); i < words; i += 32u) sOut[i] = 0u;
    barrier();
    writing = true;
    if (t < SEGMENTS) {
        bwBit = sStart[t];
        segment(t, info, pSlice);
    }
    barrier();
    int base = slot * SLOT_WORDS;
    for (uint i = uint(t); i < words; i += 32u) bits[base + int(i)] = sOut[i];
    if (t == 0) lens[slot] = total;
}
