import DiptychCore
import Foundation

/// The GPU compositor: one EGL context on its own render thread (or one
/// shared with other compositors, `init(sharingContextOf:)`), the uploaded
/// stream textures shared by every output, one render target per output, and
/// asynchronous NV12 readback.
///
/// Thread-safe: every method may be called from any thread; each runs its GL
/// work on the render thread and blocks until that is done (one compositor's
/// calls are serialized). After `GPUError.contextLost` every method throws it
/// again: build a new compositor (nothing old is reused).
public final class GPUCompositor: @unchecked Sendable {
    private let thread: RenderThread
    /// Compositors sharing `thread` (and its context); the last one stops it.
    private let share: ThreadShare
    /// Serializes this compositor's calls (a `composite` spans several hops).
    private let lock = NSRecursiveLock()
    private var isShut = false
    /// Touched only on the render thread.
    private let box: RendererBox
    /// The GPU in use (fixed at creation).
    public let info: GPUInfo

    final class RendererBox: @unchecked Sendable { var renderer: GPURenderer? }

    final class ThreadShare: @unchecked Sendable {
        private let lock = NSLock()
        private var count = 1
        func retain() { lock.lock(); count += 1; lock.unlock() }
        /// True when the last user let go.
        func release() -> Bool { lock.lock(); defer { lock.unlock() }; count -= 1; return count == 0 }
    }

    /// Walks the display ladder for `selection` and creates the context.
    /// `log` gets one line naming the platform, device and GL_RENDERER taken.
    /// Throws `GPUError.noDisplay` listing every rung tried and why it failed.
    /// - Parameters:
    ///   - readbackDepth: frames that may be in flight: the pack-buffer ring
    ///     holds this many NV12 readbacks, and each role keeps `readbackDepth + 2`
    ///     texture sets so an upload never waits for a frame still being drawn.
    ///   - uploadDepth: unpack buffers in the upload ring (default `2 × readbackDepth`:
    ///     two uploads per frame).
    ///   - directCopy: the direct-copy path. An NV12/I420 `upload` then keeps
    ///     a reference to the frame (its bytes must not change until the next
    ///     upload of that role) instead of copying it at once; where the draws
    ///     at the bottom of a plan are opaque 1:1 copies of such frames covering
    ///     the canvas, their bytes go straight into the output's NV12 planes and
    ///     only the region of the draws above them is rendered and converted
    ///     (results equal the general path within ±1 code value; the preview is
    ///     then made from the NV12 frame itself). Other plans take the general path.
    public convenience init(selection: GPUSelection = .auto, readbackDepth: Int = 4, uploadDepth: Int? = nil,
                            directCopy: Bool = false,
                            log: @escaping @Sendable (String) -> Void = { _ in }) throws(GPUError) {
        try self.init(selection: selection, readbackDepth: readbackDepth, uploadDepth: uploadDepth, directCopy: directCopy,
                      hooks: GPUTestHooks(), log: log)
    }

    init(selection: GPUSelection, readbackDepth: Int = 4, uploadDepth: Int? = nil, directCopy: Bool = false, hooks: GPUTestHooks,
         log: @escaping @Sendable (String) -> Void = { _ in }) throws(GPUError) {
        thread = RenderThread(name: "diptych-gpu")
        share = ThreadShare()
        box = RendererBox()
        let b = box
        let hooksBox = UncheckedBox(hooks)
        do throws(GPUError) {
            info = try thread.sync { () throws(GPUError) -> GPUInfo in
                let r = try GPURenderer(selection: selection, log: log, hooks: hooksBox.value,
                                        readbackDepth: readbackDepth, uploadDepth: uploadDepth, directCopy: directCopy)
                b.renderer = r
                return r.info
            }
        } catch {
            thread.stop()
            throw error
        }
    }

