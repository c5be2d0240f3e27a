import CEGL
import CGLES
import DiptychCore

/// Identifies one encoder target of an output (`GPUCompositor.addEncoderTarget`).
public struct EncoderTargetID: Hashable, Sendable, CustomStringConvertible {
    public let output: OutputID
    public let index: Int
    public var description: String { "\(output) encoder target \(index)" }
}

/// What the zero-copy path needs from a compositor's GPU.
public struct EncoderTargetSupport: Hashable, Sendable {
    public var platform: GPUPlatform
    /// The DRM render node of a GBM display.
    public var renderNode: String?
    /// Extensions the encoder targets need that this context lacks.
    public var missing: [String]
    /// Modifiers with which R8 and GR88 dma-buf planes import as render
    /// targets (not external-only), in the driver's order.
    public var renderableModifiers: [UInt64]
}

/// One NV12 frame's render targets, owned by its output: the Y plane (R8,
/// W × H) and the UV plane (GR88, W/2 × H/2), each an EGLImage of a dma-buf
/// plane (or, for tests, a texture in GL's own memory) bound to a texture
/// and a framebuffer. Render thread only. Teardown: framebuffers and
/// textures once the fence of their last use has signalled, then the images.
final class EncoderTarget {
    let width: Int
    let height: Int
    private(set) var textures: [GLuint] = []
    private(set) var framebuffers: [GLuint] = []
    private var images: [EGLImageKHR] = []
    var lastUse: UInt64 = 0

    static let r8 = DmaBufFrame.fourcc("R8  "), gr88 = DmaBufFrame.fourcc("GR88")

    /// Imports the planes of an NV12 `frame` (EGL_EXT_image_dma_buf_import_modifiers).
    init(importing frame: DmaBufFrame, context: GLContext) throws(GPUError) {
        guard frame.fourcc == DmaBufFrame.nv12, frame.planes.count == 2, frame.width % 2 == 0, frame.height % 2 == 0 else {
            throw .badFrame("encoder target: NV12 of 2 planes and even size expected, got \(DmaBufFrame.fourccName(frame.fourcc)) \(frame.width)x\(frame.height) with \(frame.planes.count) planes")
        }
        guard let create = context.procs.createImage else { throw .unsupported("EGL_KHR_image_base") }
        guard let bind = context.procs.imageTargetTexture2D else { throw .unsupported("GL_OES_EGL_image") }
        width = frame.width; height = frame.height
        let formats = [(EncoderTarget.r8, frame.width, frame.height), (EncoderTarget.gr88, frame.width / 2, frame.height / 2)]
        for (i, (fourcc, w, h)) in formats.enumerated() {
            let p = frame.planes[i]
            var a: [EGLint] = [EGLint(EGL_WIDTH), EGLint(w), EGLint(EGL_HEIGHT), EGLint(h),
                               EGLint(EGL_LINUX_DRM_FOURCC_EXT), EGLint(bitPattern: fourcc),
                               EGLint(EGL_DMA_BUF_PLANE0_FD_EXT), p.fd, EGLint(EGL_DMA_BUF_PLANE0_OFFSET_EXT), EGLint(p.offset),
                               EGLint(EGL_DMA_BUF_PLANE0_PITCH_EXT), EGLint(p.stride)]
            if let m = frame.modifier {
                a += [EGLint(EGL_DMA_BUF_PLANE0_MODIFIER_LO_EXT), EGLint(bitPattern: UInt32(truncatingIfNeeded: m)),
                      EGLint(EGL_DMA_BUF_PLANE0_MODIFIER_HI_EXT), EGLint(bitPattern: UInt32(truncatingIfNeeded: m >> 32))]
            }
            a.append(EGLc.none)
            guard let image = create(context.display, diptych_egl_no_context(), EGLenum(EGL_LINUX_DMA_BUF_EXT), nil, a),
                  image != diptych_egl_no_image() else {
                let code = eglGetError()
                abandon(context)
                throw .dmaBuf("eglCreateImageKHR(\(DmaBufFrame.fourccName(fourcc)) \(w)x\(h) plane, modifier \(frame.modifier.map { "0x" + String($0, radix: 16) } ?? "implicit")) failed: EGL error 0x\(String(code, radix: 16))")
            }
            images.append(image)
            var t: GLuint = 0
            glGenTextures(1, &t)
            glBindTexture(GL.texture2D, t)
            bind(GL.texture2D, image)
            textures.append(t)
        }
        glBindTexture(GL.texture2D, 0)
        try attachFramebuffers(context)
    }

    /// Plane textures in GL's own memory (tests on renderers without dma-buf).
    init(hostMemory size: PixelSize, context: GLContext) throws(GPUError) {
        width = size.width; height = size.height
        for (format, w, h) in [(GL.r8, size.width, size.height), (GL.rg8, size.width / 2, size.height / 2)] {
            var t: GLuint = 0
            glGenTextures(1, &t)
            glBindTexture(GL.texture2D, t)
            glTexStorage2D(GL.texture2D, 1, format, GLsizei(w), GLsizei(h))
            textures.append(t)
        }
        glBindTexture(GL.texture2D, 0)
        try attachFramebuffers(context)
    }

