import Synchronization
import DiptychCore
import Foundation

/// The GPU compositor: one EGL context on its own render thread (or one
/// shared with other compositors, `init(sharingContextOf:)`), the uploaded
/// stream textures shared by every output, one render target per output, and
/// asynchronous NV12 readback.
///
/// Thread-safe: every method may be called from any thread (one compositor's
/// calls are serialized by `calls`). The renderer sits behind one lock
/// (`renderer`), which whichever thread touches it takes: the callers'
/// threads for its caller side, which makes no GL call (frames are copied
/// into staging by `upload`, completed readbacks out of their buffers by
/// `nextNV12` and `composite`, and fences are waited for there too where
/// EGL_KHR_fence_sync allows), the render thread for the rest (GL; the
/// renderer's entry points assert the thread). No hop to the render thread is
/// made while the lock is held. A `render` is one hop that also turns the
/// pending uploads into textures; hops of several compositors sharing the
/// thread run back to back and are flushed to the GPU together. After
/// `GPUError.contextLost` every method throws it again: build a new
/// compositor (nothing old is reused).
public final class GPUCompositor: Sendable {
    /// The GPU in use (fixed at creation).
    public let info: GPUInfo
    /// What every frame of this compositor does (fixed at creation).
    public let plan: GPUPlan
    /// Where CUDA stands against this compositor's GL context, as the renderer probed it for the plan.
    public let cuda: CUDAFacts
    private let thread: RenderThread
    /// Compositors sharing `thread` (and its context); the last one stops it.
    private let share: ThreadShare
    /// Serializes this compositor's calls (a `composite` spans several steps
    /// and hops). It guards no data: `renderer` does.
    let calls = NSRecursiveLock()
    /// The renderer; nil once shut down.
    let renderer: Mutex<GPURenderer?>
    private let isShut = Atomic(false)

    final class ThreadShare: Sendable {
        private let count = Mutex(1)
        func retain() { count.withLock { $0 += 1 } }
        /// True when the last user let go.
        func release() -> Bool { count.withLock { $0 -= 1; return $0 == 0 } }
    }

    /// Walks the display ladder for `selection` and creates the context.
    /// `log` gets one line naming the platform, device and GL_RENDERER taken,
    /// and the plan (`plan`). Throws `GPUError.noDisplay` listing
    /// every rung tried and why it failed.
    /// - Parameters:
    ///   - readbackDepth: frames that may be in flight: the readback ring
    ///     holds this many NV12 frames, and each role keeps `readbackDepth + 2`
    ///     texture sets so an upload never waits for a frame still being drawn.
    ///   - uploadDepth: slots of the upload staging ring (default `2 × readbackDepth`:
    ///     two uploads per frame).
    ///   - directCopy: when the direct-copy shortcut is taken (`DirectCopyMode`).
    ///     An NV12/I420 `upload` then keeps a reference to the frame (its bytes
    ///     must not change until the next upload of that role) instead of
    ///     copying it at once; where the draws at the bottom of a plan are
    ///     opaque 1:1 copies of such frames covering the canvas, their bytes go
    ///     straight into the output's NV12 planes and only the region of the
    ///     draws above them is rendered and converted (results equal the GPU
    ///     path within ±1 code value; the preview is then made from the NV12
    ///     frame itself). Other plans take the GPU path.
    ///   - pass: compute (one pass: composite and NV12) or fragment; `.auto`
    ///     takes compute on a hardware GPU with OpenGL ES 3.1, fragment elsewhere.
    ///   - tuning: the values benchmarks tune (`GPUTuning`; the defaults are the measured best).
    public convenience init(selection: GPUSelection = .auto, readbackDepth: Int = 4, uploadDepth: Int? = nil,
                            directCopy: DirectCopyMode = .off, pass: GPUPass = .auto, tuning: GPUTuning = GPUTuning(),
                            log: @escaping @Sendable (String) -> Void = { _ in }) throws(GPUError) {
        try self.init(selection: selection, readbackDepth: readbackDepth, uploadDepth: uploadDepth, directCopy: directCopy,
                      pass: pass, tuning: tuning, hooks: GPUTestHooks(), log: log)
    }

