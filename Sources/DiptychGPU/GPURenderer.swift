import Synchronization
import CGLES
import DiptychCore
import Foundation

/// The GL side of one compositor: owns its parts and sequences them. Not
/// Sendable: `GPUCompositor` holds it behind a `Mutex`, and every access
/// takes that lock. GL calls happen on the render thread only (its entry
/// points assert it); the members marked "caller side" make none and run on
/// the caller's thread.
///
/// Parts: `StagingRing` (uploads copied in by the callers), `TexturePool`
/// (stream textures), `Output` (per-output targets), `ComputePass` and
/// `FragmentPass` (the composite and NV12 passes), `ReadbackQueue` (NV12
/// frames back to host memory), `DirectCopyPlanner` (the CPU shortcut's plan),
/// `FenceTimeline` (when anything may be reused or deleted).
///
/// Per output frame on the compute path: the staged uploads become textures
/// (or are read in place), one compute dispatch writes the frame's NV12, a
/// fence ends the submission, and the caller copies the frame out once it has
/// signalled. The fragment path draws, converts, and reads with glReadPixels.
final class GPURenderer {
    let context: GLContext
    let timeline: FenceTimeline
    var shaders: ShaderCache { context.shaders }
    let timer: PassTimer
    let releaser: GLReleaser
    let maxTextureSize: Int
    /// What every frame does (fixed at creation).
    let plan: GPUPlan
    /// What CUDA offered when the plan was made (the compositor's `cudaDevice` reads it).
    let cuda: CUDAFacts
    let textures: TexturePool
    let staging: StagingRing
    /// Decoders' pictures imported to be read in place (where staging is imported memory).
    let pictureImports: PictureImports?
    let readbacks: ReadbackQueue
    let fragment = FragmentPass()
    private let compute: ComputePass?
    private let log: @Sendable (String) -> Void
    private(set) var outputs: [OutputID: Output] = [:]
    /// The outputs' GPU encoders, for callers' threads.
    let encoders = OutputEncoders()
    /// Where GPU-encoded outputs write their reconstructions (`GPURequest.encoderReconstruction`).
    let encoderReconstruction: String?
    var hasComputePass: Bool { compute != nil }
    private var nextOutput = 1
    /// Caller side: uploads copied into staging, turned into textures at the next render-thread hop.
    var pendingUploads: [StreamRole: PendingUpload] = [:]
    /// Render thread: the compute frame between its phases.
    private var staged: StagedFrame?
    /// The direct-copy shortcut's frames, where the plan takes it.
    let directFrames: DirectCopyFrames?
    private(set) var lost = false
    private(set) var isShutDown = false
    /// Test hook: the next check reports a lost context.
    var simulateLoss = false

    enum PendingUpload {
        case staged(StagedUpload)
        /// Direct-copy mode: a YUV frame kept by reference.
        case keep(VideoFrame)
        /// A frame in CUDA memory, copied into textures on the GPU.
        case cuda(CUDAUpload)
        /// A decoder's picture, read in place from its pool's imported memory.
        case pooled(PooledUpload)
    }

    var info: GPUInfo { context.info }
    var caps: GPUCapabilities { context.caps }
    var streams: [StreamRole: StreamSlot] { textures.streams }
    var maxSetsPerRole: Int { textures.maxSetsPerRole }

