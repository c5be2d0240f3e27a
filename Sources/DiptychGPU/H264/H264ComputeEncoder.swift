import CGLES
import DiptychCore

/// One picture the GPU encoder wrote: an Annex B access unit (SPS and PPS before each IDR slice).
public struct H264Picture: Sendable {
    public var data: [UInt8]
    public var keyframe: Bool
    public var pts: MediaTime
}

/// An H.264 encoder made of GLES 3.1 compute passes (docs/ARCHITECTURE.md,
/// "The GPU encoder"): Constrained Baseline, I_16x16, I_NxN (Intra_4x4), P_L0_16x16 and
/// P_Skip, quarter-sample motion, CAVLC, the in-loop deblocking filter, slices of whole rows. It reads an NV12
/// storage buffer (the compute composite's output) and returns the bitstream;
/// the reconstructed reference and every macroblock's record stay on the GPU.
/// Owns its programs and buffers. Render thread only (a GL context current).
final class H264ComputeEncoder {
    let format: H264StreamFormat
    let settings: GPUH264Settings
    /// 32-bit words of one macroblock's slot in the bit buffer.
    static let slotWords = 512
    /// 32-bit words of one macroblock's record (`MB_WORDS` in `h264common.glsl`).
    static let recordWords = 220

    let programs: H264Programs
    /// Reconstructed pictures (NV12 at the coded size, packed four bytes a word): the one written and the reference.
    private var pictures: [GLuint] = [0, 0]
    /// Macroblock records of this picture and the previous one.
    private var records: [GLuint] = [0, 0]
    private var bits: GLuint = 0, lens: GLuint = 0
    /// The reference's sub-sample planes (`h264interp.comp`): four padded luma planes, remade for each P picture.
    private var planes: GLuint = 0
    /// The raster-order pass's progress: per macroblock row, the picture's tag and the macroblocks filtered; then per row the
    /// macroblocks decided; then each macroblock's final word for the deciding row below (`h264deblock.comp`).
    private var progress: GLuint = 0
    /// The probe rounds' lists of macroblocks to probe, one a round (`probeListWords` each): an indirect dispatch's three
    /// words, then their indices. Each round's guess pass empties the other round's list (`h264deblock.comp`).
    private var probeList: GLuint = 0
    private var probeListWords: Int { 3 + macroblocks }
    /// The tag of the picture being recorded (1 to 65535, then 1 again: its rows' counts from an earlier picture differ).
    private var deblockTag = 0
    /// The tag of the last P picture's final words (1 to 63, then 1 again): only P pictures write them, so consecutive ones differ.
    private var finalTag = 0
    /// Per picture in flight: its result words, its bitstream and the fence after its passes.
    private let results: H264ResultSlots
    /// Whether the result slots are persistently mapped.
    var mapped: Bool { results.mapped }
    private(set) var current = 0
    private var frameNum = 0
    private var idrCount = 0
    private var sinceKeyframe = 0
    private var started = false
    private(set) var rateControl: H264RateControl
    let outputWords: Int
    /// Macroblock rows a slice, and the picture's slices (`GPUH264Settings.slices`).
    let sliceRows: Int
    let sliceCount: Int
    /// The bit buffer's slots: each slice's header, its macroblocks', its tail (`mbSlot` in `h264common.glsl`).
    var slotCount: Int { macroblocks + 2 * sliceCount }
    func headerSlot(_ slice: Int) -> Int { slice * (sliceRows * format.mbWidth + 2) }

    typealias Pass = H264Programs.Pass

    var pictureRowBytes: Int { format.mbWidth * 16 }
    var pictureUVOffset: Int { pictureRowBytes * format.mbHeight * 16 }
    var pictureBytes: Int { Self.pictureBytes(format) }
    /// A picture's bytes in the encoder's layout: whole macroblocks, luma rows then interleaved chroma rows.
    static func pictureBytes(_ f: H264StreamFormat) -> Int { f.mbWidth * 16 * f.mbHeight * 24 }
    var macroblocks: Int { format.mbWidth * format.mbHeight }
    /// The padding of each sub-sample plane (`PLANE_PAD`), and the planes' bytes.
    static let planePad = 4
    var planeBytes: Int { 4 * (pictureRowBytes + 2 * Self.planePad) * (format.mbHeight * 16 + 2 * Self.planePad) }