    /// `directCopy: true` is `DirectCopyMode.auto` (the shortcut on software
    /// renderers only), `false` is `.off`.
    public convenience init(selection: GPUSelection = .auto, readbackDepth: Int = 4, uploadDepth: Int? = nil,
                            directCopy: Bool, log: @escaping @Sendable (String) -> Void = { _ in }) throws(GPUError) {
        try self.init(selection: selection, readbackDepth: readbackDepth, uploadDepth: uploadDepth,
                      directCopy: directCopy ? .auto : .off, pass: .auto, hooks: GPUTestHooks(), log: log)
    }

    /// With `plan`, that plan instead of the planner's (checked against the
    /// context: `GPUError.unsupported` where it asks for what is not there).
    init(selection: GPUSelection, readbackDepth: Int = 4, uploadDepth: Int? = nil, directCopy: DirectCopyMode = .off,
         pass: GPUPass = .auto, tuning: GPUTuning = GPUTuning(), request asked: GPURequest? = nil, plan given: GPUPlan? = nil,
         hooks: GPUTestHooks, log: @escaping @Sendable (String) -> Void = { _ in }) throws(GPUError) {
        let request: GPURequest
        if let asked { request = asked } else {
            switch GPURequest.process {
            case .success(let r): request = r
            case .failure(let e): throw .badSetting(e)
            }
        }
        let tuning = given?.tuning ?? tuning
        thread = RenderThread(name: "diptych-gpu", maxBatch: tuning.frameBatch)
        share = ThreadShare()
        let cell = Mutex<GPURenderer?>(nil)
        do throws(GPUError) {
            (info, plan, cuda) = try thread.sync { () throws(GPUError) -> (GPUInfo, GPUPlan, CUDAFacts) in
                try cell.withLock { (slot) throws(GPUError) -> (GPUInfo, GPUPlan, CUDAFacts) in
                    let r = try GPURenderer(selection: selection, log: log, hooks: hooks, readbackDepth: readbackDepth,
                                            uploadDepth: uploadDepth, directCopy: directCopy, pass: pass, request: request,
                                            tuning: tuning, plan: given)
                    slot = r
                    return (r.info, r.plan, r.cuda)
                }
            }
        } catch {
            thread.stop()
            throw error
        }
        renderer = cell
    }

    /// Another compositor in `other`'s context, on `other`'s render thread:
    /// its own outputs, stream textures and buffer rings, but no context
    /// switch between them on the GPU (servers compositing many stream pairs
    /// lose far more to context switches than to one shared submission
    /// thread, whose hops run back to back). The context lives until every
    /// compositor sharing it is shut down. A context loss hits all of them.
    /// Its tuning is `other`'s (the render thread's frame batch is the first compositor's).
    public init(sharingContextOf other: GPUCompositor, readbackDepth: Int = 4, uploadDepth: Int? = nil,
                directCopy: DirectCopyMode = .off, pass: GPUPass = .auto) throws(GPUError) {
        thread = other.thread
        share = other.share
        let tuning = other.plan.tuning
        let cell = Mutex<GPURenderer?>(nil)
        (info, plan, cuda) = try thread.sync { () throws(GPUError) -> (GPUInfo, GPUPlan, CUDAFacts) in
            let context = try other.lockedOnRenderThread { (o) throws(GPUError) -> GLContext in
                guard let o else { throw .shutDown }
                return o.context
            }
            return try cell.withLock { (slot) throws(GPUError) -> (GPUInfo, GPUPlan, CUDAFacts) in
                let r = try GPURenderer(selection: .auto, sharing: context, log: { _ in }, readbackDepth: readbackDepth,
                                        uploadDepth: uploadDepth, directCopy: directCopy, pass: pass, tuning: tuning)
                slot = r
                return (r.info, r.plan, r.cuda)
            }
        }
        renderer = cell
        share.retain()
    }