    /// A renderer with its own context (walks the display ladder for `selection`),
    /// or, with `sharing`, one more renderer in an existing context (same
    /// render thread; the context goes when its last renderer is released).
    /// The renderer probes what the context and CUDA offer, and does what the
    /// plan says: `GPUPlanner`'s, or `given` (checked against the facts).
    init(selection: GPUSelection, sharing: GLContext? = nil, log: @escaping @Sendable (String) -> Void, hooks: GPUTestHooks = GPUTestHooks(),
         readbackDepth: Int = 4, uploadDepth: Int? = nil, directCopy: DirectCopyMode = .off, pass: GPUPass = .auto,
         request: GPURequest = .settings, tuning: GPUTuning = GPUTuning(), plan given: GPUPlan? = nil) throws(GPUError) {
        let uploadDepth = uploadDepth ?? 2 * readbackDepth
        precondition(readbackDepth >= 1 && uploadDepth >= 1)
        if let sharing { context = sharing } else { context = try DisplayLadder.open(selection, log: log) }
        let facts = GPUContextFacts(context)
        let wanted = given.map { $0.staging == .cudaImported || $0.readback == .cudaImported } ?? GPUPlanner.wantsImportedMemory(request)
        let asked = given?.tuning ?? tuning
        let (cuda, exported) = CUDAFacts.probe(context, hooks: hooks, copiers: asked.copiers, streamingCopy: asked.streamingCopy,
                                               tryImport: wanted && facts.memoryObjects)
        let plan: GPUPlan
        if let given {
            try GPUPlanner.check(given, facts, cuda, uploadDepth: uploadDepth)
            plan = given
        } else {
            plan = try GPUPlanner.plan(facts, cuda, request, .init(pass: pass, directCopy: directCopy, uploadDepth: uploadDepth, tuning: tuning))
        }
        self.plan = plan
        self.cuda = cuda
        encoderReconstruction = request.encoderReconstruction
        let bufferStorage = context.procs.bufferStorage
        let planned: FenceOps = switch plan.fences {
        case .egl: FenceOps.egl(display: context.display, procs: context.procs) ?? .gl
        case .gl: .gl
        case .watched: .watched
        }
        let fences = hooks.fenceOps ?? planned
        self.log = log
        timeline = FenceTimeline(ops: fences)
        releaser = GLReleaser(timeline: timeline, hooks: hooks, context: context)
        timer = PassTimer(timerQuery: context.caps.timerQuery && plan.tuning.timerQueries, getResult: context.procs.getQueryObjectui64v)
        if context.caps.timerQuery && plan.tuning.timerQueries, let counter = context.procs.queryCounter,
           let getResult = context.procs.getQueryObjectui64v {
            RenderThread.installBatchClock(counter: counter, getResult: getResult)
        }
        maxTextureSize = context.info.maxTextureSize
        textures = TexturePool(maxSetsPerRole: readbackDepth + 2, releaser: releaser)
        staging = StagingRing(count: uploadDepth, memory: try StagingRing.Memory(plan.staging, bufferStorage: bufferStorage, imported: exported))
        let releaser = releaser
        pictureImports = staging.imported.map { PictureImports(procs: $0.procs, releaser: releaser, log: log) }
        readbacks = ReadbackQueue(depth: readbackDepth, transport: try ReadbackQueue.Transport(plan.readback, bufferStorage: bufferStorage, imported: exported))
        compute = plan.pass == .compute ? ComputePass(slots: readbackDepth + 4) : nil
        directFrames = plan.softwareShortcut ? DirectCopyFrames() : nil
        glDisable(GL.dither)
        _ = glGetError()
        GPURenderer.logSettingsOnce(request, log: log)
        log("diptych-gpu: \(plan)")
    }

    deinit { assert(isShutDown, "GPURenderer released without shutdown(): GL objects leaked") }

    private static let settingsLogged = Mutex(false)
    /// The settings the environment gave, said once a process.
    static func logSettingsOnce(_ request: GPURequest, log: (String) -> Void) {
        guard !request.given.isEmpty, settingsLogged.withLock({ l in defer { l = true }; return !l }) else { return }
        log("diptych-gpu: settings from the environment: \(request)")
    }

    // MARK: State checks

    /// Caller side or render thread (no GL): throws when shut down or lost.
    func checkUsable() throws(GPUError) {
        if isShutDown { throw .shutDown }
        if simulateLoss { markLost() }
        if lost { throw .contextLost }
    }

    /// Render thread: reads the reset status (robust contexts) and the simulated-loss hook.
    func checkReset() throws(GPUError) {
        var reset = simulateLoss
        if !reset {
            if let status = context.procs.getGraphicsResetStatus {
                reset = status() != GL.noError
            } else {
                reset = context.eglReportsLost()   // EGL_CONTEXT_LOST from eglMakeCurrent
            }
        }
        if reset { markLost(); throw .contextLost }
    }

    private func markLost() {
        guard !lost else { return }
        lost = true
        simulateLoss = false
        timeline.abandoned = true
        readbacks.dropAll()
        pendingUploads.removeAll()
        context.cudaUploads?.drop()
        log("diptych-gpu: context lost; every GPU object of this compositor is dead")
    }

