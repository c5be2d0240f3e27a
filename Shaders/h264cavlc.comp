#version 310 es
// H.264 encoder, entropy coding (docs/ARCHITECTURE.md, "The GPU encoder"):
// one invocation per macroblock writes its slice_data() part with CAVLC
// (ITU-T H.264 7.3.5, 9.2) into its own slot of the bit buffer, MSB first:
// mb_skip_run before it (P slices), mb_type, prediction, coded_block_pattern,
// mb_qp_delta and the residual blocks. The pack pass joins the slots.
layout(local_size_x = 64) in;

layout(std430, binding = 3) readonly buffer MBs { uint mbs[]; };
layout(std430, binding = 5) buffer Bits { uint bits[]; };
layout(std430, binding = 6) buffer Lens { uint lens[]; };

uniform ivec4 u_size;   // width, height, MBs across, MBs down
uniform ivec4 u_code;   // qp, P slice (1) or I slice (0), slot words, -

// Table 9-5 coeff_token for 0 <= nC < 2, 2 <= nC < 4, 4 <= nC < 8, 8 <= nC: (code << 8) | length,
// indexed [table * 68 + TotalCoeff * 4 + TrailingOnes].
const uint COEFF_TOKEN[272] = uint[272](257u, 0u, 0u, 0u, 1286u, 258u, 0u, 0u, 1800u, 1030u, 259u, 0u, 1801u,
    1544u, 1287u, 773u, 1802u, 1545u, 1288u, 774u, 1803u, 1546u, 1289u, 1031u, 3853u, 1547u, 1290u, 1032u,
    2829u, 3597u, 1291u, 1033u, 2061u, 2573u, 3341u, 1034u, 3854u, 3598u, 2317u, 1035u, 2830u, 2574u, 3342u,
    3085u, 3855u, 3599u, 2318u, 3086u, 2831u, 2575u, 3343u, 2062u, 3856u, 271u, 2319u, 3087u, 2832u, 3600u,
    3344u, 2063u, 1808u, 2576u, 2320u, 3088u, 1040u, 1552u, 1296u, 2064u, 770u, 0u, 0u, 0u, 2822u, 514u, 0u,
    0u, 1798u, 1797u, 771u, 0u, 1799u, 2566u, 2310u, 1284u, 1800u, 1542u, 1286u, 1028u, 1032u, 1543u, 1287u,
    1541u, 1801u, 1544u, 1288u, 2054u, 3851u, 1545u, 1289u, 1030u, 2827u, 3595u, 3339u, 1031u, 3852u, 2571u,
    2315u, 1033u, 2828u, 3596u, 3340u, 3083u, 2060u, 2572u, 2316u, 2059u, 3853u, 3597u, 3341u, 3084u, 2829u,
    2573u, 2317u, 3085u, 1805u, 2830u, 1549u, 2061u, 2318u, 2062u, 2574u, 269u, 1806u, 1550u, 1294u, 1038u,
    3844u, 0u, 0u, 0u, 3846u, 3588u, 0u, 0u, 2822u, 3845u, 3332u, 0u, 2054u, 3077u, 3589u, 3076u, 3847u,
    2565u, 2821u, 2820u, 2823u, 2053u, 2309u, 2564u, 2311u, 3590u, 3334u, 2308u, 2055u, 2566u, 2310u, 2052u,
    3848u, 3591u, 3335u, 3333u, 2824u, 3592u, 2567u, 3078u, 3849u, 2568u, 3336u, 3079u, 2825u, 3593u, 2312u,
    3080u, 2057u, 2569u, 3337u, 2056u, 3338u, 1801u, 2313u, 3081u, 2314u, 3082u, 2826u, 2570u, 1290u, 2058u,
    1802u, 1546u, 266u, 1034u, 778u, 522u, 774u, 0u, 0u, 0u, 6u, 262u, 6u, 6u, 1030u, 1286u, 1542u, 6u,
    2054u, 2310u, 2566u, 2822u, 3078u, 3334u, 3590u, 3846u, 4102u, 4358u, 4614u, 4870u, 5126u, 5382u, 5638u,
    5894u, 6150u, 6406u, 6662u, 6918u, 7174u, 7430u, 7686u, 7942u, 8198u, 8454u, 8710u, 8966u, 9222u, 9478u,
    9734u, 9990u, 10246u, 10502u, 10758u, 11014u, 11270u, 11526u, 11782u, 12038u, 12294u, 12550u, 12806u,
    13062u, 13318u, 13574u, 13830u, 14086u, 14342u, 14598u, 14854u, 15110u, 15366u, 15622u, 15878u, 16134u);