    /// Per-pass wall time (ms) when `profiling` (each pass waited for: benchmarks only).
    var profiling = false
    private(set) var passMs: [Pass: Double] = [:]
    func resetPassTimes() { passMs = [:] }

    /// `depth`: pictures that may be encoded before the oldest is collected.
    /// `bufferStorage` (GL_EXT_buffer_storage), where the context has it, maps the result slots persistently.
    /// Whether the pictures are deblocked (always, but in `diptych-gpu-bench --encode --deblock off`, which times the pass).
    let deblocking: Bool
    /// Whether vectors go to the quarter sample (always, but in
    /// `diptych-gpu-bench --encode --subpel off`, which times the two passes
    /// it takes: the planes and the sub-sample search).
    let subpel: Bool

    /// `keepsReconstructions`: each picture's reconstruction is kept for
    /// `reconstruction(of:)` until its slot is taken again.
    init(format: H264StreamFormat, settings: GPUH264Settings, programs: H264Programs, depth: Int = 2,
         bufferStorage: PFNGLBUFFERSTORAGEEXTPROC? = nil, deblocking: Bool = true, subpel: Bool = true,
         keepsReconstructions: Bool = false) throws(GPUError) {
        self.deblocking = deblocking
        self.subpel = subpel
        try settings.validate()
        guard format.width >= 16, format.height >= 16, format.width % 2 == 0, format.height % 2 == 0 else {
            throw .encode("picture \(format.width)x\(format.height): the GPU encoder takes even sizes of at least 16x16")
        }
        // The tail slot's skip run has to fit one word (ue of up to 2^15 - 1 macroblocks).
        guard format.mbWidth * format.mbHeight < 32_767 else {
            throw .encode("picture \(format.width)x\(format.height) has more than 32,766 macroblocks")
        }
        sliceRows = Self.sliceRows(settings.slices, of: format)
        sliceCount = (format.mbHeight + sliceRows - 1) / sliceRows
        self.format = format
        self.settings = settings
        rateControl = H264RateControl(mode: settings.rateMode, fps: format.rate.fps, pixels: format.width * format.height)
        // Room for any picture this encoder can write: 2 bytes a pixel is more than an I_PCM picture takes.
        outputWords = max(1024, format.mbWidth * format.mbHeight * 256 * 2 / 4)
        self.programs = programs
        // A picture's result words: the gather pass's indirect dispatch, the bits, the bytes, overflow, the slices, then
        // each slice's bits (`h264pack.comp`).
        results = try H264ResultSlots(depth: depth, resultWords: 8 + sliceCount, outputWords: outputWords, bufferStorage: bufferStorage,
                                      reconstructionBytes: keepsReconstructions ? Self.pictureBytes(format) : nil)
        let n = macroblocks
        func buffer(_ bytes: Int) -> GLuint {
            var b: GLuint = 0
            glGenBuffers(1, &b)
            glBindBuffer(GL.shaderStorageBuffer, b)
            glBufferData(GL.shaderStorageBuffer, GLsizeiptr(bytes), nil, GL.dynamicCopy)
            return b
        }
        pictures = [buffer(pictureBytes), buffer(pictureBytes)]
        records = [buffer(n * Self.recordWords * 4), buffer(n * Self.recordWords * 4)]
        bits = buffer((slotCount * Self.slotWords + 1) * 4)
        progress = buffer((2 * format.mbHeight + n) * 4)
        // No count and no final word yet: a wait ends only on this picture's tag (never 0).
        let zeros = [UInt32](repeating: 0, count: 2 * format.mbHeight + n)
        glBufferSubData(GL.shaderStorageBuffer, 0, GLsizeiptr(zeros.count * 4), zeros)
        probeList = buffer(Self.probeRounds * probeListWords * 4)
        // Every list empty: its dispatch's words 0, 1, 1.
        for round in 0..<Self.probeRounds {
            glBufferSubData(GL.shaderStorageBuffer, GLintptr(round * probeListWords * 4), 12, [UInt32(0), 1, 1])
        }
        planes = buffer(planeBytes)
        lens = buffer(2 * slotCount * 4)
        glBindBuffer(GL.shaderStorageBuffer, 0)
        let code = glGetError()
        guard code == GL_NO_ERROR else { release(); throw .gl(label: "GPU encoder buffers for \(format.width)x\(format.height)", code: code) }
    }

