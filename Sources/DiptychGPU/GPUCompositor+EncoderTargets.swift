import DiptychCore

/// Encoder targets: NV12 dma-bufs an output's frames are converted into on
/// the GPU, for an encoder that reads them in place (VA-API; docs/ARCHITECTURE.md,
/// "Encoder paths"). The output renders as usual into its RGBA target
/// (`render(output:plan:pts:readback: false)`); `renderEncoderTarget`
/// converts that target into one buffer's Y and UV planes and fences the
/// work. Preview and RGBA readers read the same RGBA target. The caller owns
/// the buffers and decides their reuse (after the fence and the encoder).
extension GPUCompositor {
    /// What encoder targets need from this GPU, and what it lacks.
    public func encoderTargetSupport() -> EncoderTargetSupport {
        let fallback = EncoderTargetSupport(platform: info.platform, renderNode: nil, missing: ["a usable context"], renderableModifiers: [])
        return (try? withRenderer { r in
            let c = r.caps
            var missing: [String] = []
            if !c.dmaBufImport { missing.append("EGL_EXT_image_dma_buf_import") }
            if !c.dmaBufImportModifiers { missing.append("EGL_EXT_image_dma_buf_import_modifiers") }
            if !c.eglImageBase { missing.append("EGL_KHR_image_base") }
            if !c.eglImageTexture { missing.append("GL_OES_EGL_image") }
            return EncoderTargetSupport(platform: r.info.platform, renderNode: r.info.platform == .gbm ? r.info.device : nil,
                                        missing: missing, renderableModifiers: missing.isEmpty ? r.context.renderableModifiers() : [])
        }) ?? fallback
    }

    /// Imports an NV12 dma-buf of the output's canvas size as an encoder
    /// target of `output`: its Y plane as an R8 and its UV plane as a GR88
    /// EGLImage, each a render target. The fds stay the caller's.
    public func addEncoderTarget(_ frame: DmaBufFrame, output: OutputID) throws(GPUError) -> EncoderTargetID {
        try withRenderer { r throws(GPUError) in
            try r.addEncoderTarget(output) { () throws(GPUError) in try EncoderTarget(importing: frame, context: r.context) }
        }
    }

    /// An encoder target in GL's own memory (renderers without dma-buf; `readEncoderTarget` reads it).
    func addHostEncoderTarget(output: OutputID) throws(GPUError) -> EncoderTargetID {
        try withRenderer { r throws(GPUError) in
            try r.addEncoderTarget(output) { () throws(GPUError) in try EncoderTarget(hostMemory: try r.output(output).canvas, context: r.context) }
        }
    }

    /// Converts the output's RGBA target (its last frame) into the target's
    /// planes and fences it; returns the fence's serial (`encoderTargetDone`).
    public func renderEncoderTarget(_ id: EncoderTargetID) throws(GPUError) -> UInt64 {
        try withRenderer { r throws(GPUError) in try r.renderEncoderTarget(id) }
    }

    /// Whether the work up to `serial` has completed; `wait` blocks until it
    /// has: on this thread where the fences allow it (the serial fenced, as
    /// `renderEncoderTarget` returns it), else on the render thread.
    public func encoderTargetDone(_ serial: UInt64, wait: Bool) throws(GPUError) -> Bool {
        calls.lock(); defer { calls.unlock() }
        if wait { _ = try callerSide { r in r.timeline.canWaitOffThread && r.timeline.waitOffThread(for: serial) } }
        return try withRenderer { r throws(GPUError) in
            try r.checkUsable()
            if wait { r.timeline.wait(for: serial) }
            let done = r.timeline.isComplete(serial)
            try r.checkReset()
            return done
        }
    }

    /// The target's planes as an NV12 frame in host memory (a reader that
    /// asks for NV12 frames; tests). Blocks until the GPU has written them.
    public func readEncoderTarget(_ id: EncoderTargetID) throws(GPUError) -> VideoFrame {
        try withRenderer { r throws(GPUError) in
            try r.beginHop()
            let out = try r.output(id.output)
            guard let t = out.encoderTargets[id.index] else { preconditionFailure("\(id) does not exist") }
            let f = t.read(pts: out.lastPTS, matrix: out.matrix, range: out.range)
            try r.checkGL("read \(id)")
            return f
        }
    }

    /// Forgets the target; its GL objects and images go once the GPU is done with them.
    public func removeEncoderTarget(_ id: EncoderTargetID) {
        _ = try? withRenderer { r in
            guard let out = r.outputs[id.output], let t = out.encoderTargets.removeValue(forKey: id.index) else { return }
            t.release(r.releaser)
        }
    }
}

extension GPURenderer {
    func addEncoderTarget(_ id: OutputID, make: () throws(GPUError) -> EncoderTarget) throws(GPUError) -> EncoderTargetID {
        RenderThread.assertCurrent()
        try beginHop()
        let out = try output(id)
        let t = try make()
        guard t.width == out.canvas.width, t.height == out.canvas.height else {
            t.release(releaser)
            throw .badFrame("encoder target \(t.width)x\(t.height) for \(id) of canvas \(out.canvas)")
        }
        do throws(GPUError) { try checkGL("encoder target for \(id)") } catch { t.release(releaser); throw error }
        let index = out.nextEncoderTarget
        out.nextEncoderTarget += 1
        out.encoderTargets[index] = t
        return EncoderTargetID(output: id, index: index)
    }

    func renderEncoderTarget(_ id: EncoderTargetID) throws(GPUError) -> UInt64 {
        RenderThread.assertCurrent()
        try beginHop()
        let out = try output(id.output)
        guard let t = out.encoderTargets[id.index] else { preconditionFailure("\(id) does not exist") }
        try refreshRGBA(out)
        let luma = try shaders.program(.nv12Luma), chroma = try shaders.program(.nv12Chroma)
        t.convert(from: out, luma: luma, chroma: chroma, fragment: fragment, timer: timer)
        let serial = timeline.pendingSerial
        t.lastUse = serial
        out.used(serial)
        timeline.submit()
        try checkGL("render \(id)")
        try checkReset()
        return serial
    }
}