// Table 9-5, nC = -1 (chroma DC): [TotalCoeff * 4 + TrailingOnes].
const uint CHROMA_DC_TOKEN[20] = uint[20](258u, 0u, 0u, 0u, 1798u, 257u, 0u, 0u, 1030u, 1542u, 259u, 0u,
    774u, 775u, 519u, 1286u, 518u, 776u, 520u, 7u);
// Tables 9-7 and 9-8 total_zeros for 4x4 blocks: [(TotalCoeff - 1) * 16 + total_zeros].
const uint TOTAL_ZEROS[240] = uint[240](257u, 771u, 515u, 772u, 516u, 773u, 517u, 774u, 518u, 775u, 519u,
    776u, 520u, 777u, 521u, 265u, 1795u, 1539u, 1283u, 1027u, 771u, 1284u, 1028u, 772u, 516u, 773u, 517u,
    774u, 518u, 262u, 6u, 0u, 1284u, 1795u, 1539u, 1283u, 1028u, 772u, 1027u, 771u, 516u, 773u, 517u, 262u,
    261u, 6u, 0u, 0u, 773u, 1795u, 1284u, 1028u, 1539u, 1283u, 1027u, 772u, 771u, 516u, 517u, 261u, 5u, 0u,
    0u, 0u, 1284u, 1028u, 772u, 1795u, 1539u, 1283u, 1027u, 771u, 516u, 261u, 260u, 5u, 0u, 0u, 0u, 0u, 262u,
    261u, 1795u, 1539u, 1283u, 1027u, 771u, 515u, 260u, 259u, 6u, 0u, 0u, 0u, 0u, 0u, 262u, 261u, 1283u,
    1027u, 771u, 770u, 515u, 260u, 259u, 6u, 0u, 0u, 0u, 0u, 0u, 0u, 262u, 260u, 261u, 771u, 770u, 514u,
    515u, 259u, 6u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 262u, 6u, 260u, 770u, 514u, 259u, 258u, 261u, 0u, 0u, 0u, 0u,
    0u, 0u, 0u, 0u, 261u, 5u, 259u, 770u, 514u, 258u, 260u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 4u, 260u,
    259u, 515u, 257u, 771u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 4u, 260u, 258u, 257u, 259u, 0u, 0u, 0u,
    0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 3u, 259u, 257u, 258u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 2u,
    258u, 257u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 1u, 257u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u,
    0u, 0u, 0u, 0u, 0u, 0u);
// Table 9-9a total_zeros for chroma DC: [(TotalCoeff - 1) * 4 + total_zeros].
const uint CHROMA_DC_TOTAL_ZEROS[12] = uint[12](257u, 258u, 259u, 3u, 257u, 258u, 2u, 0u, 257u, 1u, 0u, 0u);
// Table 9-10 run_before: [(min(zerosLeft, 7) - 1) * 16 + run_before].
const uint RUN_BEFORE[112] = uint[112](257u, 1u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u,
    257u, 258u, 2u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 770u, 514u, 258u, 2u, 0u, 0u, 0u, 0u,
    0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 770u, 514u, 258u, 259u, 3u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u,
    770u, 514u, 771u, 515u, 259u, 3u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 770u, 3u, 259u, 771u, 515u,
    1283u, 1027u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 1795u, 1539u, 1283u, 1027u, 771u, 515u, 259u, 260u,
    261u, 262u, 263u, 264u, 265u, 266u, 267u, 0u);