    /// Checks GL errors at a pass boundary; GL_CONTEXT_LOST becomes `.contextLost`.
    func checkGL(_ label: @autoclosure () -> String) throws(GPUError) {
        RenderThread.assertCurrent()
        let e = glGetError()
        guard e != GL.noError else { return }
        while glGetError() != GL.noError {}
        if e == GL.contextLost || context.eglReportsLost() { markLost(); throw .contextLost }
        throw .gl(label: label(), code: e)
    }


    // MARK: Uploads (caller side)

    /// Caller side: `upload` replaces what is pending for `role`.
    func setPending(_ role: StreamRole, _ upload: PendingUpload) {
        dropPending(role)
        pendingUploads[role] = upload
    }

    func dropPending(_ role: StreamRole) {
        if case .staged(let old)? = pendingUploads.removeValue(forKey: role) { staging.abandon(old.slot) }
    }

    var hasPendingUploads: Bool { !pendingUploads.isEmpty }

    func clearStream(_ role: StreamRole) throws(GPUError) {
        RenderThread.assertCurrent()
        dropPending(role)
        directFrames?.forget(role)
        try beginHop()
        textures.clear(role)
    }

    // MARK: Outputs

    func addOutput(canvas: PixelSize, matrix: ColorMatrix, range: ColorRange) throws(GPUError) -> OutputID {
        RenderThread.assertCurrent()
        try checkUsable()
        try checkCanvas(canvas)
        let id = OutputID(rawValue: nextOutput)
        nextOutput += 1
        let out = try Output(id: id, canvas: canvas, matrix: matrix, range: range)
        outputs[id] = out
        try checkGL("addOutput \(canvas)")
        return id
    }

    /// The largest canvas this renderer can draw and convert: the render
    /// target is canvas-sized, the NV12 target holds 1.5 × the height.
    func checkCanvas(_ canvas: PixelSize) throws(GPUError) {
        guard !canvas.isEmpty else { throw .badCanvas("canvas \(canvas) is empty") }
        guard canvas.width % 2 == 0, canvas.height % 2 == 0 else { throw .badCanvas("canvas \(canvas) must have even width and height for NV12") }
        let maxHeight = (maxTextureSize * 2 / 3) & ~1
        guard canvas.width <= maxTextureSize, canvas.height <= maxHeight else {
            throw .badCanvas("this GPU (\(info.renderer)) renders canvases up to \(maxTextureSize)x\(maxHeight) (GL_MAX_TEXTURE_SIZE \(maxTextureSize))")
        }
    }

    func removeOutput(_ id: OutputID) {
        RenderThread.assertCurrent()
        if let e = outputs[id]?.encoder { encoders.remove(e) }
        directFrames?.remove(id)
        outputs.removeValue(forKey: id)?.release(releaser)
    }

    func output(_ id: OutputID, canvas: PixelSize? = nil) throws(GPUError) -> Output {
        guard let out = outputs[id] else { preconditionFailure("\(id) does not exist") }
        if let canvas, canvas != out.canvas { throw .badCanvas("plan canvas \(canvas) differs from \(id) canvas \(out.canvas)") }
        return out
    }

    // MARK: Rendering (render thread)

    /// The plan's draws that have a picture, with the texture set each samples.
    func drawable(_ draws: [DrawDescription]) -> [(DrawDescription, StreamPicture)] {
        draws.compactMap { d in
            guard d.destination.width > 0, d.destination.height > 0,
                  let set = d.overlay.map({ textures.overlays[$0] }) ?? streams[d.role]?.current else { return nil }
            return (d, set)
        }
    }

    /// Draws `plan` into the output (compute, or fragment where compute cannot
    /// draw it) and, with `readback`, starts its NV12 readback. The caller made
    /// room in the readback ring.
    func render(output id: OutputID, plan: CompositionPlan, pts: MediaTime, readback: Bool) throws(GPUError) {
        RenderThread.assertCurrent()
        if try beginFrame(output: id, plan: plan, pts: pts, readback: readback) {
            try dispatchFrame(barrier: true)
            try finishFrame()
        }
    }

    /// A compute frame between its phases (`FrameJob`).
    struct StagedFrame {
        var out: Output
        var frame: ComputeFrame
        var pts: MediaTime
        var readback: Bool
        var rgba: Bool
        /// The output's GPU encoder reads the frame's NV12 from its own buffer (no readback).
        var encode = false
        /// The readback buffer the dispatch wrote NV12 into (imported
        /// readback buffers: no copy after it); nil: the output's own buffer.
        var slot: Int? = nil
    }

