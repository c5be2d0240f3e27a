#version 310 es
// H.264 encoder, per frame (docs/ARCHITECTURE.md, "The GPU encoder"): one
// work group per frame. It counts the skipped run before each coded
// macroblock (from its slice's start: the raster-order pass marked the
// P_Skips and wrote each vector's predictor, from its neighbours' final
// vectors), then writes each slice's tail (the last skip run and the RBSP
// stop bit) into the slice's last slot.
layout(local_size_x = 1024) in;

layout(std430, binding = 3) buffer MBs { uint mbs[]; };
layout(std430, binding = 5) buffer Bits { uint bits[]; };
layout(std430, binding = 6) buffer Lens { uint lens[]; };

uniform ivec4 u_code;   // qp, P slice (1) or I slice (0), -, - (a slot's words: SLOT_WORDS, defined with the source)

shared int sLast[1024];

// The last macroblock of each slice that is not skipped (its first one
// less one where there is none).
shared int sSliceLast[MAX_SLICES];

void main() {
    int n = u_size.z * u_size.w;
    int t = int(gl_LocalInvocationIndex);
    bool pSlice = u_code.y == 1;
    int slices = sliceCount(), sliceMBs = u_sliceRows * u_size.z;
    int chunk = (n + 1023) / 1024;
    int first = t * chunk, end = min(n, first + chunk);
    for (int s = t; s < slices; s += 1024) sSliceLast[s] = s * sliceMBs - 1;
    barrier();
    int last = -1;
    for (int i = first; i < end; i++)
        if (!infoSkipped(mbs[i * MB_WORDS + MB_INFO])) last = i;
    sLast[t] = last;
    barrier();
    for (int step = 1; step < 1024; step <<= 1) {
        int v = sLast[t];
        if (t >= step) v = max(v, sLast[t - step]);
        barrier();
        sLast[t] = v;
        barrier();
    }
    // Runs count from the slice's first macroblock.
    int previous = t > 0 ? sLast[t - 1] : -1;
    for (int i = first; i < end; i++) {
        if (!infoSkipped(mbs[i * MB_WORDS + MB_INFO])) {
            int slice = i / sliceMBs;
            mbs[i * MB_WORDS + MB_SKIPRUN] = uint(i - max(previous, slice * sliceMBs - 1) - 1);
            previous = i;
            atomicMax(sSliceLast[slice], i);
        }
    }
    barrier();
    for (int s = t; s < slices; s += 1024) {
        // A slice's tail: mb_skip_run of the skipped macroblocks ending it, then rbsp_stop_one_bit.
        int run = min(n, (s + 1) * sliceMBs) - 1 - sSliceLast[s];
        int slot = tailSlot(s);
        uint word = 0u;
        int len = 0;
        if (pSlice && run > 0) {
            uint k = uint(run + 1);
            int m = findMSB(k);
            // 2m + 1 bits of ue(run), then the stop bit: at most 2·13 + 2 bits here.
            len = 2 * m + 2;
            uint code = (k << 1) | 1u;
            word = code << uint(32 - len);
        } else {
            len = 1;
            word = 0x80000000u;
        }
        bits[slot * SLOT_WORDS] = word;
        lens[slot] = uint(len);
    }
}
