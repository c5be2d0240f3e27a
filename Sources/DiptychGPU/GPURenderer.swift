import Foundation
import CEGL
import CGLES
import DiptychCore
import Dispatch

/// The GL side of the compositor. Lives on the render thread, which owns the
/// context; not Sendable. `GPUCompositor` is the thread-safe front.
///
/// Per output frame: composite pass (draws into the RGBA render target) →
/// NV12 pass (packs Y and UV into one RGBA8 target) → glReadPixels into a
/// pack buffer of a ring → fence. Readbacks are mapped once their fence has
/// signalled and delivered in submission order.
final class GPURenderer {
    let context: GLContext
    let timeline: FenceTimeline
    let shaders = ShaderCache()
    let timer: PassTimer
    let maxTextureSize: Int
    private let hooks: GPUTestHooks
    private let log: (String) -> Void
    private var vao: GLuint = 0
    private(set) var streams: [StreamRole: StreamSlot] = [:]
    private(set) var outputs: [OutputID: Output] = [:]
    private var nextOutput = 1
    /// Texture sets kept per role: the current one, one per frame in flight, one being uploaded.
    let maxSetsPerRole: Int
    private(set) var unpack: [RingBuffer] = []
    private var nextUnpack = 0
    private(set) var pack: [RingBuffer] = []
    private var nextPack = 0
    private(set) var pending: [PendingReadback] = []
    private var ready: [NV12Readback] = []
    /// CPU memory of delivered NV12 frames, reused once the consumer drops them.
    private let framePool = FrameBufferPool()
    /// Direct-copy path (see `renderDirect`): NV12/I420 frames are kept on
    /// upload and their bytes copied straight into the output's NV12 planes
    /// wherever a draw is an opaque 1:1 copy of them.
    let directCopy: Bool
    private(set) var lost = false
    private(set) var isShutDown = false
    /// Test hook: the next reset check reports a lost context.
    var simulateLoss = false

    var info: GPUInfo { context.info }
    var caps: GPUCapabilities { context.caps }

    /// A renderer with its own context (walks the display ladder for `selection`),
    /// or, with `sharing`, one more renderer in an existing context (same
    /// render thread; the context goes when its last renderer is released).
    init(selection: GPUSelection, sharing: GLContext? = nil, log: @escaping (String) -> Void, hooks: GPUTestHooks = GPUTestHooks(),
         readbackDepth: Int = 4, uploadDepth: Int? = nil, directCopy: Bool = false) throws(GPUError) {
        self.directCopy = directCopy
        let uploadDepth = uploadDepth ?? 2 * readbackDepth
        precondition(readbackDepth >= 1 && uploadDepth >= 1)
        maxSetsPerRole = readbackDepth + 2
        if let sharing { context = sharing } else { context = try DisplayLadder.open(selection, log: log) }
        self.hooks = hooks
        self.log = log
        timeline = FenceTimeline(ops: hooks.fenceOps ?? .gl)
        timer = PassTimer(timerQuery: context.caps.timerQuery, getResult: context.procs.getQueryObjectui64v)
        maxTextureSize = context.info.maxTextureSize
        glGenVertexArrays(1, &vao)
        var ids = [GLuint](repeating: 0, count: uploadDepth + readbackDepth)
        glGenBuffers(GLsizei(ids.count), &ids)
        unpack = ids.prefix(uploadDepth).map { RingBuffer(buffer: $0) }
        pack = ids.suffix(readbackDepth).map { RingBuffer(buffer: $0) }
        for r in StreamRole.allCases { streams[r] = StreamSlot() }
        glDisable(GL.dither)
        _ = glGetError()
    }

    deinit { assert(isShutDown, "GPURenderer released without shutdown(): GL objects leaked") }

    // MARK: State checks

    func checkUsable() throws(GPUError) {
        if isShutDown { throw .shutDown }
        unmapDelivered()
        if simulateLoss { markLost() }
        if lost { throw .contextLost }
    }

