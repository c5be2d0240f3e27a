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
/// The preview is made from that frame (`refreshFromDirectFrame`), so it shows
/// exactly the pixels the encoder gets. Two hops: `prepareRender` lists the
/// CPU copies (run by the caller), `commitRender` issues the GL work.
extension GPURenderer {
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
    private func stagingSlot(bytes: Int) throws(GPUError) -> Int {
        guard let i = try staging.acquire(wait: { s in timeline.wait(for: s) }) else {
            throw .gl(label: "staging ring exhausted (\(staging.slots.count) slots)", code: 0)
        }
        if staging.needsGrowth(i, bytes: bytes) { try staging.grow(i, bytes: bytes, releaser: releaser) }
        return i
    }

    /// First half (render thread): decides the path, stages the kept frames
    /// that must become textures and the copies' parts, listing the copies in
    /// `jobs` (run by the caller, on any thread, before `commitRender`).
    func prepareRender(output id: OutputID, plan: CompositionPlan, readback: Bool,
                       jobs: inout [CopyJob]) throws(GPUError) -> PreparedRender {
                           RenderThread.assertCurrent()
        try beginHop()
        let out = try output(id, canvas: plan.canvas)
        timeline.poll(); timer.poll()
        var kept: [StreamRole: (frame: VideoFrame, upload: UInt64)] = [:], drawable = Set<StreamRole>()
        for (role, slot) in streams {
            if let f = slot.cpuFrame { kept[role] = (f, slot.keptSerial) }
            if slot.current != nil || slot.cpuFrame != nil { drawable.insert(role) }
        }
        let direct = directCopy && readback
            ? DirectCopyPlanner.plan(plan, matrix: out.matrix, range: out.range, kept: kept, drawable: drawable) : nil
        var uploads: [StagedUpload] = []
        var seen = Set<StreamRole>()
        for d in direct?.rendered ?? plan.draws where d.destination.width > 0 && d.destination.height > 0 && !seen.contains(d.role) {
            seen.insert(d.role)
            guard let slot = streams[d.role], let f = slot.cpuFrame, !slot.textureFresh else { continue }
            let layout = UploadLayout(f)
            let i = try stagingSlot(bytes: layout.total)
            jobs += layout.copyJobs(f, to: staging.base(i))
            uploads.append(StagedUpload(frame: f, role: d.role, slot: i, layout: layout))
            slot.textureFresh = true
        }
        var staged: (plan: DirectPlan, staged: StagedDirect)?
        if let direct { staged = (direct, try stageDirect(direct, jobs: &jobs)) }
        return PreparedRender(id: id, plan: plan, readback: readback, uploads: uploads, direct: staged)
    }

    /// Second half (render thread): uploads, then the direct frame or the GPU path.
    func commitRender(_ p: PreparedRender, pts: MediaTime) throws(GPUError) {
        RenderThread.assertCurrent()
        for u in p.uploads { textures.commit(u, from: staging, timer: timer) }
        let out = try output(p.id)
        if let direct = p.direct {
            try commitDirect(out, direct.plan, direct.staged, background: p.plan.background, pts: pts)
        } else {
            if try beginGPU(out, draws: drawable(p.plan.draws), background: p.plan.background, pts: pts, readback: p.readback) {
                try dispatchFrame(barrier: true)
                try finishFrame()
            }
        }
    }

