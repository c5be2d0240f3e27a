import CGLES
import DiptychCore

/// The direct-copy path (a software renderer's shortcut, `DirectCopyMode`).
/// The copy draws' bytes never go through the GPU except where the region `R`
/// (the draws above them) needs them beneath: (1) the copies' parts inside `R`
/// go through the staging ring into the output's packed NV12 texture; (2) in
/// `R` only, the fragment pass draws that NV12 picture (nv12unpack.frag) and
/// the draws above it, and the NV12 pass converts `R` back; (3) only `R` is
/// read back. On delivery the frame is assembled on the CPU: each copy's
/// planes into place, then `R` from the GPU (`DirectCopyPlanner.deliveryJobs`).
/// The preview is made from that frame (`refresh`), so it shows
/// exactly the pixels the encoder gets. Two hops: `prepare` lists the
/// CPU copies (run by the caller), `commit` issues the GL work.
///
/// The renderer has one where its plan takes the shortcut (`GPUPlan.softwareShortcut`),
/// and none elsewhere: the frames, kept pictures and caches of the shortcut
/// live here, not in the renderer's shared parts. Render thread, but for
/// `delivered` (under the renderer's lock, on the thread that delivers).
final class DirectCopyFrames {
    /// A role's latest YUV frame, kept by reference until the next upload.
    struct Kept {
        var frame: VideoFrame?
        /// Whether the role's current textures already hold `frame`'s picture.
        var textureFresh = false
        /// Counts the frames kept: the same serial is the same picture.
        var serial: UInt64 = 0
    }
    /// What the shortcut keeps of one output.
    final class OutputState {
        /// The last frame took the direct-copy path: the RGBA target holds only its rendered region.
        var directLast = false
        /// The last direct-copy frame delivered (its bytes are filled once the
        /// caller has run the delivery copies, before the next call).
        var lastDirectFrame: VideoFrame?
        /// The last direct-copy region rendered with nothing beneath showing, and
        /// where its bytes land once that frame is delivered (see `RegionKey`).
        var regionKey: RegionKey?
        var regionCache: RegionCache?
        /// Per CPU draw index, the bytes of the last scaled picture drawn there (`ScaledCache`).
        var scaledCaches: [Int: ScaledCache] = [:]
    }
    private var kept: [StreamRole: Kept] = [:]
    private var outputs: [OutputID: OutputState] = [:]
    /// A frame between its two hops (`prepare`, `commit`).
    var prepared: PreparedRender?

    private func state(_ id: OutputID) -> OutputState {
        if let s = outputs[id] { return s }
        let s = OutputState()
        outputs[id] = s
        return s
    }

    /// A YUV frame becomes the role's picture, kept by reference.
    func keep(_ frame: VideoFrame, role: StreamRole) {
        var k = kept[role] ?? Kept()
        k.frame = frame
        k.textureFresh = false
        k.serial &+= 1
        kept[role] = k
    }

    /// The role's picture now comes from elsewhere (an upload, a CUDA frame, a dma-buf) or is gone.
    func forget(_ role: StreamRole) { kept[role]?.frame = nil }

    /// The output's last frame went through the GPU path.
    func renderedOnGPU(_ id: OutputID) { outputs[id]?.directLast = false }

    /// Whether the output's RGBA target holds only the last frame's rendered region.
    func lastWasDirect(_ id: OutputID) -> Bool { outputs[id]?.directLast ?? false }

    /// A direct-copy frame of `id` was delivered.
    func delivered(_ frame: VideoFrame, output id: OutputID) { state(id).lastDirectFrame = frame }

    func remove(_ id: OutputID) { outputs.removeValue(forKey: id) }

    struct StagedDirect {
        var slot: Int
        /// Per copy, the part inside the region and where its Y and UV bytes are staged.
        var parts: [(copy: Int, rect: PixelRect, y: Int, uv: Int)]
    }

    struct PreparedRender {
        var id: OutputID
        var plan: CompositionPlan
        var readback: Bool
        var uploads: [StagedUpload]
        var direct: (plan: DirectPlan, staged: StagedDirect)?
    }

    /// A staging slot for `bytes`, on the render thread.
    private func stagingSlot(_ r: GPURenderer, bytes: Int) throws(GPUError) -> Int {
        guard let i = try r.staging.acquire(wait: { s in r.timeline.wait(for: s) }) else {
            throw .gl(label: "staging ring exhausted (\(r.staging.slots.count) slots)", code: 0)
        }
        if r.staging.needsGrowth(i, bytes: bytes) { try r.staging.grow(i, bytes: bytes, releaser: r.releaser) }
        return i
    }