    /// Macroblock rows a slice of `format`'s pictures in `slices` slices (at most one a row, as x264).
    static func sliceRows(_ slices: Int, of format: H264StreamFormat) -> Int {
        let n = min(max(1, slices), format.mbHeight)
        return (format.mbHeight + n - 1) / n
    }

    private var released = false

    func release() {
        released = true
        let all = pictures + records + [bits, lens, progress, probeList, planes]
        let live = all.filter { $0 != 0 }
        glDeleteBuffers(GLsizei(live.count), live)
        pictures = [0, 0]; records = [0, 0]; bits = 0; lens = 0; progress = 0; probeList = 0; planes = 0
        results.release()
    }

    deinit { precondition(released, "H264ComputeEncoder released without release()") }

    /// Rounds of the choice pass (`CHOICE_ROUNDS` in its source), each
    /// reading the neighbours' choice of the round before: on bikes scaled
    /// to 1920x816, one round gave +78.3 % BD-rate against x264 ultrafast,
    /// two +64.4 %, three +54.3 %, four +51.2 % (`bench/results/gpu-h264-quality.md`).
    static let choiceRounds = 3

    /// Rounds of the P_Skip probe before the raster walk (`PROBE_ROUND` in
    /// `h264deblock.comp`): two, as the record has room for and as each
    /// round's guess empties the other round's list. The bits are the same
    /// without them; each round takes probes out of the walk's chain.
    static let probeRounds = 2