    /// `directCopy: true` is `DirectCopyMode.auto`, `false` is `.off`.
    public convenience init(sharingContextOf other: GPUCompositor, readbackDepth: Int = 4, uploadDepth: Int? = nil,
                            directCopy: Bool) throws(GPUError) {
        try self.init(sharingContextOf: other, readbackDepth: readbackDepth, uploadDepth: uploadDepth,
                      directCopy: directCopy ? .auto : .off)
    }

    deinit { shutdown() }

    /// Runs `body` with the renderer on the render thread, after turning the
    /// pending uploads into textures (every hop does, so uploads take effect
    /// in call order).
    /// `call`: the method that hops (the render thread's time by caller).
    func withRenderer<T: Sendable>(call: String = #function, _ body: (GPURenderer) throws(GPUError) -> T) throws(GPUError) -> T {
        calls.lock(); defer { calls.unlock() }
        return try thread.sync(call: call) { () throws(GPUError) -> T in try onRenderThread(body) }
    }

    /// On the render thread: `body` with the renderer under its lock. A
    /// caller's thread may hold the lock while it waits for a watched fence,
    /// which only this thread's polls end (`FenceWatch`), so while any is
    /// pending the lock is tried, the fences flushed and polled between
    /// tries; once none is, the lock is waited for.
    func lockedOnRenderThread<T: Sendable>(_ body: (inout sending GPURenderer?) throws(GPUError) -> T) throws(GPUError) -> T {
        while true {
            if let v = try renderer.withLockIfAvailable({ (r) throws(GPUError) -> T in try body(&r) }) { return v }
            if !RenderThread.pollWatchedFences() { return try renderer.withLock { (r) throws(GPUError) -> T in try body(&r) } }
        }
    }

    /// On the render thread: `body` with the renderer under its lock, after the pending uploads.
    private func onRenderThread<T: Sendable>(_ body: (GPURenderer) throws(GPUError) -> T) throws(GPUError) -> T {
        try lockedOnRenderThread { (r) throws(GPUError) -> T in
            guard let r else { throw .shutDown }
            if r.hasPendingUploads { try r.beginHop() }
            return try body(r)
        }
    }

    /// On a caller's thread: `body` with the usable renderer under its lock
    /// (its caller side: no GL call, no hop).
    func callerSide<T: Sendable>(_ body: (GPURenderer) throws(GPUError) -> T) throws(GPUError) -> T {
        try renderer.withLock { (r) throws(GPUError) -> T in
            guard let r else { throw .shutDown }
            try r.checkUsable()
            return try body(r)
        }
    }

    /// Hops to the render thread so far (of every compositor sharing it).
    var renderThreadHops: Int { thread.hopCounter.value }

    /// How busy the render thread (shared by every compositor of the context) has been so far.
    public var renderThreadLoad: RenderThreadLoad {
        var l = thread.load.snapshot
        l.cpuSeconds = thread.cpuSeconds ?? 0
        return l
    }

    /// Adds an output with its own render target. The canvas needs even width
    /// and height (NV12). Frames come out in `matrix`/`range` (BT.709 limited by default).
    public func addOutput(canvas: PixelSize, matrix: ColorMatrix = .bt709, range: ColorRange = .limited) throws(GPUError) -> OutputID {
        try withRenderer { r throws(GPUError) in try r.addOutput(canvas: canvas, matrix: matrix, range: range) }
    }

    /// Throws `.badCanvas` saying this GPU's real limit when it cannot render
    /// and convert a `canvas`-sized output (checked without allocating).
    public func checkCanvas(_ canvas: PixelSize) throws(GPUError) {
        try withRenderer { r throws(GPUError) in try r.checkCanvas(canvas) }
    }

    /// Removes an output; its targets are deleted once in-flight work is done.
    public func removeOutput(_ id: OutputID) {
        _ = try? withRenderer { r in r.removeOutput(id) }
    }