    /// Phase 1 of a frame: the pending uploads, then either the whole frame on
    /// the fragment path (returns false) or a compute frame staged for
    /// `dispatchFrame` and `finishFrame` (returns true).
    func beginFrame(output id: OutputID, plan: CompositionPlan, pts: MediaTime, readback: Bool) throws(GPUError) -> Bool {
        RenderThread.assertCurrent()
        staged = nil
        try beginHop()
        let out = try output(id, canvas: plan.canvas)
        let t0 = PassTimer.now()
        timeline.poll(); timer.poll()
        RenderThread.add(.poll, since: t0)
        return try beginGPU(out, draws: drawable(plan.draws), background: plan.background, pts: pts, readback: readback)
    }

    func beginGPU(_ out: Output, draws: [(DrawDescription, StreamPicture)], background: RGBAColor, pts: MediaTime,
                  readback: Bool) throws(GPUError) -> Bool {
        directFrames?.renderedOnGPU(out.id)
        if compute != nil, ComputePass.supports(draws) {
            let encode = out.encoder != nil && !readback
            staged = StagedFrame(out: out, frame: ComputeFrame(draws: draws, background: background), pts: pts,
                                 readback: readback, rgba: (!readback && !encode) || out.wantsRGBA, encode: encode)
            return true
        }
        if out.encoder != nil && !readback {
            throw .unsupported("the compute pass for \(out.id)'s GPU encoder (a frame of \(draws.count) draws it cannot run)")
        }
        if draws.contains(where: { $0.1.inPlace != nil }) {
            throw .unsupported("a frame of \(draws.count) draws on the fragment path with pictures read in place (at most \(ComputePass.maxDraws) "
                               + "draws, none of them dma-buf; DIPTYCH_GPU_PICTURES=textures uploads pictures instead)")
        }
        let work = try FragmentPass.work(draws, shaders: shaders)
        let nv12Program = readback ? try shaders.program(.nv12Pack) : nil
        let nv12 = readback ? try out.nv12Texture() : nil
        fragment.composite(work, out: out, background: background, timer: timer, serial: timeline.pendingSerial)
        out.lastCompute = nil
        out.rgbaStale = false
        var slot = -1
        if let nv12Program, let nv12 {
            slot = try readbacks.bindNext(bytes: out.nv12Bytes, target: GL.pixelPackBuffer, releaser: releaser)
            fragment.convertAndRead(nv12Program, out: out, nv12: nv12, timer: timer)
            glBindBuffer(GL.pixelPackBuffer, 0)
        }
        timer.stats.framesFragment += 1
        try finishSubmission(out, pts: pts, slot: slot, bytes: out.nv12Bytes)
        return false
    }

    /// Phase 2: the staged frame's compute dispatch.
    func dispatchFrame(barrier: Bool) throws(GPUError) {
        RenderThread.assertCurrent()
        guard var s = staged, let compute else { return }
        var target: GLuint?
        if s.readback, plan.readback == .cudaImported {
            // Imported readback buffers sit in device memory: the pass writes the frame straight into one.
            let slot = try readbacks.bindNext(bytes: s.out.nv12Bytes, target: GL.shaderStorageBuffer, releaser: releaser)
            glBindBuffer(GL.shaderStorageBuffer, 0)
            s.slot = slot
            staged = s
            target = readbacks.buffer(slot)
        }
        do throws(GPUError) {
            try compute.dispatch(s.frame, out: s.out, nv12: s.readback || s.encode, rgba: s.rgba, shaders: shaders, timer: timer, barrier: barrier,
                                 nv12Buffer: target)
        } catch {
            if let slot = s.slot { readbacks.unbind(slot); staged?.slot = nil }
            throw error
        }
        for (_, set) in s.frame.draws { set.lastUse = timeline.pendingSerial }
        s.out.lastCompute = s.frame
        s.out.rgbaStale = !s.rgba
    }

