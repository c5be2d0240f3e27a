#version 310 es
// H.264 encoder, packing (docs/ARCHITECTURE.md, "The GPU encoder"). SCAN:
// one work group sums the slots' bit lengths (each slice's header, its
// macroblocks, its tail) into their starts, each slice from a word of its
// own, and writes the frame's size, each slice's bits and the gather
// pass's indirect dispatch. GATHER: one invocation per output
// word fetches its 32 bits from the slots that cover them, bytes in stream
// order.
#ifdef SCAN
layout(local_size_x = 1024) in;
#else
layout(local_size_x = 64) in;
#endif

layout(std430, binding = 5) readonly buffer Bits { uint bits[]; };
layout(std430, binding = 6) coherent buffer Lens { uint lens[]; };   // [0, slots) lengths, [slots, 2 slots) starts
layout(std430, binding = 7) buffer Result { uint result[]; };  // groups x, y, z, total bits, bytes, overflowed, slices, -, each slice's bits
#ifndef SCAN
layout(std430, binding = 8) writeonly buffer Out { uint outWords[]; };
#endif

uniform ivec4 u_code;   // qp, P slice, -, output words (a slot's words: SLOT_WORDS, defined with the source)

#ifdef SCAN
shared uint sSum[1024];
shared uint sOverflow;
// Per slice: where its bits begin in the output less where its header slot
// begins in the plain sum of the slots before it.
shared int sShift[MAX_SLICES];

void main() {
    int slots = slotCount(), slices = sliceCount();
    int t = int(gl_LocalInvocationIndex);
    int chunk = (slots + 1023) / 1024;
    int first = t * chunk, end = min(slots, first + chunk);
    if (t == 0) sOverflow = 0u;
    barrier();
    uint sum = 0u;
    bool overflow = false;
    for (int i = first; i < end; i++) {
        uint l = lens[i];
        if (l == 0xffffffffu) { overflow = true; l = 0u; }
        sum += l;
    }
    sSum[t] = sum;
    if (overflow) atomicOr(sOverflow, 1u);
    barrier();
    for (int step = 1; step < 1024; step <<= 1) {
        uint v = sSum[t];
        if (t >= step) v += sSum[t - step];
        barrier();
        sSum[t] = v;
        barrier();
    }
    uint start = t > 0 ? sSum[t - 1] : 0u;
    for (int i = first; i < end; i++) {
        lens[slots + i] = start;
        uint l = lens[i];
        start += l == 0xffffffffu ? 0u : l;
    }
    memoryBarrierBuffer();
    barrier();
    // Each slice begins at a word of its own (its NAL unit's payload is
    // whole bytes): the slices' bits, their starts rounded up.
    if (t == 0) {
        uint total = sSum[1023], at = 0u;
        for (int s = 0; s < slices; s++) {
            uint begin = lens[slots + headerSlot(s)];
            uint after = s + 1 < slices ? lens[slots + headerSlot(s + 1)] : total;
            sShift[s] = int(at) - int(begin);
            result[8 + s] = after - begin;
            at += (after - begin + 31u) & ~31u;
        }
        uint words = at / 32u;
        uint over = sOverflow;
        if (words > uint(u_code.w)) { over = 1u; words = uint(u_code.w); }
        result[5] = over;
        result[0] = (words + 63u) / 64u;
        result[1] = 1u;
        result[2] = 1u;
        result[3] = total;
        result[4] = words * 4u;
        result[6] = uint(slices);
    }
    barrier();
    int perSlice = u_sliceRows * u_size.z + 2;
    for (int i = first; i < end; i++) lens[slots + i] = uint(int(lens[slots + i]) + sShift[min(i / perSlice, slices - 1)]);
}
#else
int slots;

// `count` (1-32) bits of slot `s` from its bit `offset`, right-aligned.
uint slotBits(int s, uint offset, int count) {
    int base = s * SLOT_WORDS + int(offset >> 5u);
    uint shift = offset & 31u;
    uint v = bits[base] << shift;
    if (shift != 0u) v |= bits[base + 1] >> (32u - shift);
    return count == 32 ? v : v >> uint(32 - count);
}

// The slot after `s` whose bits `pos` reaches: the last one starting at or
// before it (a P_Skip macroblock's slot is empty and starts where the next
// one does, so a run of them is stepped over at once, not slot by slot),
// or s + 1 where none does (`pos` lies in the zero bits before a slice).
int slotAt(int s, uint pos) {
    int lo = s + 1;
    if (lo >= slots || lens[slots + lo] > pos) return lo;
    // Steps doubling until one passes `pos`, then halving back.
    int step = 1, hi = lo + 1;
    while (hi < slots && lens[slots + hi] <= pos) { lo = hi; step <<= 1; hi = lo + step; }
    hi = min(hi - 1, slots - 1);
    while (lo < hi) {
        int mid = (lo + hi + 1) >> 1;
        if (lens[slots + mid] <= pos) lo = mid; else hi = mid - 1;
    }
    return lo;
}

void main() {
    slots = slotCount();
    uint w = gl_GlobalInvocationID.x;
    uint words = min(result[4] / 4u, uint(u_code.w));
    if (w >= words) return;
    uint pos = w * 32u;
    // The last slot starting at or before pos.
    int lo = 0, hi = slots - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) >> 1;
        if (lens[slots + mid] <= pos) lo = mid; else hi = mid - 1;
    }
    int s = lo;
    uint word = 0u;
    int need = 32;
    while (need > 0 && s < slots) {
        uint start = lens[slots + s], len = lens[s];
        if (len == 0xffffffffu) len = 0u;
        if (pos < start) {
            // Between slices: zero bits up to the next one's first word.
            int take = min(need, int(start - pos));
            word = take == 32 ? 0u : word << uint(take);
            need -= take;
            pos += uint(take);
            continue;
        }
        if (pos >= start + len) { s = slotAt(s, pos); continue; }
        int take = min(need, int(start + len - pos));
        uint v = slotBits(s, pos - start, take);
        word = take == 32 ? v : ((word << uint(take)) | v);
        need -= take;
        pos += uint(take);
    }
    if (need > 0 && need < 32) word <<= uint(need);
    outWords[w] = (word >> 24) | ((word >> 8) & 0xff00u) | ((word << 8) & 0xff0000u) | (word << 24);
}
#endif