    /// Stages the copies' parts inside the region and lists their copies.
    private func stageDirect(_ direct: DirectPlan, jobs: inout [CopyJob]) throws(GPUError) -> StagedDirect {
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
        let slot = try stagingSlot(bytes: total)
        let dst = staging.base(slot)
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

    private func commitDirect(_ out: Output, _ direct: DirectPlan, _ staged: StagedDirect, background: RGBAColor,
                              pts: MediaTime) throws(GPUError) {
        let W = out.canvas.width, H = out.canvas.height
        let work = try FragmentPass.work(drawable(direct.rendered), shaders: shaders)
        let nv12Program = try shaders.program(.nv12Pack)
        let unpackProgram = try shaders.program(.nv12Unpack)
        let nv12 = try out.nv12Texture()
        var packSlot = -1, packBytes = 0
        var frame = DirectFrame(copies: direct.copies, region: direct.region)
        for (k, c) in direct.copies.enumerated() {
            guard let map = c.scale else { continue }
            let key = ScaleKey(c, map: map)
            if let cache = out.scaledCaches[k], cache.key == key {
                frame.scaled[k] = (cache, false)
                timer.stats.scaledReused += 1
            } else if let cache = out.scaledCaches[k], cache.key.destination.size == key.destination.size {
                cache.key = key
                frame.scaled[k] = (cache, true)
            } else {
                let cache = ScaledCache(key: key)
                out.scaledCaches[k] = cache
                frame.scaled[k] = (cache, true)
            }
        }

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
                glPixelStorei(GL.unpackAlignment, 4)
                glPixelStorei(GL.unpackRowLength, 0)
                glActiveTexture(GL.texture0)
                glBindTexture(GL.texture2D, nv12.texture)
                for part in staged.parts {
                    let r = part.rect
                    glTexSubImage2D(GL.texture2D, 0, GLint(r.x / 4), GLint(r.y), GLsizei(r.width / 4), GLsizei(r.height),
                                    GL.rgba, GL.unsignedByte, staging.bind(staged.slot, offset: part.y))
                    glTexSubImage2D(GL.texture2D, 0, GLint(r.x / 4), GLint(H + r.y / 2), GLsizei(r.width / 4), GLsizei(r.height / 2),
                                    GL.rgba, GL.unsignedByte, staging.bind(staged.slot, offset: part.uv))
                }
                glBindTexture(GL.texture2D, 0)
                glBindBuffer(GL.pixelUnpackBuffer, 0)
                timer.end(.upload)
                staging.committed(staged.slot, serial: timeline.pendingSerial)
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
                fragment.drawNV12Picture(unpackProgram, out, nv12: nv12)
            }
            glScissor(GLint(R.x), GLint(R.y), GLsizei(R.width), GLsizei(R.height))
            glEnable(GL.blend)
            glBlendFunc(GL.one, GL.oneMinusSrcAlpha)
            fragment.drawAll(work, canvas: out.canvas, serial: timeline.pendingSerial)
            glDisable(GL.blend)
            timer.end(.composite)
            packSlot = try readbacks.bindNext(bytes: out.nv12Bytes, target: GL.pixelPackBuffer, releaser: releaser)
            glBindBuffer(GL.pixelPackBuffer, 0)
            glBindFramebuffer(GL.framebuffer, nv12.fbo)
            glViewport(0, 0, GLsizei(nv12.width), GLsizei(nv12.height))
            timer.begin(.nv12)
            fragment.useNV12Pack(nv12Program, out)
            glScissor(GLint(R.x / 4), GLint(R.y), GLsizei(R.width / 4), GLsizei(R.height))
            glDrawArrays(GL.triangles, 0, 3)
            glScissor(GLint(R.x / 4), GLint(H + R.y / 2), GLsizei(R.width / 4), GLsizei(R.height / 2))
            glDrawArrays(GL.triangles, 0, 3)
            glDisable(GL.scissorTest)
            // (3) Read back the region only: its Y rows, then its UV rows.
            packBytes = R.width * R.height * 3 / 2
            glBindBuffer(GL.pixelPackBuffer, readbacks.buffer(packSlot))
            glPixelStorei(GL.packAlignment, 4)
            glReadPixels(GLint(R.x / 4), GLint(R.y), GLsizei(R.width / 4), GLsizei(R.height), GL.rgba, GL.unsignedByte, nil)
            glReadPixels(GLint(R.x / 4), GLint(H + R.y / 2), GLsizei(R.width / 4), GLsizei(R.height / 2), GL.rgba, GL.unsignedByte,
                         UnsafeMutableRawPointer(mutating: diptych_gl_offset(R.width * R.height)))
            glBindBuffer(GL.pixelPackBuffer, 0)
            timer.end(.nv12)
        }
        if frame.reuse != nil { frame.region = nil }
        glBindFramebuffer(GL.framebuffer, 0)
        let serial = timeline.pendingSerial
        out.used(serial)
        timeline.submit()
        readbacks.submitted(PendingReadback(serial: serial, slot: packSlot, output: out.id, pts: pts, width: W, height: H,
                                            stride: out.nv12Stride, bytes: packBytes, matrix: out.matrix, range: out.range,
                                            direct: frame))
        out.directLast = true
        out.lastCompute = nil
        out.lastPTS = pts
        timer.stats.framesDirect += 1
        timer.stats.framesRendered += 1
        try checkGL("render \(out.id) (direct copy)")
        try checkReset()
    }

    /// After a direct-copy frame the GPU holds only the rendered region: the
    /// frame is complete only once delivered (assembled on the CPU). Waits for
    /// it, uploads it whole into the NV12 texture and converts that into the
    /// RGBA target, so preview and export show exactly the encoder's pixels.
    func refreshFromDirectFrame(_ out: Output) throws(GPUError) {
        while readbacks.pending.contains(where: { $0.output == out.id }), let r = try deliverOldestHere() { readbacks.ready.append(r) }
        guard let last = out.lastDirectFrame else { return }
        let program = try shaders.program(.nv12Unpack)
        let nv12 = try out.nv12Texture()
        let bytes = last.planes[0].stride * last.height * 3 / 2
        let slot = try stagingSlot(bytes: bytes)
        BulkCopy.copy(staging.base(slot), last.planes[0].baseAddress, bytes)   // one block: Y rows then UV rows, stride = nv12Stride
        glPixelStorei(GL.unpackAlignment, 4)
        glPixelStorei(GL.unpackRowLength, 0)
        glActiveTexture(GL.texture0)
        glBindTexture(GL.texture2D, nv12.texture)
        glTexSubImage2D(GL.texture2D, 0, 0, 0, GLsizei(nv12.width), GLsizei(nv12.height), GL.rgba, GL.unsignedByte,
                        staging.bind(slot, offset: 0))
        glBindTexture(GL.texture2D, 0)
        glBindBuffer(GL.pixelUnpackBuffer, 0)
        glBindFramebuffer(GL.framebuffer, out.target.fbo)
        glViewport(0, 0, GLsizei(out.canvas.width), GLsizei(out.canvas.height))
        glDisable(GL.scissorTest); glDisable(GL.blend)
        fragment.drawNV12Picture(program, out, nv12: nv12)
        glBindFramebuffer(GL.framebuffer, 0)
        staging.committed(slot, serial: timeline.pendingSerial)
        out.used(timeline.pendingSerial)
        timeline.submit()
        out.directLast = false
        try checkGL("refresh \(out.id) from NV12")
    }
}