    /// First half (render thread): decides the path, stages the kept frames
    /// that must become textures and the copies' parts, listing the copies in
    /// `jobs` (run by the caller, on any thread, before `commitRender`).
    func prepare(_ r: GPURenderer, output id: OutputID, plan: CompositionPlan, readback: Bool,
                 jobs: inout [CopyJob]) throws(GPUError) -> PreparedRender {
        RenderThread.assertCurrent()
        try r.beginHop()
        let out = try r.output(id, canvas: plan.canvas)
        r.timeline.poll(); r.timer.poll()
        var kept: [StreamRole: (frame: VideoFrame, upload: UInt64)] = [:], drawable = Set<StreamRole>()
        for (role, slot) in r.streams {
            let k = self.kept[role]
            if let f = k?.frame { kept[role] = (f, k!.serial) }
            if slot.current != nil || k?.frame != nil { drawable.insert(role) }
        }
        let direct = readback
            ? DirectCopyPlanner.plan(plan, matrix: out.matrix, range: out.range, kept: kept, drawable: drawable) : nil
        var uploads: [StagedUpload] = []
        var seen = Set<StreamRole>()
        for d in direct?.rendered ?? plan.draws where d.overlay == nil && d.destination.width > 0 && d.destination.height > 0 && !seen.contains(d.role) {
            seen.insert(d.role)
            guard let k = self.kept[d.role], let f = k.frame, !k.textureFresh else { continue }
            let layout = UploadLayout(f)
            let i = try stagingSlot(r, bytes: layout.total)
            jobs += layout.copyJobs(f, to: r.staging.base(i))
            uploads.append(StagedUpload(frame: f, role: d.role, slot: i, layout: layout))
            self.kept[d.role]?.textureFresh = true
        }
        var staged: (plan: DirectPlan, staged: StagedDirect)?
        if let direct { staged = (direct, try stageDirect(r, direct, jobs: &jobs)) }
        return PreparedRender(id: id, plan: plan, readback: readback, uploads: uploads, direct: staged)
    }

    /// Second half (render thread): uploads, then the direct frame or the GPU path.
    func commit(_ r: GPURenderer, _ p: PreparedRender, pts: MediaTime) throws(GPUError) {
        RenderThread.assertCurrent()
        for u in p.uploads { r.textures.commit(u, from: r.staging, timer: r.timer) }
        let out = try r.output(p.id)
        if let direct = p.direct {
            try commitDirect(r, out, direct.plan, direct.staged, background: p.plan.background, pts: pts)
        } else {
            if try r.beginGPU(out, draws: r.drawable(p.plan.draws), background: p.plan.background, pts: pts, readback: p.readback) {
                try r.dispatchFrame(barrier: true)
                try r.finishFrame()
            }
        }
    }