    /// Another compositor in `other`'s context, on `other`'s render thread:
    /// its own outputs, stream textures and buffer rings, but no context
    /// switch between them on the GPU (servers compositing many stream pairs
    /// lose far more to context switches than to one shared submission
    /// thread). The context lives until every compositor sharing it is shut
    /// down. A context loss hits all of them.
    public init(sharingContextOf other: GPUCompositor, readbackDepth: Int = 4, uploadDepth: Int? = nil,
                directCopy: Bool = false) throws(GPUError) {
        thread = other.thread
        share = other.share
        box = RendererBox()
        let b = box, ob = other.box
        info = try thread.sync { () throws(GPUError) -> GPUInfo in
            guard let o = ob.renderer else { throw .shutDown }
            let r = try GPURenderer(selection: .auto, sharing: o.context, log: { _ in }, readbackDepth: readbackDepth,
                                    uploadDepth: uploadDepth, directCopy: directCopy)
            b.renderer = r
            return r.info
        }
        share.retain()
    }

    deinit { shutdown() }

    /// Runs `body` with the renderer on the render thread.
    func withRenderer<T>(_ body: (GPURenderer) throws(GPUError) -> T) throws(GPUError) -> T {
        lock.lock(); defer { lock.unlock() }
        let b = box
        return try thread.sync { () throws(GPUError) -> T in
            guard let r = b.renderer else { throw .shutDown }
            return try body(r)
        }
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
    /// role's current picture for every output. The frame's bytes are copied
    /// before this returns. Throws `.badFrame` (no GL error left behind).
    public func upload(_ frame: VideoFrame, role: StreamRole) throws(GPUError) {
        try withRenderer { r throws(GPUError) in try r.upload(frame, role: role) }
    }

    /// Imports a dma-buf as the role's current picture (EGL_EXT_image_dma_buf_import);
    /// `.unsupported` where the extension is absent.
    public func upload(_ frame: DmaBufFrame, role: StreamRole) throws(GPUError) {
        try withRenderer { r throws(GPUError) in try r.upload(frame, role: role) }
    }

    /// Forgets the role's picture; draws of that role are skipped until the next upload.
    public func clearStream(_ role: StreamRole) {
        _ = try? withRenderer { r in r.clearStream(role) }
    }

    /// Draws `plan` into the output's render target and, when `readback` is
    /// true, converts it to NV12 and starts an asynchronous readback carrying
    /// `pts`. Does not wait for the GPU unless every readback buffer is busy.
    public func render(output: OutputID, plan: CompositionPlan, pts: MediaTime, readback: Bool = true) throws(GPUError) {
        try withRenderer { r throws(GPUError) in try r.render(output: output, plan: plan, pts: pts, readback: readback) }
    }

    /// One call for one output frame: uploads `uploads`, renders `plan` with
    /// NV12 readback, and returns the readbacks already completed, in
    /// submission order, without waiting (it waits only when every readback
    /// buffer is busy). The frames' bytes are copied into the staging buffers,
    /// and the completed readbacks out of theirs, on the calling thread, so
    /// compositors sharing one render thread copy in parallel; two hops to the
    /// render thread, which only issues GL calls.
    public func composite(uploads: [(VideoFrame, StreamRole)], output: OutputID, plan: CompositionPlan,
                          pts: MediaTime) throws(GPUError) -> [VideoFrame] {
        // Three steps, so the render thread only issues GL calls: (1) on the
        // render thread, stage the uploads (map buffers); (2) here, copy the
        // frames' bytes into them; (3) on the render thread, upload, draw,
        // read back; then, here, copy the completed readbacks out.
        lock.lock(); defer { lock.unlock() }
        let u = UncheckedBox(uploads)
        let staged = try withRenderer { r throws(GPUError) in
            var jobs: [CopyJob] = []
            let p = try r.prepareComposite(uploads: u.value, output: output, plan: plan, jobs: &jobs)
            return UncheckedBox((p, jobs))
        }
        let t0 = PassTimer.now()
        for j in staged.value.1 { j.run() }
        let copyMs = Double(PassTimer.now() - t0) / 1e6
        let done = try withRenderer { r throws(GPUError) in
            r.timer.stats.upload.cpuTotalMs += copyMs
            var jobs: [CopyJob] = []
            let frames = try r.commitComposite(staged.value.0, pts: pts, jobs: &jobs)
            return UncheckedBox((frames, jobs))
        }
        for j in done.value.1 { j.run() }
        return done.value.0
    }

    /// The next completed NV12 frame (of any output) in submission order; nil
    /// when none is ready (or, with `wait`, when none is outstanding). `wait`
    /// blocks on its fence. With several outputs, `nextReadback` says whose it is.
    public func nextNV12(wait: Bool) throws(GPUError) -> VideoFrame? {
        try withRenderer { r throws(GPUError) in try r.nextReadback(wait: wait)?.frame }
    }

    /// Like `nextNV12`, with the output the frame belongs to.
    public func nextReadback(wait: Bool) throws(GPUError) -> NV12Readback? {
        try withRenderer { r throws(GPUError) in try r.nextReadback(wait: wait) }
    }

    /// Waits for every outstanding readback and returns them in submission order.
    public func flush() throws(GPUError) -> [VideoFrame] {
        try withRenderer { r throws(GPUError) in try r.flush().map(\.frame) }
    }

    /// Like `flush`, with the output each frame belongs to.
    public func flushReadbacks() throws(GPUError) -> [NV12Readback] {
        try withRenderer { r throws(GPUError) in try r.flush() }
    }

    /// NV12 readbacks submitted and not yet taken.
    public var outstandingReadbacks: Int {
        (try? withRenderer { r in r.readbacksOutstanding }) ?? 0
    }

    /// The output's render target as RGBA now (the same pixels the NV12 frames
    /// are made from). Blocks until the GPU has finished drawing it.
    public func previewRGBA(output: OutputID) throws(GPUError) -> VideoFrame {
        try withRenderer { r throws(GPUError) in try r.previewRGBA(output: output) }
    }

    /// Exports the output's render target as dma-buf (EGL_MESA_image_dma_buf_export);
    /// `.unsupported` where absent. The caller owns and closes the fds.
    public func exportDmaBuf(output: OutputID) throws(GPUError) -> ExportedDmaBuf {
        try withRenderer { r throws(GPUError) in try r.exportDmaBuf(output: output) }
    }

    /// Per-pass timings (GPU timer queries where available, CPU otherwise).
    public var stats: GPUStats { (try? withRenderer { r in r.stats }) ?? GPUStats() }

    public func resetStats() { _ = try? withRenderer { r in r.resetStats() } }

    /// Waits for in-flight work, deletes every GPU object in the documented
    /// order (see `GPURenderer.shutdown`), destroys the context and ends the
    /// render thread. Outstanding readbacks are dropped: `flush()` first to
    /// keep them. Idempotent; later calls throw `.shutDown`.
    public func shutdown() {
        lock.lock(); defer { lock.unlock() }
        guard !isShut else { return }
        isShut = true
        let b = box
        _ = try? thread.sync { () throws(GPUError) in
            b.renderer?.shutdown()
            b.renderer = nil   // GLContext teardown happens here, on the render thread, with its last renderer
        }
        if share.release() { thread.stop() }
    }

    /// Fault injection: the next GPU call reports a lost context, exactly as a
    /// reset would (sessions use it to test their rebuild path).
    public func simulateContextLoss() {
        _ = try? withRenderer { r in r.simulateLoss = true }
    }

    /// Lists what every rung of the display ladder does for `selection`
    /// (for `diptych probe`). Runs on a temporary thread; contexts are released.
    public static func probeLadder(_ selection: GPUSelection = .auto) -> [RungOutcome] {
        let t = RenderThread(name: "diptych-gpu-probe")
        defer { t.stop() }
        return (try? t.sync { () throws(GPUError) in DisplayLadder.probe(selection) }) ?? []
    }
}