    /// Phase 3 (after the barrier): the staged frame's readback copy and fence.
    func finishFrame() throws(GPUError) {
        RenderThread.assertCurrent()
        guard let s = staged else { return }
        staged = nil
        let out = s.out
        var slot = s.slot ?? -1
        if s.readback && s.slot == nil {
            let nv12 = out.nv12Storage()
            slot = try readbacks.bindNext(bytes: out.nv12Bytes, target: GL.copyWriteBuffer, releaser: releaser)
            timer.begin(.nv12)
            glBindBuffer(GL.copyReadBuffer, nv12.buffer)
            glCopyBufferSubData(GL.copyReadBuffer, GL.copyWriteBuffer, 0, 0, GLsizeiptr(out.nv12Bytes))
            glBindBuffer(GL.copyReadBuffer, 0)
            glBindBuffer(GL.copyWriteBuffer, 0)
            timer.end(.nv12)
        }
        if s.encode, let encoder = out.encoder {
            try encoder.encode(nv12: out.nv12Storage(), rowBytes: out.nv12Stride, height: out.canvas.height, pts: s.pts,
                               serial: timeline.pendingSerial, callersCollect: encoder.collectsOffThread(timeline))
        }
        timer.stats.framesCompute += 1
        try finishSubmission(out, pts: s.pts, slot: slot, bytes: out.nv12Bytes)
    }

    /// Fences the frame's work and queues its readback (slot < 0: none).
    private func finishSubmission(_ out: Output, pts: MediaTime, slot: Int, bytes: Int) throws(GPUError) {
        glBindFramebuffer(GL.framebuffer, 0)
        let serial = timeline.pendingSerial
        out.used(serial)
        let t0 = PassTimer.now()
        timeline.submit()
        RenderThread.add(.fence, since: t0)
        if slot >= 0 {
            readbacks.submitted(PendingReadback(serial: serial, slot: slot, output: out.id, pts: pts, width: out.canvas.width,
                                                height: out.canvas.height, stride: out.nv12Stride, bytes: bytes,
                                                matrix: out.matrix, range: out.range))
        }
        out.lastPTS = pts
        timer.stats.framesRendered += 1
        let t1 = PassTimer.now()
        defer { RenderThread.add(.checks, since: t1) }
        try checkGL("render \(out.id)")
        try checkReset()
    }

    /// Brings the RGBA target up to date with the last frame (a compute frame
    /// that wrote NV12 only draws it again), and keeps it so from now on.
    func refreshRGBA(_ out: Output) throws(GPUError) {
        RenderThread.assertCurrent()
        out.wantsRGBA = true
        if let d = directFrames, d.lastWasDirect(out.id) { try d.refresh(self, out); return }
        guard out.rgbaStale, let frame = out.lastCompute, let compute else { return }
        try compute.dispatch(frame, out: out, nv12: false, rgba: true, shaders: shaders, timer: timer)
        for (_, set) in frame.draws { set.lastUse = timeline.pendingSerial }
        out.used(timeline.pendingSerial)
        timeline.submit()
        out.rgbaStale = false
        try checkGL("redraw \(out.id) as RGBA")
    }

    var stats: GPUStats {
        timer.poll()
        return lastPolledStats
    }

    /// The statistics without polling the timer queries (no GL call: any thread, under the renderer's lock).
    var lastPolledStats: GPUStats {
        var s = timer.stats
        s.inFlight = timeline.inFlight
        return s
    }

    func resetStats() { timer.poll(); timer.reset() }

    /// Teardown, in this order:
    /// 1. drop readbacks nobody collected and uploads never committed;
    /// 2. retire every stream texture set and output target, wait for every
    ///    fence (not when the context is lost) and run the queued releases, so
    ///    nothing is deleted while the GPU may still use it;
    /// 3. delete the staging and readback buffers, the uniform ring, timer
    ///    queries and the VAO;
    /// 4. the context itself goes when this object is released (GLContext:
    ///    programs → context → display → gbm_device → fd).
    func shutdown() {
        RenderThread.assertCurrent()
        guard !isShutDown else { return }
        isShutDown = true
        pendingUploads.removeAll()
        readbacks.dropAll()
        textures.clearAll()
        for id in Array(outputs.keys) { removeOutput(id) }
        pictureImports?.release()
        timeline.drain()
        staging.release(releaser)
        readbacks.release(releaser)
        compute?.release(releaser)
        timer.deleteAll()
        fragment.release()
        glFinish()
    }
}