    /// Stages the copies' parts inside the region and lists their copies.
    private func stageDirect(_ r: GPURenderer, _ direct: DirectPlan, jobs: inout [CopyJob]) throws(GPUError) -> StagedDirect {
        guard let R = direct.region else { return StagedDirect(slot: -1, parts: []) }
        var parts: [(copy: Int, rect: PixelRect, y: Int, uv: Int)] = []
        var total = 0
        for (k, c) in direct.copies.enumerated() {
            guard let i = DirectCopyPlanner.intersection(R, c.destination) else { continue }
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
        let slot = try stagingSlot(r, bytes: total)
        let dst = r.staging.base(slot)
        let keep = KeepAlive(direct.copies)
        for part in parts {
            for var j in DirectCopyPlanner.copyJobs(direct.copies[part.copy], part: part.rect, y: dst + part.y, yStride: part.rect.width,
                                                    uv: dst + part.uv, uvStride: part.rect.width) {
                j.owner = keep
                jobs.append(j)
            }
        }
        return StagedDirect(slot: slot, parts: parts)
    }

    private func commitDirect(_ r: GPURenderer, _ out: Output, _ direct: DirectPlan, _ staged: StagedDirect, background: RGBAColor,
                              pts: MediaTime) throws(GPUError) {
        let W = out.canvas.width, H = out.canvas.height
        let work = try FragmentPass.work(r.drawable(direct.rendered), shaders: r.shaders)
        let nv12Program = try r.shaders.program(.nv12Pack)
        let unpackProgram = try r.shaders.program(.nv12Unpack)
        let nv12 = try out.nv12Texture()
        var packSlot = -1, packBytes = 0
        var frame = DirectFrame(copies: direct.copies, region: direct.region)
        for (k, c) in direct.copies.enumerated() {
            guard let map = c.scale else { continue }
            let key = ScaleKey(c, map: map)
            if let cache = state(out.id).scaledCaches[k], cache.key == key {
                frame.scaled[k] = (cache, false)
                r.timer.stats.scaledReused += 1
            } else if let cache = state(out.id).scaledCaches[k], cache.key.destination.size == key.destination.size {
                cache.key = key
                frame.scaled[k] = (cache, true)
            } else {
                let cache = ScaledCache(key: key)
                state(out.id).scaledCaches[k] = cache
                frame.scaled[k] = (cache, true)
            }
        }

        // A region that nothing beneath shows through, drawn from the same uploads as last time: reuse its bytes.
        var key: RegionKey?
        if let R = direct.region, staged.parts.isEmpty, direct.uncovered(R).isEmpty, work.count == direct.rendered.count {
            key = RegionKey(region: R, draws: direct.rendered, uploads: work.map { $0.1.uploadSerial })
        }
        if let key, key == state(out.id).regionKey, let cache = state(out.id).regionCache {
            frame.reuse = cache
            r.timer.stats.regionsReused += 1
        } else if let R = direct.region {
            if let key {
                let cache = RegionCache(region: R)
                state(out.id).regionCache = cache
                state(out.id).regionKey = key
                frame.fill = cache
            } else {
                state(out.id).regionKey = nil
                state(out.id).regionCache = nil
            }
            // (1) The copies' parts inside the region, into the NV12 planes.
            if staged.slot >= 0 {
                r.timer.begin(.upload)
                glPixelStorei(GL.unpackAlignment, 4)
                glPixelStorei(GL.unpackRowLength, 0)
                glActiveTexture(GL.texture0)
                glBindTexture(GL.texture2D, nv12.texture)
                for part in staged.parts {
                    let p = part.rect
                    glTexSubImage2D(GL.texture2D, 0, GLint(p.x / 4), GLint(p.y), GLsizei(p.width / 4), GLsizei(p.height),
                                    GL.rgba, GL.unsignedByte, r.staging.bind(staged.slot, offset: part.y))
                    glTexSubImage2D(GL.texture2D, 0, GLint(p.x / 4), GLint(H + p.y / 2), GLsizei(p.width / 4), GLsizei(p.height / 2),
                                    GL.rgba, GL.unsignedByte, r.staging.bind(staged.slot, offset: part.uv))
                }
                glBindTexture(GL.texture2D, 0)
                glBindBuffer(GL.pixelUnpackBuffer, 0)
                r.timer.end(.upload)
                r.staging.committed(staged.slot, serial: r.timeline.pendingSerial)
            }
            // (2) The region: background, the copies beneath, the draws above.
            glDisable(GL.depthTest); glDisable(GL.cullFace); glDisable(GL.dither)
            glBindFramebuffer(GL.framebuffer, out.target.fbo)
            glViewport(0, 0, GLsizei(W), GLsizei(H))
            glEnable(GL.scissorTest)
            let bg = background
            glClearColor(GLfloat(bg.r * bg.a), GLfloat(bg.g * bg.a), GLfloat(bg.b * bg.a), GLfloat(bg.a))
            r.timer.begin(.composite)
            // What an opaque, unmasked draw covers needs neither background nor
            // the picture beneath (a software rasterizer pays for every pass).
            for i in direct.uncovered(R) {
                glScissor(GLint(i.x), GLint(i.y), GLsizei(i.width), GLsizei(i.height))
                glClear(GL.colorBufferBit)
            }
            for part in staged.parts {
                let i = part.rect
                glScissor(GLint(i.x), GLint(i.y), GLsizei(i.width), GLsizei(i.height))
                r.fragment.drawNV12Picture(unpackProgram, out, nv12: nv12)
            }
            glScissor(GLint(R.x), GLint(R.y), GLsizei(R.width), GLsizei(R.height))
            glEnable(GL.blend)
            glBlendFunc(GL.one, GL.oneMinusSrcAlpha)
            r.fragment.drawAll(work, canvas: out.canvas, serial: r.timeline.pendingSerial)
            glDisable(GL.blend)
            r.timer.end(.composite)
            packSlot = try r.readbacks.bindNext(bytes: out.nv12Bytes, target: GL.pixelPackBuffer, releaser: r.releaser)
            glBindBuffer(GL.pixelPackBuffer, 0)
            glBindFramebuffer(GL.framebuffer, nv12.fbo)
            glViewport(0, 0, GLsizei(nv12.width), GLsizei(nv12.height))
            r.timer.begin(.nv12)
            r.fragment.useNV12Pack(nv12Program, out)
            glScissor(GLint(R.x / 4), GLint(R.y), GLsizei(R.width / 4), GLsizei(R.height))
            glDrawArrays(GL.triangles, 0, 3)
            glScissor(GLint(R.x / 4), GLint(H + R.y / 2), GLsizei(R.width / 4), GLsizei(R.height / 2))
            glDrawArrays(GL.triangles, 0, 3)
            glDisable(GL.scissorTest)
            // (3) Read back the region only: its Y rows, then its UV rows.
            packBytes = R.width * R.height * 3 / 2
            glBindBuffer(GL.pixelPackBuffer, r.readbacks.buffer(packSlot))
            glPixelStorei(GL.packAlignment, 4)
            glReadPixels(GLint(R.x / 4), GLint(R.y), GLsizei(R.width / 4), GLsizei(R.height), GL.rgba, GL.unsignedByte, nil)
            glReadPixels(GLint(R.x / 4), GLint(H + R.y / 2), GLsizei(R.width / 4), GLsizei(R.height / 2), GL.rgba, GL.unsignedByte,
                         UnsafeMutableRawPointer(mutating: diptych_gl_offset(R.width * R.height)))
            glBindBuffer(GL.pixelPackBuffer, 0)
            r.timer.end(.nv12)
        }
        if frame.reuse != nil { frame.region = nil }
        glBindFramebuffer(GL.framebuffer, 0)
        let serial = r.timeline.pendingSerial
        out.used(serial)
        r.timeline.submit()
        r.readbacks.submitted(PendingReadback(serial: serial, slot: packSlot, output: out.id, pts: pts, width: W, height: H,
                                            stride: out.nv12Stride, bytes: packBytes, matrix: out.matrix, range: out.range,
                                            direct: frame))
        state(out.id).directLast = true
        out.lastCompute = nil
        out.lastPTS = pts
        r.timer.stats.framesDirect += 1
        r.timer.stats.framesRendered += 1
        try r.checkGL("render \(out.id) (direct copy)")
        try r.checkReset()
    }

    /// After a direct-copy frame the GPU holds only the rendered region: the
    /// frame is complete only once delivered (assembled on the CPU). Waits for
    /// it, uploads it whole into the NV12 texture and converts that into the
    /// RGBA target, so preview and export show exactly the encoder's pixels.
    func refresh(_ r: GPURenderer, _ out: Output) throws(GPUError) {
        while r.readbacks.pending.contains(where: { $0.output == out.id }), let d = try r.deliverOldestHere() { r.readbacks.ready.append(d) }
        guard let last = state(out.id).lastDirectFrame else { return }
        let program = try r.shaders.program(.nv12Unpack)
        let nv12 = try out.nv12Texture()
        let bytes = last.planes[0].stride * last.height * 3 / 2
        let slot = try stagingSlot(r, bytes: bytes)
        BulkCopy.copy(r.staging.base(slot), last.planes[0].baseAddress, bytes)   // one block: Y rows then UV rows, stride = nv12Stride
        glPixelStorei(GL.unpackAlignment, 4)
        glPixelStorei(GL.unpackRowLength, 0)
        glActiveTexture(GL.texture0)
        glBindTexture(GL.texture2D, nv12.texture)
        glTexSubImage2D(GL.texture2D, 0, 0, 0, GLsizei(nv12.width), GLsizei(nv12.height), GL.rgba, GL.unsignedByte,
                        r.staging.bind(slot, offset: 0))
        glBindTexture(GL.texture2D, 0)
        glBindBuffer(GL.pixelUnpackBuffer, 0)
        glBindFramebuffer(GL.framebuffer, out.target.fbo)
        glViewport(0, 0, GLsizei(out.canvas.width), GLsizei(out.canvas.height))
        glDisable(GL.scissorTest); glDisable(GL.blend)
        r.fragment.drawNV12Picture(program, out, nv12: nv12)
        glBindFramebuffer(GL.framebuffer, 0)
        r.staging.committed(slot, serial: r.timeline.pendingSerial)
        out.used(r.timeline.pendingSerial)
        r.timeline.submit()
        state(out.id).directLast = false
        try r.checkGL("refresh \(out.id) from NV12")
    }
}