    /// Uploads `frame` (RGBA, BGRA, NV12 or I420, any strides); it becomes the
    /// role's current picture for every output from the next render on. The
    /// frame's bytes are copied into a staging buffer on this thread before
    /// this returns (no render-thread hop); the textures are written by the
    /// next render. Throws `.badFrame` (no GL error left behind).
    public func upload(_ frame: VideoFrame, role: StreamRole) throws(GPUError) {
        calls.lock(); defer { calls.unlock() }
        try validateUpload(frame, maxTextureSize: info.maxTextureSize)
        if plan.softwareShortcut && frame.format.isYUV { try callerSide { r in r.setPending(role, .keep(frame)) }; return }
        try callerSide { r in r.dropPending(role) }
        let layout = UploadLayout(frame)
        let i = try stagingSlot(bytes: layout.total)
        try callerSide { r throws(GPUError) in
            let t0 = PassTimer.now()
            do throws(GPUError) { try stage(frame, layout: layout, into: i, r) } catch { r.staging.abandon(i); throw error }
            r.timer.stats.upload.cpuTotalMs += Double(PassTimer.now() - t0) / 1e6
            r.setPending(role, .staged(StagedUpload(frame: frame, role: role, slot: i, layout: layout)))
        }
    }


    /// Makes a frame in CUDA memory (NVDEC's) the role's picture from the next
    /// render on: its planes are copied into the stream textures on the GPU
    /// (CUDA–GL interop), batched with the other CUDA frames of the hop, and
    /// `holder` is kept until the GPU work that read them has completed. No
    /// render-thread hop here. A frame interop cannot take fails the next
    /// render with `.cudaInterop` (the role's picture is then unchanged).
    public func upload(_ frame: CUDAFrame, holder: any CUDAFrameHolder, role: StreamRole) throws(GPUError) {
        calls.lock(); defer { calls.unlock() }
        guard plan.takesCUDAFrames else { throw .cudaInterop("the plan takes no CUDA frames on the GPU (cuda-frames=\(plan.cudaFrames.name))") }
        if try readPooled(frame, holder: holder, role: role) { return }
        if try stageImported(frame, role: role) { return }
        try callerSide { r throws(GPUError) in try r.setPending(frame, holder: holder, role: role) }
    }

    /// Imports a dma-buf as the role's current picture (EGL_EXT_image_dma_buf_import);
    /// `.unsupported` where the extension is absent.
    public func upload(_ frame: DmaBufFrame, role: StreamRole) throws(GPUError) {
        try withRenderer { r throws(GPUError) in try r.upload(frame, role: role) }
    }

    /// Forgets the role's picture; draws of that role are skipped until the next upload.
    public func clearStream(_ role: StreamRole) {
        _ = try? withRenderer { r throws(GPUError) in try r.clearStream(role) }
    }

    /// Draws `plan` into the output and, when `readback` is true, converts it
    /// to NV12 and starts an asynchronous readback carrying `pts`. Does not
    /// wait for the GPU unless every readback buffer holds a frame nobody took
    /// (then the oldest is delivered first, kept for `nextNV12`).
    public func render(output: OutputID, plan: CompositionPlan, pts: MediaTime, readback: Bool = true) throws(GPUError) {
        calls.lock(); defer { calls.unlock() }
        if readback {
            while try callerSide({ r in r.readbacks.isFull }), let d = try takeOne(wait: true) {
                try callerSide { r in r.readbacks.ready.append(d) }
            }
        } else {
            try makeRoomForEncodedPicture(output: output)
        }
        guard self.plan.softwareShortcut else {
            // One frame job: batched with the frames of the compositors sharing this render thread.
            try thread.syncFrame(FrameJob(
                prepare: { () throws(GPUError) -> Bool in try self.inFrame { r throws(GPUError) in try r.beginHop(flushCUDA: false) } },
                flushCUDA: { () throws(GPUError) in try self.inFrame { r throws(GPUError) in try r.flushCUDAUploads() } },
                begin: { () throws(GPUError) -> Bool in
                    try self.inFrame { r throws(GPUError) in try r.beginFrame(output: output, plan: plan, pts: pts, readback: readback) }
                },
                dispatch: { () throws(GPUError) in try self.inFrame { r throws(GPUError) in try r.dispatchFrame(barrier: false) } },
                finish: { () throws(GPUError) in try self.inFrame { r throws(GPUError) in try r.finishFrame() } }))
            return
        }
        // The direct copy: the caller runs the copies between two hops.
        let jobs = try withRenderer { r throws(GPUError) -> [CopyJob]? in
            guard let d = r.directFrames else { preconditionFailure("the plan takes the direct copy") }
            var jobs: [CopyJob] = []
            let p = try d.prepare(r, output: output, plan: plan, readback: readback, jobs: &jobs)
            // Nothing to copy in between (a frame the CPU draws whole): one hop.
            if jobs.isEmpty { try d.commit(r, p, pts: pts); return nil }
            d.prepared = p
            return jobs
        }
        guard let jobs else { return }
        let t0 = PassTimer.now()
        for j in jobs { j.run() }
        let ms = Double(PassTimer.now() - t0) / 1e6
        try withRenderer { r throws(GPUError) in
            r.timer.stats.upload.cpuTotalMs += ms
            guard let d = r.directFrames, let p = d.prepared else { return }
            d.prepared = nil
            try d.commit(r, p, pts: pts)
        }
    }