    /// Reads the reset status (robust contexts) and the simulated-loss hook.
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
        pending.removeAll(); ready.removeAll()
        log("diptych-gpu: context lost; every GPU object of this compositor is dead")
    }

    /// Checks GL errors at a pass boundary; GL_CONTEXT_LOST becomes `.contextLost`.
    func checkGL(_ label: @autoclosure () -> String) throws(GPUError) {
        let e = glGetError()
        guard e != GL.noError else { return }
        while glGetError() != GL.noError {}
        if e == GL.contextLost || context.eglReportsLost() { markLost(); throw .contextLost }
        throw .gl(label: label(), code: e)
    }

    // MARK: Deletion (the only places GL objects die)

    private func delete(_ kind: GLResourceKind, _ ids: [GLuint]) {
        guard !ids.isEmpty else { return }
        hooks.onDelete?(kind, ids)
        switch kind {
        case .texture: glDeleteTextures(GLsizei(ids.count), ids)
        case .buffer: glDeleteBuffers(GLsizei(ids.count), ids)
        case .framebuffer: glDeleteFramebuffers(GLsizei(ids.count), ids)
        case .image: break
        }
    }

    /// Deletes `set` once its last use has completed: textures first, then the EGLImage.
    private func retire(_ set: TextureSet) {
        timeline.retire(lastUse: set.lastUse) { [unowned self] in
            self.delete(.texture, set.textures)
            if let image = set.image {
                self.hooks.onDelete?(.image, [])
                _ = self.context.procs.destroyImage?(self.context.display, image)
            }
        }
    }

    private func retire(_ target: ColorTarget) {
        timeline.retire(lastUse: target.lastUse) { [unowned self] in
            self.delete(.framebuffer, [target.fbo])
            self.delete(.texture, [target.texture])
        }
    }

    // MARK: Outputs

    func addOutput(canvas: PixelSize, matrix: ColorMatrix, range: ColorRange) throws(GPUError) -> OutputID {
        try checkUsable()
        try checkCanvas(canvas)
        let id = OutputID(rawValue: nextOutput)
        nextOutput += 1
        let target = try ColorTarget(width: canvas.width, height: canvas.height, label: "\(id) render target")
        let nv12: ColorTarget
        do throws(GPUError) {
            nv12 = try ColorTarget(width: (canvas.width + 3) / 4, height: canvas.height + canvas.height / 2, label: "\(id) nv12")
        } catch { retire(target); throw error }
        outputs[id] = Output(id: id, canvas: canvas, target: target, nv12: nv12, matrix: matrix, range: range)
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
        guard let out = outputs.removeValue(forKey: id) else { return }
        retire(out.target)
        retire(out.nv12)
    }

    // MARK: Uploads

    /// A free texture set for `role` that fits the frame: a matching set whose
    /// last use has completed, a new one while the pool has room, else the
    /// oldest matching set after waiting for its fence.
    private func textureSet(for role: StreamRole, format: PixelFormat, width: Int, height: Int) -> TextureSet {
        let slot = streams[role]!
        slot.pool.removeAll { s in
            guard s !== slot.current, !s.matches(format, width, height) else { return false }
            retire(s)
            return true
        }
        let candidates = slot.pool.filter { $0 !== slot.current }
        if let free = candidates.first(where: { timeline.isComplete($0.lastUse) }) { return free }
        if slot.pool.count < maxSetsPerRole || candidates.isEmpty {
            let s = TextureSet.make(format: format, width: width, height: height)
            slot.pool.append(s)
            return s
        }
        let oldest = candidates.min { $0.lastUse < $1.lastUse }!
        timeline.wait(for: oldest.lastUse)
        return oldest
    }

    private func makeCurrent(_ set: TextureSet, role: StreamRole) {
        let slot = streams[role]!
        if let old = slot.current, old !== set {
            let keep = old.format != nil && set.format != nil && old.matches(set.format!, set.width, set.height)
            if !keep {
                slot.pool.removeAll { $0 === old }
                retire(old)
            }
        }
        slot.current = set
    }

    /// The next unpack buffer with at least `size` bytes, after its last use completed.
    /// Maps the unpack buffer `acquireUnpack` just bound for writing (no
    /// synchronization: the slot's fence has passed) and unbinds it.
    private func mapUnpack(size: Int, label: String) throws(GPUError) -> UnsafeMutableRawPointer {
        guard let dst = glMapBufferRange(GL.pixelUnpackBuffer, 0, GLsizeiptr(size),
                                         GL.mapWriteBit | GL.mapInvalidateBufferBit | GL.mapUnsynchronizedBit) else {
            glBindBuffer(GL.pixelUnpackBuffer, 0)
            try checkGL("\(label): map unpack buffer")
            throw .gl(label: "\(label): map unpack buffer", code: 0)
        }
        glBindBuffer(GL.pixelUnpackBuffer, 0)
        return dst
    }

    private func acquireUnpack(size: Int) -> Int {
        let i = nextUnpack
        nextUnpack = (nextUnpack + 1) % unpack.count
        if unpack[i].lastUse > timeline.completed { timeline.wait(for: unpack[i].lastUse) }
        glBindBuffer(GL.pixelUnpackBuffer, unpack[i].buffer)
        if unpack[i].capacity < size {
            let cap = (size + 4095) & ~4095
            glBufferData(GL.pixelUnpackBuffer, GLsizeiptr(cap), nil, GL.streamDraw)
            unpack[i].capacity = cap
        }
        return i
    }

    /// Makes `frame` the role's picture. With `directCopy` a YUV frame is only
    /// kept (its texture upload happens when a draw needs it; a draw that is a
    /// 1:1 opaque copy takes its bytes straight into the output's NV12 planes).
    func upload(_ frame: VideoFrame, role: StreamRole) throws(GPUError) {
        try checkUsable()
        try validateUpload(frame, maxTextureSize: maxTextureSize)
        let slot = streams[role]!
        if directCopy && frame.format.isYUV {
            slot.cpuFrame = frame
            slot.textureFresh = false
            return
        }
        slot.cpuFrame = nil
        try uploadNow(frame, role: role)
    }

    private func uploadNow(_ frame: VideoFrame, role: StreamRole) throws(GPUError) {
        var jobs: [CopyJob] = []
        let staged = try stageUpload(frame, role: role, jobs: &jobs)
        for j in jobs { j.run() }
        try commitUpload(staged)
    }

    /// An upload whose unpack buffer is mapped and whose copies are listed in
    /// `CopyJob`s (run on any thread) before `commitUpload`.
    struct StagedUpload {
        var frame: VideoFrame
        var role: StreamRole
        var set: TextureSet
        var slot: Int
        var layout: [(offset: Int, bytes: Int, rowLength: Int, bulk: Bool)]
    }

    /// Picks the texture set and the unpack buffer, maps the buffer and lists
    /// the copies into it. The buffer stays mapped until `commitUpload`.
    private func stageUpload(_ frame: VideoFrame, role: StreamRole, jobs: inout [CopyJob]) throws(GPUError) -> StagedUpload {
        timeline.poll(); timer.poll()
        let shapes = frame.format.planeShapes(width: frame.width, height: frame.height)
        // Where each plane goes in the unpack buffer, and its GL row length.
        var layout: [(offset: Int, bytes: Int, rowLength: Int, bulk: Bool)] = []
        var total = 0
        for (i, s) in shapes.enumerated() {
            let p = frame.planes[i]
            let bulk = p.stride % s.bytesPerPixel == 0 && p.stride <= 2 * s.rowBytes + 256
            let bytes = bulk ? p.stride * (s.height - 1) + s.rowBytes : s.rowBytes * s.height
            total = (total + 63) & ~63
            layout.append((total, bytes, bulk ? p.stride / s.bytesPerPixel : s.width, bulk))
            total += bytes
        }
        let set = textureSet(for: role, format: frame.format, width: frame.width, height: frame.height)
        let slot = acquireUnpack(size: total)
        let dst = try mapUnpack(size: total, label: "upload")
        // In use from now on: a second staging before the commit must not pick them.
        set.lastUse = timeline.pendingSerial
        unpack[slot].lastUse = timeline.pendingSerial
        for (i, s) in shapes.enumerated() {
            let p = frame.planes[i], l = layout[i]
            if l.bulk {
                jobs.append(CopyJob(dst: dst + l.offset, dstStride: l.bytes, src: p.baseAddress, srcStride: l.bytes, rowBytes: l.bytes, rows: 1))
            } else {
                jobs.append(CopyJob(dst: dst + l.offset, dstStride: s.rowBytes, src: p.baseAddress, srcStride: p.stride, rowBytes: s.rowBytes, rows: s.height))
            }
        }
        let keep = KeepAlive(frame)
        for i in jobs.indices.suffix(shapes.count) { jobs[i].owner = keep }
        return StagedUpload(frame: frame, role: role, set: set, slot: slot, layout: layout)
    }

    /// Unmaps the staged buffer and copies it into the textures (GPU side).
    private func commitUpload(_ st: StagedUpload) throws(GPUError) {
        let frame = st.frame, set = st.set
        let shapes = frame.format.planeShapes(width: frame.width, height: frame.height)
        timer.begin(.upload)
        glBindBuffer(GL.pixelUnpackBuffer, unpack[st.slot].buffer)
        glUnmapBuffer(GL.pixelUnpackBuffer)
        glPixelStorei(GL.unpackAlignment, 1)
        glActiveTexture(GL.texture0)
        for (i, s) in shapes.enumerated() {
            glBindTexture(GL.texture2D, set.textures[i])
            glPixelStorei(GL.unpackRowLength, GLint(st.layout[i].rowLength))
            glTexSubImage2D(GL.texture2D, 0, 0, 0, GLsizei(s.width), GLsizei(s.height), s.format, GL.unsignedByte,
                            diptych_gl_offset(st.layout[i].offset))
        }
        glPixelStorei(GL.unpackRowLength, 0)
        glBindTexture(GL.texture2D, 0)
        glBindBuffer(GL.pixelUnpackBuffer, 0)
        timer.end(.upload)
        let serial = timeline.pendingSerial
        set.lastUse = serial
        unpack[st.slot].lastUse = serial
        uploadCounter += 1
        set.uploadSerial = uploadCounter
        set.matrix = frame.matrix
        set.range = frame.range
        timeline.submit()
        makeCurrent(set, role: st.role)
        try checkGL("upload \(st.role) \(frame.format.rawValue) \(frame.width)x\(frame.height)")
        try checkReset()
    }

    /// Imports a dma-buf as the role's current texture (EGL_EXT_image_dma_buf_import).
    func upload(_ frame: DmaBufFrame, role: StreamRole) throws(GPUError) {
        try checkUsable()
        try frame.validate()
        guard caps.dmaBufImport else { throw .unsupported("EGL_EXT_image_dma_buf_import") }
        if frame.modifier != nil && !caps.dmaBufImportModifiers { throw .unsupported("EGL_EXT_image_dma_buf_import_modifiers") }
        guard caps.eglImageExternal, let bind = context.procs.imageTargetTexture2D else { throw .unsupported("GL_OES_EGL_image_external_essl3") }
        guard let create = context.procs.createImage else { throw .unsupported("EGL_KHR_image_base") }
        streams[role]!.cpuFrame = nil
        timeline.poll()
        let planeAttrs: [(fd: Int32, offset: Int32, pitch: Int32, lo: Int32, hi: Int32)] = [
            (EGL_DMA_BUF_PLANE0_FD_EXT, EGL_DMA_BUF_PLANE0_OFFSET_EXT, EGL_DMA_BUF_PLANE0_PITCH_EXT, EGL_DMA_BUF_PLANE0_MODIFIER_LO_EXT, EGL_DMA_BUF_PLANE0_MODIFIER_HI_EXT),
            (EGL_DMA_BUF_PLANE1_FD_EXT, EGL_DMA_BUF_PLANE1_OFFSET_EXT, EGL_DMA_BUF_PLANE1_PITCH_EXT, EGL_DMA_BUF_PLANE1_MODIFIER_LO_EXT, EGL_DMA_BUF_PLANE1_MODIFIER_HI_EXT),
            (EGL_DMA_BUF_PLANE2_FD_EXT, EGL_DMA_BUF_PLANE2_OFFSET_EXT, EGL_DMA_BUF_PLANE2_PITCH_EXT, EGL_DMA_BUF_PLANE2_MODIFIER_LO_EXT, EGL_DMA_BUF_PLANE2_MODIFIER_HI_EXT),
            (EGL_DMA_BUF_PLANE3_FD_EXT, EGL_DMA_BUF_PLANE3_OFFSET_EXT, EGL_DMA_BUF_PLANE3_PITCH_EXT, EGL_DMA_BUF_PLANE3_MODIFIER_LO_EXT, EGL_DMA_BUF_PLANE3_MODIFIER_HI_EXT),
        ]
        var a: [EGLint] = [EGLint(EGL_WIDTH), EGLint(frame.width), EGLint(EGL_HEIGHT), EGLint(frame.height),
                           EGLint(EGL_LINUX_DRM_FOURCC_EXT), EGLint(bitPattern: frame.fourcc)]
        for (i, p) in frame.planes.enumerated() {
            let k = planeAttrs[i]
            a += [k.fd, p.fd, k.offset, EGLint(p.offset), k.pitch, EGLint(p.stride)]
            if let m = frame.modifier {
                a += [k.lo, EGLint(bitPattern: UInt32(truncatingIfNeeded: m)), k.hi, EGLint(bitPattern: UInt32(truncatingIfNeeded: m >> 32))]
            }
        }
        a += [EGLint(EGL_YUV_COLOR_SPACE_HINT_EXT), EGLint(frame.matrix == .bt709 ? EGL_ITU_REC709_EXT : EGL_ITU_REC601_EXT),
              EGLint(EGL_SAMPLE_RANGE_HINT_EXT), EGLint(frame.range == .limited ? EGL_YUV_NARROW_RANGE_EXT : EGL_YUV_FULL_RANGE_EXT),
              EGLc.none]
        guard let image = create(context.display, diptych_egl_no_context(), EGLenum(EGL_LINUX_DMA_BUF_EXT), nil, a),
              image != diptych_egl_no_image() else {
            throw .dmaBuf("eglCreateImageKHR(EGL_LINUX_DMA_BUF_EXT, \(DmaBufFrame.fourccName(frame.fourcc)) \(frame.width)x\(frame.height)) failed: EGL error 0x\(String(eglGetError(), radix: 16))")
        }
        var tex: GLuint = 0
        glGenTextures(1, &tex)
        glBindTexture(GL.textureExternalOES, tex)
        glTexParameteri(GL.textureExternalOES, GL.textureMinFilter, GL.linear)
        glTexParameteri(GL.textureExternalOES, GL.textureMagFilter, GL.linear)
        glTexParameteri(GL.textureExternalOES, GL.textureWrapS, GL.clampToEdge)
        glTexParameteri(GL.textureExternalOES, GL.textureWrapT, GL.clampToEdge)
        bind(GL.textureExternalOES, image)
        glBindTexture(GL.textureExternalOES, 0)
        let set = TextureSet(format: nil, input: .external, width: frame.width, height: frame.height, textures: [tex], image: image)
        set.matrix = frame.matrix; set.range = frame.range
        set.lastUse = timeline.pendingSerial
        uploadCounter += 1
        set.uploadSerial = uploadCounter
        do throws(GPUError) { try checkGL("import dma-buf \(DmaBufFrame.fourccName(frame.fourcc))") } catch {
            retire(set); throw error
        }
        makeCurrent(set, role: role)
        try checkReset()
    }

    func clearStream(_ role: StreamRole) {
        let slot = streams[role]!
        var all = slot.pool
        if let c = slot.current, !all.contains(where: { $0 === c }) { all.append(c) }
        for s in all { retire(s) }
        slot.pool.removeAll(); slot.current = nil
        slot.cpuFrame = nil
    }

    // MARK: Rendering

    /// Whether the draw samples its picture 1:1 (then nearest filtering is exact).
    static func isUnitScale(_ d: DrawDescription, textureWidth: Int, textureHeight: Int) -> Bool {
        let upright = PixelSize(width: textureWidth, height: textureHeight).rotated(d.orientation.rotation)
        let cw = d.crop.width * Double(upright.width), ch = d.crop.height * Double(upright.height)
        let cx = d.crop.x * Double(upright.width), cy = d.crop.y * Double(upright.height)
        func integral(_ v: Double) -> Bool { abs(v - v.rounded()) < 1e-6 }
        return abs(cw - Double(d.destination.width)) < 1e-6 && abs(ch - Double(d.destination.height)) < 1e-6
            && integral(cx) && integral(cy)
    }

    /// Local (s, t) → texture coordinate as GL's column-major mat3x2: the
    /// upright crop point mapped through `orientation.sensorPoint(fromUpright:)`
    /// (affine, so three points define it). Texture row 0 is the picture's top.
    static func texFromLocal(crop: NormalizedRect, orientation: Orientation) -> [Float] {
        let c0 = orientation.sensorPoint(fromUpright: NormalizedPoint(x: crop.x, y: crop.y))
        let px = orientation.sensorPoint(fromUpright: NormalizedPoint(x: crop.x + crop.width, y: crop.y))
        let py = orientation.sensorPoint(fromUpright: NormalizedPoint(x: crop.x, y: crop.y + crop.height))
        return [px.x - c0.x, px.y - c0.y, py.x - c0.x, py.y - c0.y, c0.x, c0.y].map { Float($0) }
    }

    func render(output id: OutputID, plan: CompositionPlan, pts: MediaTime, readback: Bool) throws(GPUError) {
        var jobs: [CopyJob] = []
        let prepared = try prepareRender(output: id, plan: plan, readback: readback, jobs: &jobs)
        for j in jobs { j.run() }
        try commitRender(prepared, pts: pts)
    }

    /// A render whose CPU copies (uploads of kept frames, direct copies) are
    /// staged in mapped buffers; `commitRender` issues the GL work.
    struct PreparedRender {
        var id: OutputID
        var plan: CompositionPlan
        var readback: Bool
        var uploads: [StagedUpload]
        var direct: (plan: DirectPlan, staged: StagedDirect)?
    }

    /// First half of a render (render thread): waits for a free readback
    /// buffer, decides the path, maps buffers and lists the copies in `jobs`
    /// (which the caller runs, on any thread, before `commitRender`).
    func prepareRender(output id: OutputID, plan: CompositionPlan, readback: Bool, staged: Set<StreamRole> = [],
                       jobs: inout [CopyJob]) throws(GPUError) -> PreparedRender {
        try checkUsable()
        guard let out = outputs[id] else { preconditionFailure("\(id) does not exist") }
        guard plan.canvas == out.canvas else { throw .badCanvas("plan canvas \(plan.canvas) differs from \(id) canvas \(out.canvas)") }
        timeline.poll(); timer.poll()
        if readback {
            while pending.count >= pack.count { ready.append(try completeOldest()) }
        }
        let direct = directCopy && readback ? directPlan(out, plan, staged: staged) : nil
        var uploads: [StagedUpload] = []
        var seen = Set<StreamRole>()
        for d in direct?.rendered ?? plan.draws where d.destination.width > 0 && d.destination.height > 0 && !seen.contains(d.role) {
            seen.insert(d.role)
            guard let slot = streams[d.role], let f = slot.cpuFrame, !slot.textureFresh else { continue }
            uploads.append(try stageUpload(f, role: d.role, jobs: &jobs))
            slot.textureFresh = true
        }
        var staged: (plan: DirectPlan, staged: StagedDirect)?
        if let direct { staged = (direct, try stageDirect(out, direct, jobs: &jobs)) }
        return PreparedRender(id: id, plan: plan, readback: readback, uploads: uploads, direct: staged)
    }

    /// Second half of a render (render thread): uploads, draws, NV12 pass and readback.
    func commitRender(_ p: PreparedRender, pts: MediaTime) throws(GPUError) {
        for u in p.uploads { try commitUpload(u) }
        let id = p.id, plan = p.plan, readback = p.readback
        guard let out = outputs[id] else { preconditionFailure("\(id) does not exist") }
        if let direct = p.direct {
            try commitDirect(out, direct.plan, direct.staged, background: plan.background, pts: pts)
            return
        }
        // Programs first, so a compile error leaves no pass open.
        var work: [(DrawDescription, TextureSet, ShaderProgram)] = []
        for d in plan.draws where d.destination.width > 0 && d.destination.height > 0 {
            guard let set = streams[d.role]?.current else { continue }
            let masked = d.cornerRadius > 0 || d.borderWidth > 0
            work.append((d, set, try shaders.program(.composite(set.input, masked: masked))))
        }
        let nv12Program = readback ? try shaders.program(.nv12Pack) : nil

        let W = out.canvas.width, H = out.canvas.height
        glBindFramebuffer(GL.framebuffer, out.target.fbo)
        glViewport(0, 0, GLsizei(W), GLsizei(H))
        glDisable(GL.scissorTest); glDisable(GL.depthTest); glDisable(GL.cullFace); glDisable(GL.dither)
        let bg = plan.background
        glClearColor(GLfloat(bg.r * bg.a), GLfloat(bg.g * bg.a), GLfloat(bg.b * bg.a), GLfloat(bg.a))
        // Begun after the bind and clear: llvmpipe times the bound framebuffer's scene.
        timer.begin(.composite)
        glClear(GL.colorBufferBit)
        glEnable(GL.blend)
        glBlendFunc(GL.one, GL.oneMinusSrcAlpha)
        drawAll(work, canvas: out.canvas)
        glDisable(GL.blend)
        timer.end(.composite)
        out.directLast = false

        var slot = -1
        if let nv12Program {
            glBindFramebuffer(GL.framebuffer, out.nv12.fbo)
            glViewport(0, 0, GLsizei(out.nv12.width), GLsizei(out.nv12.height))
            timer.begin(.nv12)
            setNV12Uniforms(nv12Program, out)
            glDrawArrays(GL.triangles, 0, 3)
            slot = startReadback(out)
            timer.end(.nv12)
        }
        try finishSubmission(out, id: id, pts: pts, slot: slot)
    }

    /// The draws of a composite pass, each with all of its own uniforms.
    private func drawAll(_ work: [(DrawDescription, TextureSet, ShaderProgram)], canvas: PixelSize) {
        let W = canvas.width, H = canvas.height
        glBindVertexArray(vao)
        for (d, set, prog) in work {
            glUseProgram(prog.id)
            // Every draw sets all of its own uniforms (no shared buffer).
            let r = d.destination
            glUniform4f(prog.uniform("u_dest"), GLfloat(r.x), GLfloat(r.y), GLfloat(r.width), GLfloat(r.height))
            glUniform2f(prog.uniform("u_canvas"), GLfloat(W), GLfloat(H))
            GPURenderer.texFromLocal(crop: d.crop, orientation: d.orientation).withUnsafeBufferPointer {
                glUniformMatrix3x2fv(prog.uniform("u_texFromLocal"), 1, GL.noTranspose, $0.baseAddress)
            }
            glUniform1f(prog.uniform("u_opacity"), GLfloat(min(max(d.opacity, 0), 1)))
            if set.input == .nv12 || set.input == .i420 {
                let c = YUVCoefficients(matrix: set.matrix, range: set.range)
                YUVCoefficients.columnMajor(c.yuvToRGB).withUnsafeBufferPointer {
                    glUniformMatrix3fv(prog.uniform("u_yuvToRgb"), 1, GL.noTranspose, $0.baseAddress)
                }
                glUniform3f(prog.uniform("u_yuvOffset"), GLfloat(c.offset[0]), GLfloat(c.offset[1]), GLfloat(c.offset[2]))
            }
            if prog.key.masked {
                glUniform1f(prog.uniform("u_radius"), GLfloat(max(d.cornerRadius, 0)))
                glUniform1f(prog.uniform("u_border"), GLfloat(max(d.borderWidth, 0)))
                let b = d.borderColor
                glUniform4f(prog.uniform("u_borderColor"), GLfloat(b.r), GLfloat(b.g), GLfloat(b.b), GLfloat(b.a))
            }
            let filter = GPURenderer.isUnitScale(d, textureWidth: set.width, textureHeight: set.height) ? GL.nearest : GL.linear
            let target = set.input == .external ? GL.textureExternalOES : GL.texture2D
            for (unit, tex) in set.textures.enumerated() {
                glActiveTexture(GL.texture0 + GLenum(unit))
                glBindTexture(target, tex)
                glTexParameteri(target, GL.textureMinFilter, filter)
                glTexParameteri(target, GL.textureMagFilter, filter)
                glUniform1i(prog.uniform("u_tex\(unit)"), GLint(unit))
            }
            glDrawArrays(GL.triangleStrip, 0, 4)
            set.lastUse = timeline.pendingSerial
        }
    }

    /// Binds the NV12 pack program with the output's conversion.
    private func setNV12Uniforms(_ nv12Program: ShaderProgram, _ out: Output) {
        let W = out.canvas.width, H = out.canvas.height
        glUseProgram(nv12Program.id)
        glActiveTexture(GL.texture0)
        glBindTexture(GL.texture2D, out.target.texture)
        glUniform1i(nv12Program.uniform("u_src"), 0)
        glUniform2i(nv12Program.uniform("u_size"), GLint(W), GLint(H))
        let c = YUVCoefficients(matrix: out.matrix, range: out.range)
        let m = c.rgbToYUV
        glUniform3f(nv12Program.uniform("u_yCoef"), GLfloat(m[0][0]), GLfloat(m[0][1]), GLfloat(m[0][2]))
        glUniform3f(nv12Program.uniform("u_uCoef"), GLfloat(m[1][0]), GLfloat(m[1][1]), GLfloat(m[1][2]))
        glUniform3f(nv12Program.uniform("u_vCoef"), GLfloat(m[2][0]), GLfloat(m[2][1]), GLfloat(m[2][2]))
        glUniform3f(nv12Program.uniform("u_offset"), GLfloat(c.offset[0]), GLfloat(c.offset[1]), GLfloat(c.offset[2]))
    }

    /// Starts the asynchronous readback of the output's NV12 target into the
    /// next pack buffer of the ring; returns the slot.
    private func startReadback(_ out: Output) -> Int {
        glBindFramebuffer(GL.framebuffer, out.nv12.fbo)
        let slot = nextPack
        nextPack = (nextPack + 1) % pack.count
        precondition(!pack[slot].busy, "pack buffer \(slot) still holds an undelivered readback")
        let bytes = out.nv12Stride * out.nv12.height
        glBindBuffer(GL.pixelPackBuffer, pack[slot].buffer)
        if pack[slot].capacity < bytes {
            glBufferData(GL.pixelPackBuffer, GLsizeiptr(bytes), nil, GL.streamRead)
            pack[slot].capacity = bytes
        }
        glPixelStorei(GL.packAlignment, 4)
        glReadPixels(0, 0, GLsizei(out.nv12.width), GLsizei(out.nv12.height), GL.rgba, GL.unsignedByte, nil) // offset 0 into the bound pack buffer
        glBindBuffer(GL.pixelPackBuffer, 0)
        return slot
    }

    /// Fences the frame's work and queues its readback (slot < 0: none).
    private func finishSubmission(_ out: Output, id: OutputID, pts: MediaTime, slot: Int) throws(GPUError) {
        let W = out.canvas.width, H = out.canvas.height
        glBindFramebuffer(GL.framebuffer, 0)
        let serial = timeline.pendingSerial
        out.target.lastUse = serial
        out.nv12.lastUse = serial
        timeline.submit()
        if slot >= 0 {
            pack[slot].busy = true
            pack[slot].lastUse = serial
            pending.append(PendingReadback(serial: serial, slot: slot, output: id, pts: pts, width: W, height: H,
                                           stride: out.nv12Stride, bytes: out.nv12Stride * out.nv12.height,
                                           matrix: out.matrix, range: out.range))
        }
        out.lastPTS = pts
        timer.stats.framesRendered += 1
        try checkGL("render \(id)")
        try checkReset()
    }

    // MARK: Direct copy

    /// A composite whose bottom draws are opaque 1:1 copies of YUV frames
    /// covering the whole canvas: their bytes go straight into the output's
    /// NV12 planes, and only `region` (the bounding box of the draws above
    /// them, aligned to 4 × 2 pixels) is rendered and converted on the GPU.
    struct DirectPlan {
        var copies: [CopyDraw]
        var rendered: [DrawDescription]
        var region: PixelRect?

        /// What an opaque, unmasked rendered draw covers needs neither the
        /// background nor the copies' pixels beneath it.
        var cover: PixelRect? { rendered.first { $0.opacity >= 1 && $0.cornerRadius <= 0 && $0.borderWidth <= 0 }?.destination }
        func uncovered(_ r: PixelRect) -> [PixelRect] { cover.map { GPURenderer.subtract(r, $0) } ?? [r] }
    }

    /// What a rendered region's pixels depend on when nothing beneath shows:
    /// its rectangle, the draws and the exact uploads they sample. Equal keys
    /// give equal bytes, so a 30 fps secondary under a 60 fps primary is
    /// rendered once per secondary frame.
    struct RegionKey: Hashable {
        var region: PixelRect
        var draws: [DrawDescription]
        var uploads: [UInt64]
    }

    /// The source pixel offset of a 1:1 copy draw of `frame`, or nil when the
    /// draw is not one (scaled, rotated, mirrored, translucent, masked,
    /// unaligned, or another colour conversion than the output's).
    func copySource(_ d: DrawDescription, frame f: VideoFrame, out: Output) -> CopyDraw? {
        guard f.format.isYUV, f.matrix == out.matrix, f.range == out.range,
              d.orientation.rotation == .r0, d.opacity >= 1, d.cornerRadius <= 0, d.borderWidth <= 0,
              GPURenderer.isUnitScale(d, textureWidth: f.width, textureHeight: f.height) else { return nil }
        let r = d.destination
        guard r.x >= 0, r.y >= 0, r.x + r.width <= out.canvas.width, r.y + r.height <= out.canvas.height,
              r.x % 4 == 0, r.width % 4 == 0, r.y % 2 == 0, r.height % 2 == 0 else { return nil }
        let cx = Int((d.crop.x * Double(f.width)).rounded()), cy = Int((d.crop.y * Double(f.height)).rounded())
        guard cx % 2 == 0, cy % 2 == 0, cx >= 0, cy >= 0, cx + r.width <= f.width, cy + r.height <= f.height else { return nil }
        // Mirrored: the upright crop [cx, cx + w) is sensor [W - cx - w, W - cx), read right to left.
        let sx = d.orientation.mirrored ? f.width - cx - r.width : cx
        guard sx % 2 == 0 else { return nil }
        return CopyDraw(destination: r, frame: f, sourceX: sx, sourceY: cy, mirrored: d.orientation.mirrored)
    }

    func directPlan(_ out: Output, _ plan: CompositionPlan, staged: Set<StreamRole> = []) -> DirectPlan? {
        let W = out.canvas.width, H = out.canvas.height
        guard W % 4 == 0, H % 2 == 0 else { return nil }
        let draws = plan.draws.filter { d in
            d.destination.width > 0 && d.destination.height > 0
                && (streams[d.role]?.current != nil || streams[d.role]?.cpuFrame != nil || staged.contains(d.role))
        }
        var copies: [CopyDraw] = []
        var area = 0
        for d in draws {
            guard let f = streams[d.role]?.cpuFrame, let c = copySource(d, frame: f, out: out) else { break }
            for other in copies {
                let a = other.destination, b = d.destination
                if a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height { return nil }
            }
            copies.append(c)
            area += d.destination.width * d.destination.height
        }
        guard !copies.isEmpty else { return nil }
        let rendered = Array(draws[copies.count...])
        var region: PixelRect?
        if !rendered.isEmpty {
            var x0 = W, y0 = H, x1 = 0, y1 = 0
            for d in rendered {
                let r = d.destination
                x0 = min(x0, r.x); y0 = min(y0, r.y); x1 = max(x1, r.x + r.width); y1 = max(y1, r.y + r.height)
            }
            x0 = max(0, x0) & ~3; y0 = max(0, y0) & ~1
            x1 = min(W, (x1 + 3) & ~3); y1 = min(H, (y1 + 1) & ~1)
            if x1 > x0 && y1 > y0 { region = PixelRect(x: x0, y: y0, width: x1 - x0, height: y1 - y0) }
        }
        // Every pixel comes from a copy or from the rendered region (copies are disjoint).
        var covered = area
        if let R = region {
            covered += R.width * R.height
            for c in copies { covered -= GPURenderer.intersection(R, c.destination).map { $0.width * $0.height } ?? 0 }
        }
        guard covered == W * H else { return nil }
        return DirectPlan(copies: copies, rendered: rendered, region: region)
    }

    /// `a` minus `b`: up to four rectangles (above, below, left, right of `b`).
    static func subtract(_ a: PixelRect, _ b: PixelRect) -> [PixelRect] {
        guard let i = intersection(a, b) else { return [a] }
        var out: [PixelRect] = []
        if i.y > a.y { out.append(PixelRect(x: a.x, y: a.y, width: a.width, height: i.y - a.y)) }
        if i.y + i.height < a.y + a.height {
            out.append(PixelRect(x: a.x, y: i.y + i.height, width: a.width, height: a.y + a.height - i.y - i.height))
        }
        if i.x > a.x { out.append(PixelRect(x: a.x, y: i.y, width: i.x - a.x, height: i.height)) }
        if i.x + i.width < a.x + a.width {
            out.append(PixelRect(x: i.x + i.width, y: i.y, width: a.x + a.width - i.x - i.width, height: i.height))
        }
        return out
    }

    static func intersection(_ a: PixelRect, _ b: PixelRect) -> PixelRect? {
        let x0 = max(a.x, b.x), y0 = max(a.y, b.y)
        let x1 = min(a.x + a.width, b.x + b.width), y1 = min(a.y + a.height, b.y + b.height)
        return x1 > x0 && y1 > y0 ? PixelRect(x: x0, y: y0, width: x1 - x0, height: y1 - y0) : nil
    }

    /// Copies `rows` rows of `rowBytes` (on several cores for large blocks).
    static func copyRows(_ dst: UnsafeMutableRawPointer, dstStride: Int, _ src: UnsafeRawPointer, srcStride: Int,
                         rowBytes: Int, rows: Int) {
        if dstStride == rowBytes && srcStride == rowBytes {
            BulkCopy.copy(dst, src, rowBytes * rows)
            return
        }
        let lanes = rowBytes * rows >= BulkCopy.threshold ? BulkCopy.lanes : 1
        let d = UInt(bitPattern: dst), s = UInt(bitPattern: src)
        let band = (rows + lanes - 1) / lanes
        let work: @Sendable (Int) -> Void = { lane in
            for row in (lane * band)..<min(rows, (lane + 1) * band) {
                UnsafeMutableRawPointer(bitPattern: d + UInt(row * dstStride))!
                    .copyMemory(from: UnsafeRawPointer(bitPattern: s + UInt(row * srcStride))!, byteCount: rowBytes)
            }
        }
        if lanes > 1 { DispatchQueue.concurrentPerform(iterations: lanes, execute: work) } else { work(0) }
    }

    /// The direct-copy path. The copy draws' bytes never go through the GPU
    /// except where the region `R` (the draws above them) needs them beneath:
    /// (1) the copies' parts inside `R` go through the unpack ring into the
    /// output's packed NV12 target; (2) in `R` only, the composite pass draws
    /// that NV12 picture (nv12unpack.frag) and the draws above it, and the NV12
    /// pass converts `R` back; (3) only `R` is read back. On delivery the frame
    /// is assembled on the CPU: each copy's planes into place, then `R` from
    /// the GPU (see `deliveryJobs`). The preview is made from that frame
    /// (`refreshTarget`), so it shows exactly the pixels the encoder gets.
    struct StagedDirect {
        var slot: Int
        /// Per copy, the part inside the region and where its Y and UV bytes are staged.
        var parts: [(copy: Int, rect: PixelRect, y: Int, uv: Int)]
    }

    /// Maps an unpack buffer and lists the copies' parts inside the region.
    private func stageDirect(_ out: Output, _ direct: DirectPlan, jobs: inout [CopyJob]) throws(GPUError) -> StagedDirect {
        guard let R = direct.region else { return StagedDirect(slot: -1, parts: []) }
        var parts: [(copy: Int, rect: PixelRect, y: Int, uv: Int)] = []
        var total = 0
        for (k, c) in direct.copies.enumerated() {
            guard let i = GPURenderer.intersection(R, c.destination) else { continue }
            for u in direct.uncovered(i) {
                // Whole NV12 texels: 4 pixels wide, 2 rows high (`i` is aligned so).
                let x0 = u.x & ~3, y0 = u.y & ~1
                let r = PixelRect(x: x0, y: y0, width: min((u.x + u.width + 3) & ~3, i.x + i.width) - x0,
                                  height: min((u.y + u.height + 1) & ~1, i.y + i.height) - y0)
                total = (total + 63) & ~63
                let y = total
                total += r.width * r.height
                total = (total + 63) & ~63
                parts.append((k, r, y, total))
                total += r.width * r.height / 2
            }
        }
        guard !parts.isEmpty else { return StagedDirect(slot: -1, parts: []) }
        timeline.poll()
        let slot = acquireUnpack(size: total)
        let dst = try mapUnpack(size: total, label: "direct copy")
        unpack[slot].lastUse = timeline.pendingSerial
        let keep = KeepAlive(direct.copies)
        for part in parts {
            for var j in GPURenderer.copyJobs(direct.copies[part.copy], part: part.rect, y: dst + part.y, yStride: part.rect.width,
                                              uv: dst + part.uv, uvStride: part.rect.width) {
                j.owner = keep
                jobs.append(j)
            }
        }
        return StagedDirect(slot: slot, parts: parts)
    }

    private func commitDirect(_ out: Output, _ direct: DirectPlan, _ staged: StagedDirect, background: RGBAColor,
                              pts: MediaTime) throws(GPUError) {
        let W = out.canvas.width, H = out.canvas.height
        var work: [(DrawDescription, TextureSet, ShaderProgram)] = []
        for d in direct.rendered {
            guard let set = streams[d.role]?.current else { continue }
            let masked = d.cornerRadius > 0 || d.borderWidth > 0
            work.append((d, set, try shaders.program(.composite(set.input, masked: masked))))
        }
        let nv12Program = try shaders.program(.nv12Pack)
        let unpackProgram = try shaders.program(.nv12Unpack)
        var packSlot = -1, packBytes = 0
        var frame = DirectFrame(copies: direct.copies, region: direct.region)

        // A region that nothing beneath shows through, drawn from the same uploads as last time: reuse its bytes.
        var key: RegionKey?
        if let R = direct.region, staged.parts.isEmpty, direct.uncovered(R).isEmpty, work.count == direct.rendered.count {
            key = RegionKey(region: R, draws: direct.rendered, uploads: work.map { $0.1.uploadSerial })
        }
        if let key, key == out.regionKey, let cache = out.regionCache {
            frame.reuse = cache
            timer.stats.regionsReused += 1
        } else if let R = direct.region {
            if let key {
                let cache = RegionCache(region: R)
                out.regionCache = cache
                out.regionKey = key
                frame.fill = cache
            } else {
                out.regionKey = nil
                out.regionCache = nil
            }
            // (1) The copies' parts inside the region, into the NV12 planes.
            if staged.slot >= 0 {
                timer.begin(.upload)
                glBindBuffer(GL.pixelUnpackBuffer, unpack[staged.slot].buffer)
                glUnmapBuffer(GL.pixelUnpackBuffer)
                glPixelStorei(GL.unpackAlignment, 4)
                glPixelStorei(GL.unpackRowLength, 0)
                glActiveTexture(GL.texture0)
                glBindTexture(GL.texture2D, out.nv12.texture)
                for part in staged.parts {
                    let r = part.rect
                    glTexSubImage2D(GL.texture2D, 0, GLint(r.x / 4), GLint(r.y), GLsizei(r.width / 4), GLsizei(r.height),
                                    GL.rgba, GL.unsignedByte, diptych_gl_offset(part.y))
                    glTexSubImage2D(GL.texture2D, 0, GLint(r.x / 4), GLint(H + r.y / 2), GLsizei(r.width / 4), GLsizei(r.height / 2),
                                    GL.rgba, GL.unsignedByte, diptych_gl_offset(part.uv))
                }
                glBindTexture(GL.texture2D, 0)
                glBindBuffer(GL.pixelUnpackBuffer, 0)
                timer.end(.upload)
                unpack[staged.slot].lastUse = timeline.pendingSerial
            }
            // (2) The region: background, the copies beneath, the draws above.
            glDisable(GL.depthTest); glDisable(GL.cullFace); glDisable(GL.dither)
            glBindFramebuffer(GL.framebuffer, out.target.fbo)
            glViewport(0, 0, GLsizei(W), GLsizei(H))
            glEnable(GL.scissorTest)
            let bg = background
            glClearColor(GLfloat(bg.r * bg.a), GLfloat(bg.g * bg.a), GLfloat(bg.b * bg.a), GLfloat(bg.a))
            timer.begin(.composite)
            // What an opaque, unmasked draw covers needs neither background nor
            // the picture beneath (a software rasterizer pays for every pass).
            for i in direct.uncovered(R) {
                glScissor(GLint(i.x), GLint(i.y), GLsizei(i.width), GLsizei(i.height))
                glClear(GL.colorBufferBit)
            }
            for part in staged.parts {
                let i = part.rect
                glScissor(GLint(i.x), GLint(i.y), GLsizei(i.width), GLsizei(i.height))
                drawNV12Picture(unpackProgram, out)
            }
            glScissor(GLint(R.x), GLint(R.y), GLsizei(R.width), GLsizei(R.height))
            glEnable(GL.blend)
            glBlendFunc(GL.one, GL.oneMinusSrcAlpha)
            drawAll(work, canvas: out.canvas)
            glDisable(GL.blend)
            timer.end(.composite)
            glBindFramebuffer(GL.framebuffer, out.nv12.fbo)
            glViewport(0, 0, GLsizei(out.nv12.width), GLsizei(out.nv12.height))
            timer.begin(.nv12)
            setNV12Uniforms(nv12Program, out)
            glScissor(GLint(R.x / 4), GLint(R.y), GLsizei(R.width / 4), GLsizei(R.height))
            glDrawArrays(GL.triangles, 0, 3)
            glScissor(GLint(R.x / 4), GLint(H + R.y / 2), GLsizei(R.width / 4), GLsizei(R.height / 2))
            glDrawArrays(GL.triangles, 0, 3)
            glDisable(GL.scissorTest)
            // (3) Read back the region only: its Y rows, then its UV rows.
            packSlot = nextPack
            nextPack = (nextPack + 1) % pack.count
            precondition(!pack[packSlot].busy, "pack buffer \(packSlot) still holds an undelivered readback")
            packBytes = R.width * R.height * 3 / 2
            glBindBuffer(GL.pixelPackBuffer, pack[packSlot].buffer)
            if pack[packSlot].capacity < packBytes {
                let cap = max(packBytes, out.nv12Stride * out.nv12.height)
                glBufferData(GL.pixelPackBuffer, GLsizeiptr(cap), nil, GL.streamRead)
                pack[packSlot].capacity = cap
            }
            glPixelStorei(GL.packAlignment, 4)
            glReadPixels(GLint(R.x / 4), GLint(R.y), GLsizei(R.width / 4), GLsizei(R.height), GL.rgba, GL.unsignedByte, nil)
            glReadPixels(GLint(R.x / 4), GLint(H + R.y / 2), GLsizei(R.width / 4), GLsizei(R.height / 2), GL.rgba, GL.unsignedByte,
                         UnsafeMutableRawPointer(mutating: diptych_gl_offset(R.width * R.height)))
            glBindBuffer(GL.pixelPackBuffer, 0)
            timer.end(.nv12)
            out.target.lastUse = timeline.pendingSerial
        }
        if frame.reuse != nil { frame.region = nil }
        glBindFramebuffer(GL.framebuffer, 0)
        let serial = timeline.pendingSerial
        out.nv12.lastUse = serial
        timeline.submit()
        if packSlot >= 0 {
            pack[packSlot].busy = true
            pack[packSlot].lastUse = serial
        }
        pending.append(PendingReadback(serial: serial, slot: packSlot, output: out.id, pts: pts, width: W, height: H,
                                       stride: out.nv12Stride, bytes: packBytes, matrix: out.matrix, range: out.range,
                                       direct: frame))
        out.directLast = true
        out.lastPTS = pts
        timer.stats.framesDirect += 1
        timer.stats.framesRendered += 1
        try checkGL("render \(out.id) (direct copy)")
        try checkReset()
    }

    /// Draws the output's NV12 target as RGB into the bound framebuffer
    /// (full canvas; the scissor, if any, limits it).
    private func drawNV12Picture(_ program: ShaderProgram, _ out: Output) {
        glUseProgram(program.id)
        glActiveTexture(GL.texture0)
        glBindTexture(GL.texture2D, out.nv12.texture)
        glUniform1i(program.uniform("u_src"), 0)
        glUniform1i(program.uniform("u_height"), GLint(out.canvas.height))
        let c = YUVCoefficients(matrix: out.matrix, range: out.range)
        YUVCoefficients.columnMajor(c.yuvToRGB).withUnsafeBufferPointer {
            glUniformMatrix3fv(program.uniform("u_yuvToRgb"), 1, GL.noTranspose, $0.baseAddress)
        }
        glUniform3f(program.uniform("u_yuvOffset"), GLfloat(c.offset[0]), GLfloat(c.offset[1]), GLfloat(c.offset[2]))
        glBindVertexArray(vao)
        glDrawArrays(GL.triangles, 0, 3)
    }

    /// After a direct-copy frame the GPU holds only the rendered region: the
    /// frame is complete only once delivered (assembled on the CPU). Waits for
    /// it, uploads it whole into the NV12 target and converts that into the
    /// RGBA target, so preview and export show exactly the encoder's pixels.
    private func refreshTarget(_ out: Output) throws(GPUError) {
        guard out.directLast else { return }
        while pending.contains(where: { $0.output == out.id }) { ready.append(try completeOldest()) }
        guard let last = out.lastDirectFrame else { return }
        let program = try shaders.program(.nv12Unpack)
        let bytes = last.planes[0].stride * last.height * 3 / 2
        let slot = acquireUnpack(size: bytes)
        guard let dst = glMapBufferRange(GL.pixelUnpackBuffer, 0, GLsizeiptr(bytes),
                                         GL.mapWriteBit | GL.mapInvalidateBufferBit | GL.mapUnsynchronizedBit) else {
            glBindBuffer(GL.pixelUnpackBuffer, 0)
            try checkGL("preview: map unpack buffer")
            throw .gl(label: "preview: map unpack buffer", code: 0)
        }
        BulkCopy.copy(dst, last.planes[0].baseAddress, bytes)   // one block: Y rows then UV rows, stride = nv12Stride
        glUnmapBuffer(GL.pixelUnpackBuffer)
        glPixelStorei(GL.unpackAlignment, 4)
        glPixelStorei(GL.unpackRowLength, 0)
        glActiveTexture(GL.texture0)
        glBindTexture(GL.texture2D, out.nv12.texture)
        glTexSubImage2D(GL.texture2D, 0, 0, 0, GLsizei(out.nv12.width), GLsizei(out.nv12.height), GL.rgba, GL.unsignedByte,
                        diptych_gl_offset(0))
        glBindTexture(GL.texture2D, 0)
        glBindBuffer(GL.pixelUnpackBuffer, 0)
        glBindFramebuffer(GL.framebuffer, out.target.fbo)
        glViewport(0, 0, GLsizei(out.canvas.width), GLsizei(out.canvas.height))
        glDisable(GL.scissorTest); glDisable(GL.blend)
        drawNV12Picture(program, out)
        glBindFramebuffer(GL.framebuffer, 0)
        unpack[slot].lastUse = timeline.pendingSerial
        out.target.lastUse = timeline.pendingSerial
        out.nv12.lastUse = timeline.pendingSerial
        timeline.submit()
        out.directLast = false
        try checkGL("refresh \(out.id) from NV12")
    }

    /// Maps the oldest readback (waiting for its fence) and copies it into an NV12 frame.
    private func completeOldest() throws(GPUError) -> NV12Readback {
        let r = pending.removeFirst()
        timeline.wait(for: r.serial)
        var src: UnsafeRawPointer?
        if r.slot >= 0 {
            pack[r.slot].busy = false
            glBindBuffer(GL.pixelPackBuffer, pack[r.slot].buffer)
            guard let p = glMapBufferRange(GL.pixelPackBuffer, 0, GLsizeiptr(r.bytes), GL.mapReadBit) else {
                glBindBuffer(GL.pixelPackBuffer, 0)
                try checkGL("readback: map pack buffer")
                throw .gl(label: "readback: map pack buffer", code: 0)
            }
            src = UnsafeRawPointer(p)
        }
        let storage = framePool.storage(count: r.frameBytes) { dst in
            for j in GPURenderer.deliveryJobs(r, packed: src, into: dst) { j.run() }
        }
        if r.slot >= 0 { glUnmapBuffer(GL.pixelPackBuffer) }
        glBindBuffer(GL.pixelPackBuffer, 0)
        timer.stats.framesDelivered += 1
        try checkGL("readback \(r.output)")
        let f = GPURenderer.frame(r, storage)
        if r.direct != nil { outputs[r.output]?.lastDirectFrame = f }
        return NV12Readback(output: r.output, frame: f)
    }

    /// The jobs copying rectangle `r` (canvas pixels, inside `c.destination`,
    /// aligned to 2) of copy draw `c` from its frame: Y rows to `y`, NV12 UV rows to `uv`.
    static func copyJobs(_ c: CopyDraw, part r: PixelRect, y: UnsafeMutableRawPointer, yStride: Int,
                         uv: UnsafeMutableRawPointer, uvStride: Int) -> [CopyJob] {
        let d = c.destination, f = c.frame
        let dx = r.x - d.x, dy = r.y - d.y
        let sx = c.mirrored ? c.sourceX + (d.width - dx - r.width) : c.sourceX + dx
        let sy = c.sourceY + dy
        let yp = f.planes[0]
        var jobs = [CopyJob(dst: y, dstStride: yStride, src: yp.baseAddress + sy * yp.stride + sx, srcStride: yp.stride,
                            rowBytes: r.width, rows: r.height, mirror: c.mirrored ? 1 : 0)]
        if f.format == .nv12 {
            let p = f.planes[1]
            jobs.append(CopyJob(dst: uv, dstStride: uvStride, src: p.baseAddress + (sy / 2) * p.stride + sx, srcStride: p.stride,
                                rowBytes: r.width, rows: r.height / 2, mirror: c.mirrored ? 2 : 0))
        } else {
            let u = f.planes[1], v = f.planes[2]
            for row in 0..<(r.height / 2) {
                jobs.append(CopyJob(dst: uv + row * uvStride, dstStride: uvStride,
                                    src: u.baseAddress + (sy / 2 + row) * u.stride + sx / 2, srcStride: 0,
                                    rowBytes: r.width, rows: 1,
                                    interleaving: v.baseAddress + (sy / 2 + row) * v.stride + sx / 2, mirror: c.mirrored ? 2 : 0))
            }
        }
        return jobs
    }

    static func frame(_ r: PendingReadback, _ storage: FrameStorage) -> VideoFrame {
        VideoFrame(width: r.width, height: r.height, format: .nv12,
                   planes: [FramePlane(storage: storage, offset: 0, stride: r.stride),
                            FramePlane(storage: storage, offset: r.stride * r.height, stride: r.stride)],
                   pts: r.pts, matrix: r.matrix, range: r.range)
    }

    /// The copies that fill a delivered frame at `dst`: the pack buffer as is,
    /// or, for a direct-copy frame, each copy's planes and then the region.
    static func deliveryJobs(_ r: PendingReadback, packed src: UnsafeRawPointer?, into dst: UnsafeMutableRawPointer) -> [CopyJob] {
        guard let direct = r.direct else {
            return [CopyJob(dst: dst, dstStride: r.bytes, src: src!, srcStride: r.bytes, rowBytes: r.bytes, rows: 1)]
        }
        // The copies' frames and the region caches must outlive `r`: the jobs may run later, on another thread.
        let keep = KeepAlive(direct)
        let S = r.stride, uvBase = dst + S * r.height
        var jobs: [CopyJob] = []
        for c in direct.copies {
            let d = c.destination
            jobs += copyJobs(c, part: d, y: dst + d.y * S + d.x, yStride: S, uv: uvBase + (d.y / 2) * S + d.x, uvStride: S)
        }
        // The region, tightly packed (Y rows, then UV rows): from the pack buffer, or from the last rendered one.
        let packed: UnsafeRawPointer? = direct.reuse.map { UnsafeRawPointer($0.base) } ?? src
        if let R = direct.region ?? direct.reuse?.region, let packed {
            if let fill = direct.fill {
                jobs.append(CopyJob(dst: fill.base, dstStride: fill.bytes, src: packed, srcStride: fill.bytes, rowBytes: fill.bytes, rows: 1))
            }
            jobs.append(CopyJob(dst: dst + R.y * S + R.x, dstStride: S, src: packed, srcStride: R.width, rowBytes: R.width, rows: R.height))
            jobs.append(CopyJob(dst: uvBase + (R.y / 2) * S + R.x, dstStride: S, src: packed + R.width * R.height,
                                srcStride: R.width, rowBytes: R.width, rows: R.height / 2))
        }
        for i in jobs.indices { jobs[i].owner = keep }
        return jobs
    }

    // MARK: One composite, copies on the caller's thread

    /// First half of `GPUCompositor.composite`: validates and stages the
    /// uploads and the render; the caller runs `jobs` on its own thread.
    func prepareComposite(uploads: [(VideoFrame, StreamRole)], output: OutputID, plan: CompositionPlan,
                          jobs: inout [CopyJob]) throws(GPUError) -> (uploads: [StagedUpload], render: PreparedRender) {
        try checkUsable()
        for (frame, _) in uploads { try validateUpload(frame, maxTextureSize: maxTextureSize) }
        var staged: [StagedUpload] = []
        var roles = Set<StreamRole>()
        for (frame, role) in uploads {
            let slot = streams[role]!
            if directCopy && frame.format.isYUV {
                slot.cpuFrame = frame
                slot.textureFresh = false
            } else {
                slot.cpuFrame = nil
                staged.append(try stageUpload(frame, role: role, jobs: &jobs))
                roles.insert(role)
            }
        }
        let render = try prepareRender(output: output, plan: plan, readback: true, staged: roles, jobs: &jobs)
        return (staged, render)
    }

    /// Second half: GL work for the uploads and the render, then the
    /// readbacks already complete, whose bytes `jobs` copy out of their
    /// mapped pack buffers (unmapped at this renderer's next call).
    func commitComposite(_ p: (uploads: [StagedUpload], render: PreparedRender), pts: MediaTime,
                         jobs: inout [CopyJob]) throws(GPUError) -> [VideoFrame] {
        for u in p.uploads { try commitUpload(u) }
        try commitRender(p.render, pts: pts)
        var done = ready.map(\.frame)
        ready.removeAll()
        while let first = pending.first, timeline.isComplete(first.serial) {
            let r = pending.removeFirst()
            var src: UnsafeRawPointer?
            if r.slot >= 0 {
                glBindBuffer(GL.pixelPackBuffer, pack[r.slot].buffer)
                guard let p = glMapBufferRange(GL.pixelPackBuffer, 0, GLsizeiptr(r.bytes), GL.mapReadBit) else {
                    glBindBuffer(GL.pixelPackBuffer, 0)
                    pack[r.slot].busy = false
                    try checkGL("readback: map pack buffer")
                    throw .gl(label: "readback: map pack buffer", code: 0)
                }
                glBindBuffer(GL.pixelPackBuffer, 0)
                mappedPack.append(r.slot)
                src = UnsafeRawPointer(p)
            }
            let storage = framePool.storage(count: r.frameBytes) { _ in }
            jobs += GPURenderer.deliveryJobs(r, packed: src, into: storage.mutableBase)
            timer.stats.framesDelivered += 1
            let f = GPURenderer.frame(r, storage)
            if r.direct != nil { outputs[r.output]?.lastDirectFrame = f }
            done.append(f)
        }
        try checkGL("readback")
        try checkReset()
        return done
    }

    /// Counts uploads and imports (`TextureSet.uploadSerial`).
    private var uploadCounter: UInt64 = 0

    /// Pack buffers mapped for a caller's copy, unmapped at the next call.
    private var mappedPack: [Int] = []

    private func unmapDelivered() {
        guard !mappedPack.isEmpty else { return }
        for slot in mappedPack {
            glBindBuffer(GL.pixelPackBuffer, pack[slot].buffer)
            glUnmapBuffer(GL.pixelPackBuffer)
            pack[slot].busy = false
        }
        glBindBuffer(GL.pixelPackBuffer, 0)
        mappedPack.removeAll()
    }

    func nextReadback(wait: Bool) throws(GPUError) -> NV12Readback? {
        try checkUsable()
        timer.poll()
        if !ready.isEmpty { return ready.removeFirst() }
        guard let first = pending.first else { return nil }
        guard wait || timeline.isComplete(first.serial) else { return nil }
        let f = try completeOldest()
        try checkReset()
        return f
    }

    func flush() throws(GPUError) -> [NV12Readback] {
        try checkUsable()
        var out = ready
        ready.removeAll()
        while !pending.isEmpty { out.append(try completeOldest()) }
        timer.poll()
        try checkReset()
        return out
    }

    var readbacksOutstanding: Int { ready.count + pending.count }

    func previewRGBA(output id: OutputID) throws(GPUError) -> VideoFrame {
        try checkUsable()
        guard let out = outputs[id] else { preconditionFailure("\(id) does not exist") }
        try refreshTarget(out)
        let frame = VideoFrame.allocate(width: out.canvas.width, height: out.canvas.height, format: .rgba, pts: out.lastPTS)
        glBindFramebuffer(GL.readFramebuffer, out.target.fbo)
        glBindBuffer(GL.pixelPackBuffer, 0)
        glPixelStorei(GL.packAlignment, 4)
        glReadPixels(0, 0, GLsizei(out.canvas.width), GLsizei(out.canvas.height), GL.rgba, GL.unsignedByte,
                     frame.planes[0].storage.mutableBase)
        glBindFramebuffer(GL.readFramebuffer, 0)
        try checkGL("preview \(id)")
        try checkReset()
        return frame
    }

    /// Exports the output's render target as dma-buf (EGL_MESA_image_dma_buf_export).
    func exportDmaBuf(output id: OutputID) throws(GPUError) -> ExportedDmaBuf {
        try checkUsable()
        guard let out = outputs[id] else { preconditionFailure("\(id) does not exist") }
        guard caps.dmaBufExport, let query = context.procs.exportDmaBufQuery, let export = context.procs.exportDmaBuf else {
            throw .unsupported("EGL_MESA_image_dma_buf_export")
        }
        guard caps.glTextureImage, let create = context.procs.createImage, let destroy = context.procs.destroyImage else {
            throw .unsupported("EGL_KHR_gl_texture_2D_image")
        }
        try refreshTarget(out)
        glFinish()
        let attrs: [EGLint] = [EGLint(EGL_GL_TEXTURE_LEVEL_KHR), 0, EGLc.none]
        guard let image = create(context.display, context.context, EGLenum(EGL_GL_TEXTURE_2D_KHR),
                                 UnsafeMutableRawPointer(bitPattern: UInt(out.target.texture)), attrs),
              image != diptych_egl_no_image() else {
            throw .dmaBuf("eglCreateImageKHR(EGL_GL_TEXTURE_2D_KHR) failed: EGL error 0x\(String(eglGetError(), radix: 16))")
        }
        defer { _ = destroy(context.display, image) }
        var fourcc: Int32 = 0, planes: Int32 = 0
        var modifiers = [EGLuint64KHR](repeating: 0, count: 4)
        guard query(context.display, image, &fourcc, &planes, &modifiers) == EGLBoolean(EGL_TRUE), (1...4).contains(planes) else {
            throw .dmaBuf("eglExportDMABUFImageQueryMESA failed: EGL error 0x\(String(eglGetError(), radix: 16))")
        }
        var fds = [Int32](repeating: -1, count: 4)
        var strides = [EGLint](repeating: 0, count: 4), offsets = [EGLint](repeating: 0, count: 4)
        guard export(context.display, image, &fds, &strides, &offsets) == EGLBoolean(EGL_TRUE) else {
            let code = String(eglGetError(), radix: 16)
            // Drivers allocate exportable memory through their DRM device; without one
            // (a VM with no /dev/dri) the extension is advertised but export fails.
            let hint = FileManager.default.fileExists(atPath: "/dev/dri") ? "" : " (this machine has no /dev/dri, so the driver has no DRM device to share buffers through)"
            throw .dmaBuf("eglExportDMABUFImageMESA failed: EGL error 0x\(code)\(hint)")
        }
        let n = Int(planes)
        let invalid: UInt64 = 0x00ff_ffff_ffff_ffff
        return ExportedDmaBuf(width: out.canvas.width, height: out.canvas.height, fourcc: UInt32(bitPattern: fourcc),
                              modifier: modifiers[0] == invalid ? nil : modifiers[0],
                              planes: (0..<n).map { DmaBufFrame.Plane(fd: fds[$0], offset: Int(offsets[$0]), stride: Int(strides[$0])) })
    }

    var stats: GPUStats {
        timer.poll()
        var s = timer.stats
        s.inFlight = timeline.inFlight
        return s
    }

    func resetStats() { timer.poll(); timer.reset() }

    /// Teardown, in this order:
    /// 1. drop readbacks nobody collected;
    /// 2. retire every stream texture set and output target, wait for every
    ///    fence (not when the context is lost) and run the queued releases, so
    ///    nothing is deleted while the GPU may still use it;
    /// 3. delete the ring buffers, timer queries, programs and the VAO;
    /// 4. the context itself goes when this object is released (GLContext:
    ///    context → display → gbm_device → fd).
    func shutdown() {
        guard !isShutDown else { return }
        unmapDelivered()
        isShutDown = true
        pending.removeAll(); ready.removeAll()
        for r in StreamRole.allCases { clearStream(r) }
        for id in Array(outputs.keys) { removeOutput(id) }
        timeline.drain()
        delete(.buffer, unpack.map(\.buffer) + pack.map(\.buffer))
        unpack.removeAll(); pack.removeAll()
        timer.deleteAll()
        shaders.deleteAll()
        glDeleteVertexArrays(1, &vao)
        glFinish()
    }
}