// Table 9-4, inter column: coded_block_pattern → codeNum.
const uint INTER_CBP_CODE[48] = uint[48](0u, 2u, 3u, 7u, 4u, 8u, 17u, 13u, 5u, 18u, 9u, 14u, 10u, 15u, 16u,
    11u, 1u, 32u, 33u, 36u, 34u, 37u, 44u, 40u, 35u, 45u, 38u, 41u, 39u, 42u, 43u, 19u, 6u, 24u, 25u, 20u,
    26u, 21u, 46u, 28u, 27u, 47u, 22u, 29u, 23u, 30u, 31u, 12u);

// Table 9-4, Intra_4x4 column: coded_block_pattern → codeNum.
const uint INTRA4_CBP_CODE[48] = uint[48](3u, 29u, 30u, 17u, 31u, 18u, 37u, 8u, 32u, 38u, 19u, 9u, 20u, 10u,
    11u, 2u, 16u, 33u, 34u, 21u, 35u, 22u, 39u, 4u, 36u, 40u, 23u, 5u, 24u, 6u, 7u, 1u, 41u, 42u, 43u, 25u,
    44u, 26u, 46u, 12u, 45u, 47u, 27u, 13u, 28u, 14u, 15u, 0u);

uint bwAcc = 0u;
int bwN = 0;
int bwPos = 0;
int bwBase = 0;
int bwLimit = 0;

void put(uint v, int n) {
    if (n == 0) return;
    int room = 32 - bwN;
    if (n < room) { bwAcc = (bwAcc << uint(n)) | v; bwN += n; return; }
    int rest = n - room;
    uint hi = rest == 0 ? v : (v >> uint(rest));
    uint word = room == 32 ? hi : ((bwAcc << uint(room)) | hi);
    if (bwPos < bwLimit) bits[bwBase + bwPos] = word;
    bwPos++;
    bwAcc = rest == 0 ? 0u : (v & ((1u << uint(rest)) - 1u));
    bwN = rest;
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
    if (by2 < 0) { if (mbY == 0) hasB = false; else { mbB = mbIndex - u_size.z; by2 = size - 1; } }
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
        if (nC < 0) putCode(CHROMA_DC_TOKEN[0]);
        else putCode(COEFF_TOKEN[(nC < 2 ? 0 : (nC < 4 ? 1 : (nC < 8 ? 2 : 3))) * 68]);
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
    if (nC < 0) putCode(CHROMA_DC_TOKEN[total * 4 + t1]);
    else {
        int table = nC < 2 ? 0 : (nC < 4 ? 1 : (nC < 8 ? 2 : 3));
        putCode(COEFF_TOKEN[table * 68 + total * 4 + t1]);
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
        if (nC < 0) putCode(CHROMA_DC_TOTAL_ZEROS[(total - 1) * 4 + totalZeros]);
        else putCode(TOTAL_ZEROS[(total - 1) * 16 + totalZeros]);
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
        putCode(RUN_BEFORE[(min(zerosLeft, 7) - 1) * 16 + run]);
        zerosLeft -= run;
        i = next;
    }
}