    private func attachFramebuffers(_ context: GLContext) throws(GPUError) {
        for (i, t) in textures.enumerated() {
            var f: GLuint = 0
            glGenFramebuffers(1, &f)
            framebuffers.append(f)
            glBindFramebuffer(GL.framebuffer, f)
            glFramebufferTexture2D(GL.framebuffer, GL.colorAttachment0, GL.texture2D, t, 0)
            let status = glCheckFramebufferStatus(GL.framebuffer)
            glBindFramebuffer(GL.framebuffer, 0)
            guard status == GL.framebufferComplete else {
                abandon(context)
                throw .gl(label: "encoder target \(i == 0 ? "Y (R8)" : "UV (GR88)") plane is not renderable", code: status)
            }
        }
    }

    /// Frees everything at once (nothing was submitted yet).
    private func abandon(_ context: GLContext) {
        glDeleteFramebuffers(GLsizei(framebuffers.count), framebuffers)
        glDeleteTextures(GLsizei(textures.count), textures)
        for i in images { _ = context.procs.destroyImage?(context.display, i) }
        framebuffers = []; textures = []; images = []
    }

    func release(_ r: GLReleaser) {
        let fbos = framebuffers, texs = textures, imgs = images
        r.timeline.retire(lastUse: lastUse) {
            r.delete(.framebuffer, fbos)
            r.delete(.texture, texs)
            for i in imgs { r.destroy(image: i) }
        }
        framebuffers = []; textures = []; images = []
    }

    /// Converts `out`'s RGBA target into the planes (nv12planes.frag), Y then UV.
    func convert(from out: Output, luma: ShaderProgram, chroma: ShaderProgram, fragment: FragmentPass, timer: PassTimer) {
        glDisable(GL.blend); glDisable(GL.scissorTest)
        timer.begin(.nv12)
        for (i, program) in [luma, chroma].enumerated() {
            glBindFramebuffer(GL.framebuffer, framebuffers[i])
            glViewport(0, 0, GLsizei(i == 0 ? width : width / 2), GLsizei(i == 0 ? height : height / 2))
            fragment.useNV12Pack(program, out)
            glDrawArrays(GL.triangles, 0, 3)
        }
        timer.end(.nv12)
        glBindFramebuffer(GL.framebuffer, 0)
    }

    /// Reads the planes back as an NV12 frame in host memory (render thread;
    /// blocks until the GPU has written them).
    func read(pts: MediaTime, matrix: ColorMatrix, range: ColorRange) -> VideoFrame {
        let frame = VideoFrame.allocate(width: width, height: height, format: .nv12, pts: pts, matrix: matrix, range: range)
        glBindBuffer(GL.pixelPackBuffer, 0)
        glPixelStorei(GL.packAlignment, 4)
        for (i, (w, h, bytesPerPixel)) in [(width, height, 1), (width / 2, height / 2, 2)].enumerated() {
            var rgba = [UInt8](repeating: 0, count: w * h * 4)
            glBindFramebuffer(GL.readFramebuffer, framebuffers[i])
            glReadPixels(0, 0, GLsizei(w), GLsizei(h), GL.rgba, GL.unsignedByte, &rgba)
            let plane = frame.planes[i], dst = plane.storage.mutableBase + plane.offset
            for y in 0..<h {
                let row = dst.advanced(by: y * plane.stride).assumingMemoryBound(to: UInt8.self)
                for x in 0..<w { for c in 0..<bytesPerPixel { row[x * bytesPerPixel + c] = rgba[(y * w + x) * 4 + c] } }
            }
        }
        glBindFramebuffer(GL.readFramebuffer, 0)
        return frame
    }
}

extension GLContext {
    /// DRM modifiers with which EGL imports both R8 and GR88 planes as
    /// render targets (EGL_EXT_image_dma_buf_import_modifiers), in the
    /// driver's order.
    func renderableModifiers() -> [UInt64] {
        guard caps.dmaBufImportModifiers,
              let query = loadProc("eglQueryDmaBufModifiersEXT", as: PFNEGLQUERYDMABUFMODIFIERSEXTPROC.self) else { return [] }
        func renderable(_ fourcc: UInt32) -> [UInt64] {
            var n: EGLint = 0
            guard query(display, EGLint(bitPattern: fourcc), 0, nil, nil, &n) == EGLBoolean(EGL_TRUE), n > 0 else { return [] }
            var mods = [EGLuint64KHR](repeating: 0, count: Int(n)), external = [EGLBoolean](repeating: 0, count: Int(n))
            guard query(display, EGLint(bitPattern: fourcc), n, &mods, &external, &n) == EGLBoolean(EGL_TRUE) else { return [] }
            return (0..<Int(n)).filter { external[$0] != EGLBoolean(EGL_TRUE) }.map { UInt64(mods[$0]) }
        }
        let gr88 = Set(renderable(EncoderTarget.gr88))
        return renderable(EncoderTarget.r8).filter { gr88.contains($0) }
    }
}