    /// On the render thread, in a frame job: `body` with the renderer under its lock.
    private func inFrame<T: Sendable>(_ body: (GPURenderer) throws(GPUError) -> T) throws(GPUError) -> T {
        try lockedOnRenderThread { (r) throws(GPUError) -> T in
            guard let r else { throw .shutDown }
            return try body(r)
        }
    }

    /// One call for one output frame: uploads `uploads`, renders `plan` with
    /// NV12 readback, and returns the readbacks already completed (of any
    /// output), in submission order, without waiting (it waits only when
    /// every readback buffer is busy). Exactly `upload` per frame, `render`,
    /// then `nextReadback(wait: false)` until none is ready: the path a take runs.
    public func composite(uploads: [(VideoFrame, StreamRole)], output: OutputID, plan: CompositionPlan,
                          pts: MediaTime) throws(GPUError) -> [VideoFrame] {
        calls.lock(); defer { calls.unlock() }
        for (frame, role) in uploads { try upload(frame, role: role) }
        try render(output: output, plan: plan, pts: pts)
        var done: [VideoFrame] = []
        while let d = try nextReadback(wait: false) { done.append(d.frame) }
        return done
    }

    /// The oldest readback once complete, its bytes copied out on this thread.
    private func takeOne(wait: Bool) throws(GPUError) -> NV12Readback? {
        let got: (NV12Readback, [CopyJob])?
        if try callerSide({ r in r.deliversOffThread }) {
            got = try callerSide { r throws(GPUError) in try r.takeCompleted(wait: wait, offThread: true) }
        } else {
            got = try withRenderer { r throws(GPUError) in try r.takeCompleted(wait: wait, offThread: false) }
        }
        guard let (readback, jobs) = got else { return nil }
        StageClock.measure(.convert) { for j in jobs { j.run() } }
        return readback
    }

    /// The next completed NV12 frame (of any output) in submission order; nil
    /// when none is ready (or, with `wait`, when none is outstanding). `wait`
    /// blocks on its fence. With several outputs, `nextReadback` says whose it is.
    public func nextNV12(wait: Bool) throws(GPUError) -> VideoFrame? {
        try nextReadback(wait: wait)?.frame
    }

    /// Like `nextNV12`, with the output the frame belongs to. No render-thread
    /// hop where fences and readback buffers allow waiting and copying here.
    public func nextReadback(wait: Bool) throws(GPUError) -> NV12Readback? {
        calls.lock(); defer { calls.unlock() }
        if let d = try callerSide({ r in r.readbacks.ready.isEmpty ? nil : r.readbacks.ready.removeFirst() }) { return d }
        return try takeOne(wait: wait)
    }

    /// Waits for every outstanding readback and returns them in submission order.
    public func flush() throws(GPUError) -> [VideoFrame] {
        try flushReadbacks().map(\.frame)
    }

    /// Like `flush`, with the output each frame belongs to.
    public func flushReadbacks() throws(GPUError) -> [NV12Readback] {
        calls.lock(); defer { calls.unlock() }
        var out = try callerSide { r in
            let ready = r.readbacks.ready
            r.readbacks.ready.removeAll()
            return ready
        }
        while let d = try takeOne(wait: true) { out.append(d) }
        try withRenderer { r throws(GPUError) in try r.checkUsable(); r.timer.poll(); try r.checkReset() }
        return out
    }