void main() {
    int n = u_size.z * u_size.w;
    mbIndex = int(gl_GlobalInvocationID.x);
    if (mbIndex >= n) return;
    mbX = mbIndex % u_size.z;
    mbY = mbIndex / u_size.z;
    bool pSlice = u_code.y == 1;
    bwBase = (mbIndex + 1) * u_code.z;
    bwLimit = u_code.z - 1;
    uint info = mbs[mbIndex * MB_WORDS + MB_INFO];
    if (infoSkipped(info)) { lens[mbIndex + 1] = 0u; return; }
    int cbp = infoCBP(info);
    int cbpLuma = cbp & 15, cbpChroma = cbp >> 4;
    bool intra = infoKind(info) == KIND_I16;
    bool intra4 = infoKind(info) == KIND_I4;
    if (pSlice) ue(mbs[mbIndex * MB_WORDS + MB_SKIPRUN]);
    if (intra4) {
        ue(pSlice ? 5u : 0u);   // I_NxN
        for (int b = 0; b < 16; b++) {
            int bx = blkX(b), by = blkY(b);
            int mode = modeOf(mbIndex, b);
            int predMode = 2;
            if ((bx > 0 || mbX > 0) && (by > 0 || mbY > 0)) {
                int ma = bx > 0 ? modeOf(mbIndex, blkIndex(bx - 1, by)) : modeOf(mbIndex - 1, blkIndex(3, by));
                int mb_ = by > 0 ? modeOf(mbIndex, blkIndex(bx, by - 1)) : modeOf(mbIndex - u_size.z, blkIndex(bx, 3));
                predMode = min(ma, mb_);
            }
            if (mode == predMode) put(1u, 1);
            else { put(0u, 1); put(uint(mode < predMode ? mode : mode - 1), 3); }
        }
        ue(uint(infoChromaMode(info)));
        ue(INTRA4_CBP_CODE[cbp]);
        if (cbp != 0) se(0);   // mb_qp_delta
        for (int b = 0; b < 16; b++) {
            if ((cbpLuma & (1 << (b >> 2))) != 0)
                residualBlock(MB_LUMA + b * 8, 0, 16, predictedCount(blkX(b), blkY(b), -1), nnzOf(mbIndex, b) == 0);
        }
    } else if (intra) {
        ue(uint((pSlice ? 5 : 0) + 1 + infoLumaMode(info) + 4 * cbpChroma + (cbpLuma != 0 ? 12 : 0)));
        ue(uint(infoChromaMode(info)));
        se(0);   // mb_qp_delta
        residualBlock(MB_LUMADC, 0, 16, predictedCount(0, 0, -1), false);
        if (cbpLuma != 0) {
            for (int b = 0; b < 16; b++)
                residualBlock(MB_LUMA + b * 8, 1, 15, predictedCount(blkX(b), blkY(b), -1), nnzOf(mbIndex, b) == 0);
        }
    } else {
        ue(0u);   // P_L0_16x16
        ivec2 mv = unpackMV(mbs[mbIndex * MB_WORDS + MB_MV]);
        ivec2 mvp = unpackMV(mbs[mbIndex * MB_WORDS + MB_MVP]);
        se(mv.x - mvp.x);
        se(mv.y - mvp.y);
        ue(INTER_CBP_CODE[cbp]);
        if (cbp != 0) se(0);
        for (int b = 0; b < 16; b++) {
            if ((cbpLuma & (1 << (b >> 2))) != 0)
                residualBlock(MB_LUMA + b * 8, 0, 16, predictedCount(blkX(b), blkY(b), -1), nnzOf(mbIndex, b) == 0);
        }
    }
    if (cbpChroma != 0) {
        residualBlock(MB_CHROMADC, 0, 4, -1, false);
        residualBlock(MB_CHROMADC + 2, 0, 4, -1, false);
    }
    if (cbpChroma == 2) {
        for (int c = 0; c < 2; c++) {
            for (int b = 0; b < 4; b++)
                residualBlock(MB_CHROMAAC + (c * 4 + b) * 8, 1, 15, predictedCount(b & 1, b >> 1, c), nnzOf(mbIndex, 16 + c * 4 + b) == 0);
        }
    }
    int length = bwPos * 32 + bwN;
    if (bwN > 0 && bwPos < bwLimit) bits[bwBase + bwPos] = bwAcc << uint(32 - bwN);
    lens[mbIndex + 1] = bwPos < bwLimit ? uint(length) : 0xffffffffu;
}
