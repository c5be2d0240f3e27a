import CGLES

/// GPU timestamps (GL_EXT_disjoint_timer_query's counters) at each
/// render-thread batch's first and last command: how long the GPU ran the
/// batches, and how long it stood idle between one batch's end and the
/// next one's start, as far as this context goes (other contexts' work and
/// calls between batches count as idle). A timestamp is taken once every
/// command before it has completed, so the next batch's start marks when
/// its commands reached an idle GPU, or the previous batch's end where they
/// were queued behind it. A frame batch takes one more timestamp before its
/// first dispatch (its uploads and copies before it), and one that ends
/// with GPU-encoded pictures one before the encoder's first command (the
/// encoder's share of the batch, from there to its end, and its pictures)
/// and one after each of its passes that ends at a barrier (the pass's share,
/// from the stamp before it).
/// Owns its query objects; render thread only (they go with the context, so
/// the clock deletes none).
final class BatchClock {
    private let counter: PFNGLQUERYCOUNTEREXTPROC
    private let getResult: PFNGLGETQUERYOBJECTUI64VEXTPROC
    private var free: [GLuint] = []
    private var pending: [(start: GLuint, end: GLuint, dispatches: GLuint?, encoder: GLuint?, pictures: Int, passes: [(String, GLuint)])] = []
    private var open: GLuint?
    private var openDispatches: GLuint?
    private var openEncoder: GLuint?
    private var openPictures = 0
    private var openPasses: [(String, GLuint)] = []
    /// The previous batch's end, GPU nanoseconds (nil after a disjoint period).
    private var lastEnd: UInt64?

    init(counter: PFNGLQUERYCOUNTEREXTPROC, getResult: PFNGLGETQUERYOBJECTUI64VEXTPROC) {
        self.counter = counter
        self.getResult = getResult
    }

    /// Before a batch's first command.
    func start() {
        if open == nil { open = stamp() }
    }

    /// Before the batch's first dispatch, after its uploads and copies.
    func dispatchesStart() { mark(&openDispatches) }

    /// Before the GPU encoder's first command, which runs to the batch's end and encodes `pictures`.
    func encoderStarts(pictures: Int) {
        mark(&openEncoder)
        if openEncoder != nil { openPictures += pictures }
    }

    /// After the GPU encoder's pass `name` (its commands and a barrier after
    /// them), in a batch whose encoder started: the pass's time runs from the
    /// stamp before (the encoder's start or the pass before it).
    func encoderPassEnds(_ name: String) {
        if open != nil && openEncoder != nil { openPasses.append((name, stamp())) }
    }

    /// A timestamp inside the open batch, the first of its kind there.
    private func mark(_ at: inout GLuint?) {
        if open != nil && at == nil { at = stamp() }
    }

    /// After a batch's last command (before its fence).
    func end() {
        guard let s = open else { return }
        pending.append((s, stamp(), openDispatches, openEncoder, openPictures, openPasses))
        open = nil
        openDispatches = nil
        openEncoder = nil
        openPictures = 0
        openPasses = []
    }

    /// The batches whose timestamps have arrived, oldest first, without
    /// blocking: seconds the GPU ran them, stood idle before them, ran their
    /// uploads and copies, and ran their GPU encoder's passes (and its
    /// pictures), each pass's share by its name.
    func collect() -> GPUBatchTimes {
        var out = GPUBatchTimes()
        guard !pending.isEmpty else { return out }
        var disjoint: GLint = 0
        glGetIntegerv(GL.gpuDisjointEXT, &disjoint)
        if disjoint != 0 { lastEnd = nil }
        while let (s, e, dis, enc, pictures, passes) = pending.first {
            var available: GLuint = 0
            glGetQueryObjectuiv(e, GL.queryResultAvailable, &available)
            guard available != 0 else { break }
            func time(_ q: GLuint) -> GLuint64 {
                var t: GLuint64 = 0
                getResult(q, GL.queryResult, &t)
                return t
            }
            let t0 = time(s), t1 = time(e), td = dis.map(time) ?? 0, te = enc.map(time) ?? 0
            pending.removeFirst()
            free += [s, e] + [dis, enc].compactMap { $0 } + passes.map(\.1)
            // A disjoint period's (and a driver's nonsense) values are dropped.
            guard disjoint == 0, t1 >= t0, t1 - t0 < 60_000_000_000 else { lastEnd = nil; continue }
            out.batches += 1
            out.busy += Double(t1 - t0) / 1e9
            if dis != nil, td >= t0, td <= t1 { out.uploads += Double(td - t0) / 1e9 }
            if enc != nil, te >= t0, te <= t1 {
                out.encoder += Double(t1 - te) / 1e9
                out.encodedPictures += pictures
                if passes.contains(where: { $0.0 == Self.idrPass }) { out.idrBatches += 1 }
                // Each pass from the stamp before it; the batch's last commands after the last pass count toward that pass.
                var before = te
                for (i, (name, q)) in passes.enumerated() {
                    let t = i == passes.count - 1 ? t1 : time(q)
                    guard t >= before, t <= t1 else { continue }
                    out.encoderPasses[name, default: 0] += Double(t - before) / 1e9
                    before = t
                }
            }
            if let l = lastEnd, t0 > l, t0 - l < 60_000_000_000 { out.idle += Double(t0 - l) / 1e9 }
            lastEnd = t1
        }
        return out
    }

    /// The GPU encoder's pass that only a batch with IDR pictures runs.
    static let idrPass = "\(H264Programs.Pass.intra)"

    /// What `collect` found.
    struct GPUBatchTimes {
        var batches = 0
        var busy = 0.0, idle = 0.0
        /// Of `busy`, the uploads and copies before the first dispatch, and the GPU encoder's passes.
        var uploads = 0.0, encoder = 0.0
        /// The pictures the GPU encoder's passes of `encoder` encoded.
        var encodedPictures = 0
        /// Of those batches, the ones whose GPU encoder ran an IDR's intra pass (`intra`: a walk or a wavefront).
        var idrBatches = 0
        /// Of `encoder`, each pass's share by its name (`H264ComputeEncoder`'s passes).
        var encoderPasses: [String: Double] = [:]
    }

    /// A query (a free one, else a new one) with a GPU timestamp taken now.
    private func stamp() -> GLuint {
        let q = query()
        counter(q, GL.timestampEXT)
        return q
    }

    private func query() -> GLuint {
        if let q = free.popLast() { return q }
        var n: GLuint = 0
        glGenQueries(1, &n)
        return n
    }
}
