// The H.264 encoder's motion vector predictor and P_Skip vector of a
// macroblock from its neighbours' vectors (8.4.1.1, 8.4.1.3): the
// raster-order pass's P_Skip decision (from the final ones; it also writes
// each macroblock's predictor for CAVLC) and its probe rounds' guesses.
// Included after the pass's record buffer (`mbs`).

struct Neighbour { bool available; int ref; ivec2 mv; };

// A neighbour from its record's MB_INFO and MB_MV words.
Neighbour neighbourOf(bool available, uint info, uint mv) {
    Neighbour n;
    n.available = available;
    n.ref = available && infoKind(info) == KIND_P16 ? 0 : -1;
    n.mv = n.ref == 0 ? unpackMV(mv) : ivec2(0);
    return n;
}

int median3(int a, int b, int c) { return max(min(a, b), min(max(a, b), c)); }

// The vector predictor and the P_Skip vector of a P macroblock from its
// left (a), upper (b), upper right (c) and upper left (d) neighbours.
void predictorsOf(Neighbour a, Neighbour b, Neighbour c, Neighbour d, out ivec2 mvp, out ivec2 skipMV) {
    if (!c.available) c = d;
    Neighbour pb = b, pc = c;
    if (!b.available && !c.available && a.available) { pb = a; pc = a; }
    int matches = (a.ref == 0 ? 1 : 0) + (pb.ref == 0 ? 1 : 0) + (pc.ref == 0 ? 1 : 0);
    if (matches == 1) mvp = a.ref == 0 ? a.mv : (pb.ref == 0 ? pb.mv : pc.mv);
    else mvp = ivec2(median3(a.mv.x, pb.mv.x, pc.mv.x), median3(a.mv.y, pb.mv.y, pc.mv.y));
    skipMV = mvp;
    if (!a.available || !b.available || (a.ref == 0 && a.mv == ivec2(0)) || (b.ref == 0 && b.mv == ivec2(0)))
        skipMV = ivec2(0);
}