    /// Output `output`'s frames go device to device into CUDA pictures
    /// `provider` lends (an NVENC encoder's frames: no host copy), where the
    /// readback is imported CUDA memory (`plan.readback == .cudaImported`) and
    /// the frame is not assembled from parts; elsewhere, or when the provider
    /// has none free, in host memory as always (`NV12Readback.device` says
    /// which). The provider runs on the thread that takes the frame. nil:
    /// host memory from now on. Returns whether the plan's readback allows it.
    @discardableResult
    public func setCUDAFrameProvider(output: OutputID, _ provider: CUDAFrameProvider?) -> Bool {
        renderer.withLock { r in r?.readbacks.cudaFrameProviders[output] = provider }
        return plan.readback == .cudaImported
    }

    /// NV12 readbacks submitted and not yet taken.
    public var outstandingReadbacks: Int {
        renderer.withLock { r in r?.readbacks.outstanding ?? 0 }
    }

    /// The output's render target as RGBA now: the same pixels its NV12 frames
    /// are made from (on the compute path, the last frame is drawn again as
    /// RGBA the first time, and every frame writes both from then on). Blocks
    /// until the GPU has finished drawing it.
    public func previewRGBA(output: OutputID) throws(GPUError) -> VideoFrame {
        try withRenderer { r throws(GPUError) in try r.previewRGBA(output: output) }
    }

    /// Exports the output's render target as dma-buf (EGL_MESA_image_dma_buf_export);
    /// `.unsupported` where absent. The caller owns and closes the fds.
    public func exportDmaBuf(output: OutputID) throws(GPUError) -> ExportedDmaBuf {
        try withRenderer { r throws(GPUError) in try r.exportDmaBuf(output: output) }
    }

    /// Per-pass timings (GPU timer queries where available, CPU otherwise),
    /// the timer queries polled now: a hop to the render thread.
    public var stats: GPUStats { (try? withRenderer { r in r.stats }) ?? GPUStats() }

    /// `stats` as of the render thread's last frame, which polled the timer
    /// queries then: read under the renderer's lock on this thread, no hop.
    /// For readers that poll (a server's take views and cost samples): a hop
    /// waits behind the frames queued on the render thread every take of the
    /// context shares, and commits this compositor's pending uploads there,
    /// out of a frame batch.
    public var lastPolledStats: GPUStats { (try? callerSide { r in r.lastPolledStats }) ?? GPUStats() }

    public func resetStats() { _ = try? withRenderer { r in r.resetStats() } }

    /// Waits for in-flight work, deletes every GPU object in the documented
    /// order (see `GPURenderer.shutdown`), destroys the context and ends the
    /// render thread. Outstanding readbacks are dropped: `flush()` first to
    /// keep them. Idempotent; later calls throw `.shutDown`.
    public func shutdown() {
        calls.lock(); defer { calls.unlock() }
        guard !isShut.exchange(true, ordering: .relaxed) else { return }
        // The rasterizer's threads may end with the context: their time is read first.
        StageClock.sample()
        _ = try? thread.sync { () throws(GPUError) in
            try lockedOnRenderThread { r in
                r?.shutdown()
                r = nil   // GLContext teardown happens here, on the render thread, with its last renderer
            }
        }
        if share.release() { thread.stop() }
    }

    /// Fault injection: the next GPU call reports a lost context, exactly as a
    /// reset would (sessions use it to test their rebuild path).
    public func simulateContextLoss() {
        renderer.withLock { $0?.simulateLoss = true }
    }

    /// Lists what every rung of the display ladder does for `selection`
    /// (for `diptych probe`). Runs on a temporary thread; contexts are released.
    public static func probeLadder(_ selection: GPUSelection = .auto) -> [RungOutcome] {
        let t = RenderThread(name: "diptych-gpu-probe")
        defer { t.stop() }
        return (try? t.sync { () throws(GPUError) in DisplayLadder.probe(selection) }) ?? []
    }
}
