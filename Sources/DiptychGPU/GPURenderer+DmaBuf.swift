import CEGL
import CGLES
import DiptychCore
import Foundation

/// dma-buf in (EGL_EXT_image_dma_buf_import: a stream picture without a copy)
/// and out (EGL_MESA_image_dma_buf_export: the output's RGBA render target,
/// written by the compute pass as an `rgba8` image once export is asked for).
extension GPURenderer {
    /// Imports a dma-buf as the role's current texture (EGL_EXT_image_dma_buf_import).
    func upload(_ frame: DmaBufFrame, role: StreamRole) throws(GPUError) {
        RenderThread.assertCurrent()
        try frame.validate()
        try beginHop()
        guard caps.dmaBufImport else { throw .unsupported("EGL_EXT_image_dma_buf_import") }
        if frame.modifier != nil && !caps.dmaBufImportModifiers { throw .unsupported("EGL_EXT_image_dma_buf_import_modifiers") }
        guard caps.eglImageExternal, let bind = context.procs.imageTargetTexture2D else { throw .unsupported("GL_OES_EGL_image_external_essl3") }
        guard let create = context.procs.createImage else { throw .unsupported("EGL_KHR_image_base") }
        directFrames?.forget(role)
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
        let set = StreamPicture(format: nil, input: .external, width: frame.width, height: frame.height, source: .external(texture: tex, image: image))
        set.matrix = frame.matrix; set.range = frame.range
        set.lastUse = timeline.pendingSerial
        do throws(GPUError) { try checkGL("import dma-buf \(DmaBufFrame.fourccName(frame.fourcc))") } catch {
            set.release(releaser); throw error
        }
        textures.makeCurrent(set, role: role)
        try checkReset()
    }

    /// Exports the output's render target as dma-buf (EGL_MESA_image_dma_buf_export).
    func exportDmaBuf(output id: OutputID) throws(GPUError) -> ExportedDmaBuf {
        RenderThread.assertCurrent()
        try beginHop()
        let out = try output(id)
        guard caps.dmaBufExport, let query = context.procs.exportDmaBufQuery, let export = context.procs.exportDmaBuf else {
            throw .unsupported("EGL_MESA_image_dma_buf_export")
        }
        guard caps.glTextureImage, let create = context.procs.createImage, let destroy = context.procs.destroyImage else {
            throw .unsupported("EGL_KHR_gl_texture_2D_image")
        }
        try refreshRGBA(out)
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
}
