// Shared by the H.264 encoder's passes that work out a macroblock's motion
// vector predictor and P_Skip vector from its neighbours' final vectors
// (8.4.1.1, 8.4.1.3): h264finish.comp, and h264deblock.comp's P_Skip
// decision. Included after the pass's record buffer (`mbs`).

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

// The vector predictor and the P_Skip vector of the P macroblock at (x, y).
void predictors(int x, int y, out ivec2 mvp, out ivec2 skipMV) {
    Neighbour a = neighbour(x - 1, y), b = neighbour(x, y - 1), c = neighbour(x + 1, y - 1);
    if (!c.available) c = neighbour(x - 1, y - 1);
    Neighbour pb = b, pc = c;
    if (!b.available && !c.available && a.available) { pb = a; pc = a; }
    int matches = (a.ref == 0 ? 1 : 0) + (pb.ref == 0 ? 1 : 0) + (pc.ref == 0 ? 1 : 0);
    if (matches == 1) mvp = a.ref == 0 ? a.mv : (pb.ref == 0 ? pb.mv : pc.mv);
    else mvp = ivec2(median3(a.mv.x, pb.mv.x, pc.mv.x), median3(a.mv.y, pb.mv.y, pc.mv.y));
    skipMV = mvp;
    if (!a.available || !b.available || (a.ref == 0 && a.mv == ivec2(0)) || (b.ref == 0 && b.mv == ivec2(0)))
        skipMV = ivec2(0);
}