    /// x264's lambda for SAD-based motion costs, by QP.
    static let lambda: [Int32] = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5, 6, 6, 7, 8, 9,
                                  10, 11, 13, 14, 16, 18, 20, 23, 25, 29, 32, 36, 40, 45, 51, 57, 64, 72, 81, 91]

    /// A picture whose passes were recorded; `collect` maps its bitstream.
    struct Pending { var idr: Bool; var pts: MediaTime; var slot: Int; var qp: Int; var ticket: Int }

    /// One picture to encode: the NV12 picture in storage buffer `source`
    /// (`rowBytes` a row, the interleaved UV rows at `uvOffset`).
    struct Job {
        var encoder: H264ComputeEncoder
        var source: GLuint
        var rowBytes: Int
        var uvOffset: Int
        var pts: MediaTime
        var keyframe = false
    }

    /// Records the passes of one picture.
    func encode(source: GLuint, rowBytes: Int, uvOffset: Int, pts: MediaTime, keyframe: Bool = false) -> Pending {
        Self.encode([Job(encoder: self, source: source, rowBytes: rowBytes, uvOffset: uvOffset, pts: pts, keyframe: keyframe)],
                    programs: programs)[0]
    }

    /// A picture's state while its passes are recorded.
    private struct Prepared {
        var job: Job
        var pending: Pending
        var reference: Int
        var lambda: Int32
        /// The raster-order pass's tags: this picture's for its progress counts (bits 0-15), its final words' (`finalTag`, bits 16 up).
        var tags: Int32
    }

    /// Whether `job`'s picture is an IDR by the stream's own clock (its first, one asked for, or the interval up).
    private func idrDue(_ job: Job) -> Bool { !started || job.keyframe || sinceKeyframe >= settings.keyframeInterval }

    /// Whether the stream's next IDR falls due within the last quarter of its interval (intervals of 4 and more).
    private var nearIDR: Bool {
        let k = settings.keyframeInterval
        return started && k >= 4 && sinceKeyframe >= k - k / 4
    }

    /// An IDR is a chain of dependent macroblocks (a walk, or a wavefront of
    /// dispatches) that leaves most of the GPU idle: alone at 1080p it takes
    /// about 6 ms as a walk on an H100, sixteen together about 15. So where
    /// one picture of a batch is an IDR, the pictures of other streams whose
    /// IDR falls due within the last quarter of their interval take theirs
    /// now, in the same pass; streams that share batches keep their
    /// keyframes together from then on.
    static func groupingIDRs(_ jobs: [Job]) -> [Job] {
        guard jobs.count > 1, jobs.contains(where: { $0.encoder.idrDue($0) }) else { return jobs }
        return jobs.map { job in
            var job = job
            if job.encoder.nearIDR { job.keyframe = true }
            return job
        }
    }

    /// Chooses the picture's type and QP, writes its slices' headers into their slots and takes a result slot.
    private func prepare(_ job: Job) -> Prepared {
        let idr = idrDue(job)
        started = true
        if idr { frameNum = 0; sinceKeyframe = 0 }
        let (pictureQP, ticket) = rateControl.plan(keyframe: idr)
        for slice in 0..<sliceCount {
            let header = format.sliceHeader(firstMB: slice * sliceRows * format.mbWidth, alone: sliceCount == 1, idr: idr, frameNum: frameNum,
                                            idrPicID: idrCount % 2, qp: pictureQP, deblocking: deblocking)
            let w = header.words, slot = headerSlot(slice)
            glBindBuffer(GL.shaderStorageBuffer, bits)
            glBufferSubData(GL.shaderStorageBuffer, GLintptr(slot * Self.slotWords * 4), GLsizeiptr(w.count * 4), w)
            var headerBits = UInt32(header.count)
            glBindBuffer(GL.shaderStorageBuffer, lens)
            glBufferSubData(GL.shaderStorageBuffer, GLintptr(slot * 4), 4, &headerBits)
        }
        glBindBuffer(GL.shaderStorageBuffer, 0)
        if idr { idrCount += 1 }
        frameNum += 1
        sinceKeyframe += 1
        let slotIndex = results.claim()
        let pending = Pending(idr: idr, pts: job.pts, slot: slotIndex, qp: pictureQP, ticket: ticket)
        deblockTag = deblockTag % 65535 + 1
        if !idr { finalTag = finalTag % 63 + 1 }
        return Prepared(job: job, pending: pending, reference: current ^ 1, lambda: Self.lambda[pictureQP],
                        tags: Int32(deblockTag | finalTag << 16))
    }

    /// Binds the picture's buffers and sets `pass`'s uniforms (its program in use).
    private func bind(_ p: Prepared, _ pass: Pass, diagonal: Int = -1) {
        let slot = p.pending.slot
        // Only the buffers the pass's program reads or writes (CAVLC's tables, binding 9, are the context's).
        for binding in programs.bindings[pass]! where binding != H264CAVLCTables.binding {
            let buffer: GLuint = switch binding {
            case 0: p.job.source
            case 1: pictures[current]
            case 2: pictures[p.reference]
            case 3: records[current]
            case 4: records[p.reference]
            case 5: bits
            case 6: lens
            case 7: results.result(slot)
            case 8: results.output(slot)
            case 10: progress
            case 11: planes
            case 12: probeList
            default: preconditionFailure("the GPU encoder's \(pass) pass reads storage binding \(binding), which none of its buffers has")
            }
            glBindBufferBase(GL.shaderStorageBuffer, binding, buffer)
        }
        let l = programs.locations[pass]!
        if l.size >= 0 { glUniform4i(l.size, Int32(format.width), Int32(format.height), Int32(format.mbWidth), Int32(format.mbHeight)) }
        if l.layout >= 0 { glUniform4i(l.layout, Int32(p.job.rowBytes), Int32(p.job.uvOffset), Int32(pictureRowBytes), Int32(pictureUVOffset)) }
        if l.sliceRows >= 0 { glUniform1i(l.sliceRows, Int32(sliceRows)) }
        let qp = Int32(p.pending.qp), kind: Int32 = p.pending.idr ? 0 : 1
        switch pass {
        case .intra, .intraWalk, .interpolate, .search, .refine, .subpel, .choose, .inter, .intraP: glUniform4i(l.code, qp, kind, p.lambda, Int32(max(0, diagonal)))
        case .deblock, .probeGuess, .probe:
            let d = H264Deblocking(qp: p.pending.qp)
            glUniform4i(l.code, d.thresholds, d.lumaTC0, d.chromaTC0, p.tags)
            glUniform4i(l.picture, p.pending.idr ? 0 : 1, qp, p.lambda, deblocking ? 1 : 0)
            glUniform1i(l.step, Int32(diagonal))
        case .finish, .cavlc: glUniform4i(l.code, qp, kind, 0, 0)
        case .scan, .gather: glUniform4i(l.code, qp, kind, 0, Int32(outputWords))
        }
    }

    /// Records the passes of every job pass by pass: the same pass of
    /// different pictures runs together (they share no buffer), one barrier
    /// between passes. One fence covers the batch.
    static func encode(_ jobs: [Job], programs: H264Programs) -> [Pending] {
        // A picture an encoder: two of one stream would write the same reconstruction and records
        // (a caller's render waits for its frame, so a batch never holds two of one output).
        precondition(Set(jobs.map { ObjectIdentifier($0.encoder) }).count == jobs.count, "two pictures of one GPU encoder in a batch")
        let started = PassTimer.now()
        let prepared = groupingIDRs(jobs).map { $0.encoder.prepare($0) }
        RenderThread.add(.encoderHeaders, since: started)
        let profiling = jobs.contains { $0.encoder.profiling }
        var t0 = profiling ? PassTimer.now() : 0
        // After a pass and before a barrier (one follows every call): a render
        // thread's batch clock stamps it; `--profile` waits for it.
        func timed(_ pass: Pass) {
            RenderThread.encoderPassEnds("\(pass)")
            guard profiling else { return }
            glFinish()
            let t = PassTimer.now()
            for j in jobs { j.encoder.passMs[pass, default: 0] += Double(t - t0) / 1e6 / Double(jobs.count) }
            t0 = t
        }
        let storage = GLbitfield(GL_SHADER_STORAGE_BARRIER_BIT)
        // Macroblocks: P pictures at once (the motion search, the choice of
        // vector, the rest, then intra where it beats P, over a checkerboard
        // in two phases); IDR pictures diagonal by diagonal.
        let inter = prepared.filter { !$0.pending.idr }
        if !inter.isEmpty {
            // The reference's sub-sample planes beside the search (which reads whole samples alone).
            glUseProgram(programs.ids[.interpolate]!)
            for p in inter where p.job.encoder.subpel {
                let e = p.job.encoder
                e.bind(p, .interpolate)
                glDispatchCompute(GLuint((e.pictureRowBytes / 4 + 2 + 63) / 64), GLuint(e.format.mbHeight * 16 + 2 * Self.planePad), 1)
            }
            if profiling { glMemoryBarrier(storage); timed(.interpolate) }
            // The choice in rounds (its `CHOICE_ROUNDS`), each reading the round before.
            for (pass, round) in [(Pass.search, 0), (.refine, 0), (.subpel, 0)] + (0..<Self.choiceRounds).map({ (Pass.choose, $0) }) + [(.inter, 0)] {
                if pass != .search { glMemoryBarrier(storage) }
                glUseProgram(programs.ids[pass]!)
                for p in inter where pass != .subpel || p.job.encoder.subpel {
                    p.job.encoder.bind(p, pass, diagonal: round)
                    glDispatchCompute(GLuint(p.job.encoder.format.mbWidth), GLuint(p.job.encoder.format.mbHeight), 1)
                }
                if pass != .inter { timed(pass) }
            }
            if profiling { glMemoryBarrier(storage) }
            timed(.inter)
            // Intra_16x16 where it beats P, over a checkerboard in two phases.
            glUseProgram(programs.ids[.intraP]!)
            for phase in 0..<2 {
                glMemoryBarrier(storage)
                for p in inter {
                    let f = p.job.encoder.format
                    p.job.encoder.bind(p, .intraP, diagonal: phase)
                    glDispatchCompute(GLuint((f.mbWidth + 1) / 2), GLuint(f.mbHeight), 1)
                }
                if profiling { glMemoryBarrier(storage) }
                timed(.intraP)
            }
        }
        // IDR pictures: on a walk, a work group a row, each macroblock once
        // the row above has done it (the picture's tag in u_code.w); else
        // diagonal d of each slice (x + the row in the slice).
        let idrs = prepared.filter(\.pending.idr)
        if idrs.isEmpty {
            glMemoryBarrier(storage)
        } else if programs.rasterOrder == .walk {
            glUseProgram(programs.ids[.intraWalk]!)
            for p in idrs {
                p.job.encoder.bind(p, .intraWalk, diagonal: Int(p.tags & 0xffff))
                glDispatchCompute(1, GLuint(p.job.encoder.format.mbHeight), 1)
            }
            glMemoryBarrier(storage)
            timed(.intra)
        } else {
            glUseProgram(programs.ids[.intra]!)
            let diagonals = idrs.map { $0.job.encoder.format.mbWidth + $0.job.encoder.sliceRows - 1 }.max()!
            for d in 0..<diagonals {
                for p in idrs {
                    let e = p.job.encoder, w = e.format.mbWidth
                    guard d < w + e.sliceRows - 1 else { continue }
                    let first = max(0, d - (w - 1)), last = min(d, e.sliceRows - 1)
                    e.bind(p, .intra, diagonal: d)
                    glDispatchCompute(GLuint(last - first + 1), GLuint(e.sliceCount), 1)
                }
                glMemoryBarrier(storage)
            }
            timed(.intra)
        }
        // P pictures: the probe rounds guess which P_Skip vectors the walk
        // below will find, list the macroblocks to probe there, and probe
        // them (`h264deblock.comp`).
        if !inter.isEmpty {
            let command = GLbitfield(GL_COMMAND_BARRIER_BIT)
            for round in 1...Self.probeRounds {
                glUseProgram(programs.ids[.probeGuess]!)
                for p in inter {
                    p.job.encoder.bind(p, .probeGuess, diagonal: round)
                    glDispatchCompute(GLuint((p.job.encoder.macroblocks + 31) / 32), 1, 1)
                }
                glMemoryBarrier(storage | command)
                glUseProgram(programs.ids[.probe]!)
                for p in inter {
                    p.job.encoder.bind(p, .probe, diagonal: round)
                    glBindBuffer(GLenum(GL_DISPATCH_INDIRECT_BUFFER), p.job.encoder.probeList)
                    glDispatchComputeIndirect(GLintptr((round - 1) * p.job.encoder.probeListWords * 4))
                }
                glBindBuffer(GLenum(GL_DISPATCH_INDIRECT_BUFFER), 0)
                glMemoryBarrier(storage)
            }
            timed(.probe)
        }
        // Every macroblock is reconstructed: the raster-order pass makes the
        // P_Skip decision in the standard's order (P pictures) and filters the
        // picture in place (it becomes the next picture's reference); the
        // finish pass then reads the final records.
        glUseProgram(programs.ids[.deblock]!)
        let raster = prepared.filter { $0.job.encoder.deblocking || !$0.pending.idr }
        switch programs.rasterOrder {
        case .walk:
            for p in raster {
                p.job.encoder.bind(p, .deblock)
                glDispatchCompute(GLuint(2 * p.job.encoder.format.mbHeight), 1, 1)
            }
            glMemoryBarrier(storage)
        case .wavefront:
            // One step more than the walk's diagonals: each step filters what the step before decided.
            let steps = raster.map { $0.job.encoder.format.mbWidth + 2 * $0.job.encoder.sliceRows - 1 }.max() ?? 0
            for step in 0..<steps {
                for p in raster {
                    p.job.encoder.bind(p, .deblock, diagonal: step)
                    glDispatchCompute(GLuint(2 * p.job.encoder.format.mbHeight), 1, 1)
                }
                glMemoryBarrier(storage)
            }
            if steps == 0 { glMemoryBarrier(storage) }
        }
        timed(.deblock)
        for pass in [Pass.finish, .cavlc, .scan] {
            glUseProgram(programs.ids[pass]!)
            // CAVLC's code tables: one buffer for every picture of the context.
            if pass == .cavlc { glBindBufferBase(GL.shaderStorageBuffer, H264CAVLCTables.binding, programs.cavlcTables.buffer) }
            for p in prepared {
                p.job.encoder.bind(p, pass)
                glDispatchCompute(pass == .cavlc ? GLuint(p.job.encoder.macroblocks) : 1, 1, 1)
            }
            glMemoryBarrier(pass == .scan ? storage | GLbitfield(GL_COMMAND_BARRIER_BIT) : storage)
            timed(pass)
        }
        glUseProgram(programs.ids[.gather]!)
        for p in prepared {
            p.job.encoder.bind(p, .gather)
            glBindBuffer(GLenum(GL_DISPATCH_INDIRECT_BUFFER), p.job.encoder.results.result(p.pending.slot))
            glDispatchComputeIndirect(0)
        }
        glBindBuffer(GLenum(GL_DISPATCH_INDIRECT_BUFFER), 0)
        glMemoryBarrier(GLbitfield(GL_BUFFER_UPDATE_BARRIER_BIT | GL_CLIENT_MAPPED_BUFFER_BARRIER_BIT_EXT) | storage)
        glUseProgram(0)
        timed(.gather)
        // Reconstructions kept (the barrier above made the filter's writes visible to copies).
        var copied = false
        for p in prepared {
            let e = p.job.encoder
            guard let copy = e.results.reconstruction(p.pending.slot) else { continue }
            glBindBuffer(GLenum(GL_COPY_READ_BUFFER), e.pictures[e.current])
            glBindBuffer(GLenum(GL_COPY_WRITE_BUFFER), copy)
            glCopyBufferSubData(GLenum(GL_COPY_READ_BUFFER), GLenum(GL_COPY_WRITE_BUFFER), 0, 0, GLsizeiptr(e.pictureBytes))
            copied = true
        }
        if copied {
            glBindBuffer(GLenum(GL_COPY_READ_BUFFER), 0)
            glBindBuffer(GLenum(GL_COPY_WRITE_BUFFER), 0)
        }
        let fence = BatchFence()
        glFlush()
        for p in prepared {
            p.job.encoder.results.setFence(p.pending.slot, fence)
            p.job.encoder.current = p.reference
        }
        return prepared.map(\.pending)
    }

    /// Whether the GPU finished `pending`'s passes (no wait).
    func isComplete(_ pending: Pending) -> Bool { results.isComplete(pending.slot) }

    /// Maps the bitstream of `pending` (blocks until the GPU wrote it) and frames it as Annex B.
    func collect(_ pending: Pending) throws(GPUError) -> H264Picture {
        let size = try results.collect(pending.slot, slices: sliceCount)
        try check(size, pending)
        return try results.withBitstream(pending.slot, bytes: size.bytes) { frame(pending, size, $0) }
    }

    /// A completed picture's bitstream read where the GPU wrote it (mapped
    /// slots only; no GL call, so a caller's thread may read it once the
    /// picture's fence has signalled). The slot's fence is left to the render thread.
    func read(_ pending: Pending) throws(GPUError) -> H264Picture {
        let size = try results.read(pending.slot, slices: sliceCount)
        try check(size, pending)
        return try results.withBitstream(pending.slot, bytes: size.bytes) { frame(pending, size, $0) }
    }

    private typealias Size = H264ResultSlots.Size

    private func check(_ size: Size, _ pending: Pending) throws(GPUError) {
        guard !size.overflowed else {
            throw .encode("a picture of \(format.width)x\(format.height) at QP \(pending.qp) overflowed the encoder's bit buffer")
        }
        guard size.bytes > 0 else { throw .encode("a picture of \(format.width)x\(format.height) came back empty") }
    }

    /// The access unit of a checked picture (parameter sets before an IDR); the rate control learns its size.
    private func frame(_ pending: Pending, _ size: Size, _ payload: UnsafeBufferPointer<UInt8>) -> H264Picture {
        rateControl.encoded(ticket: pending.ticket, bits: size.bits, qp: pending.qp, keyframe: pending.idr)
        var data: [UInt8] = []
        if pending.idr {
            NALUnit.annexB(type: NALUnit.spsType, rbsp: format.sps, into: &data)
            NALUnit.annexB(type: NALUnit.ppsType, rbsp: format.pps, into: &data)
        }
        // Each slice a NAL unit of its own, from its word in the payload.
        var at = 0
        for bits in size.sliceBits {
            let bytes = min((bits + 7) / 8, payload.count - at)
            NALUnit.annexB(type: pending.idr ? NALUnit.idrType : NALUnit.sliceType,
                           rbsp: UnsafeBufferPointer(rebasing: payload[at..<at + bytes]), into: &data)
            at = min(payload.count, at + (bits + 31) / 32 * 4)
        }
        return H264Picture(data: data, keyframe: pending.idr, pts: pending.pts)
    }

    /// One macroblock of the last picture as its record holds it (tests).
    struct MacroblockRecord {
        /// P_L0_16x16 or P_Skip (else intra).
        var inter: Bool
        var skipped: Bool
        /// Quarter samples.
        var mv: SIMD2<Int>
        /// Intra_4x4 (else Intra_16x16 where intra).
        var intra4x4 = false
        /// Intra_16x16's prediction mode (8.3.3: 0 vertical, 1 horizontal, 2 DC, 3 plane) and the chroma's
        /// (8.3.4: 0 DC, 1 horizontal, 2 vertical, 3 plane), where intra.
        var lumaMode = 0, chromaMode = 0
        /// Intra_4x4's modes of the 16 blocks (8.3.1.1, 0-8; luma4x4BlkIdx order), where Intra_4x4.
        var intra4x4Modes: [Int] = []
    }

    /// The last picture's macroblocks, in raster order (tests).
    func macroblockRecords() throws(GPUError) -> [MacroblockRecord] {
        glBindBuffer(GL.shaderStorageBuffer, records[current ^ 1])
        defer { glBindBuffer(GL.shaderStorageBuffer, 0) }
        guard let p = glMapBufferRange(GL.shaderStorageBuffer, 0, GLsizeiptr(macroblocks * Self.recordWords * 4), GL.mapReadBit) else {
            throw .gl(label: "mapping the GPU encoder's records", code: glGetError())
        }
        defer { glUnmapBuffer(GL.shaderStorageBuffer) }
        let words = p.assumingMemoryBound(to: UInt32.self)
        return (0..<macroblocks).map { mb in
            let info = words[mb * Self.recordWords], w = words[mb * Self.recordWords + 1]   // MB_INFO, MB_MV
            var r = MacroblockRecord(inter: info & 3 == 0, skipped: info & 4 != 0,
                                     mv: SIMD2(Int(Int16(truncatingIfNeeded: w)), Int(Int16(truncatingIfNeeded: w >> 16))))
            r.intra4x4 = info & 3 == 2
            r.lumaMode = Int((info >> 4) & 3); r.chromaMode = Int((info >> 6) & 3)
            if r.intra4x4 {   // MB_LUMADC: four bits a block, eight blocks a word
                r.intra4x4Modes = (0..<16).map { Int((words[mb * Self.recordWords + 144 + $0 / 8] >> UInt32(4 * ($0 % 8))) & 15) }
            }
            return r
        }
    }

    /// The last reconstructed picture, cropped, as NV12 bytes (Y rows then UV rows, `width` bytes each).
    func reconstruction() throws(GPUError) -> [UInt8] {
        try cropped(pictures[current ^ 1])
    }

    /// `pending`'s reconstruction, cropped, as NV12 bytes (an encoder that
    /// keeps them; blocks until the GPU finished the picture). Render thread,
    /// before the slot is taken again.
    func reconstruction(of pending: Pending) throws(GPUError) -> [UInt8] {
        guard let copy = results.reconstruction(pending.slot) else { preconditionFailure("reconstruction(of:) of an encoder that keeps none") }
        return try cropped(copy)
    }

    /// The picture in `buffer` (the encoder's layout), cropped, as NV12 bytes.
    private func cropped(_ buffer: GLuint) throws(GPUError) -> [UInt8] {
        glBindBuffer(GL.shaderStorageBuffer, buffer)
        guard let p = glMapBufferRange(GL.shaderStorageBuffer, 0, GLsizeiptr(pictureBytes), GL.mapReadBit) else {
            glBindBuffer(GL.shaderStorageBuffer, 0)
            throw .gl(label: "mapping the GPU encoder's reconstruction", code: glGetError())
        }
        let b = p.assumingMemoryBound(to: UInt8.self)
        var out = [UInt8](repeating: 0, count: format.width * format.height * 3 / 2)
        for y in 0..<format.height {
            for x in 0..<format.width { out[y * format.width + x] = b[y * pictureRowBytes + x] }
        }
        for y in 0..<format.height / 2 {
            for x in 0..<format.width { out[format.width * format.height + y * format.width + x] = b[pictureUVOffset + y * pictureRowBytes + x] }
        }
        glUnmapBuffer(GL.shaderStorageBuffer)
        glBindBuffer(GL.shaderStorageBuffer, 0)
        return out
    }
}
