import CGLES
import DiptychCore

/// Identifies one output (render target) of a compositor.
public struct OutputID: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int
    public var description: String { "output \(rawValue)" }
}

/// A delivered NV12 frame and the output it was rendered for.
public struct NV12Readback: Sendable {
    public var output: OutputID
    /// The frame in host memory; where `device` is set, its size, time and
    /// colour only (no planes): its bytes went to `device`.
    public var frame: VideoFrame
    /// The CUDA picture the output's provider lent (`GPUCompositor.setCUDAFrameProvider`),
    /// filled device to device from the readback's CUDA memory; nil: the frame is in host memory.
    public var device: CUDAFrameTarget? = nil
}

/// A framebuffer with one RGBA8 color texture (immutable storage, so compute
/// passes can also write it as an `rgba8` image).
final class ColorTarget {
    let fbo: GLuint
    let texture: GLuint
    let width: Int
    let height: Int
    var lastUse: UInt64 = 0

    init(width: Int, height: Int, label: String) throws(GPUError) {
        var t: GLuint = 0, f: GLuint = 0
        glGenTextures(1, &t)
        glBindTexture(GL.texture2D, t)
        glTexStorage2D(GL.texture2D, 1, GL.rgba8, GLsizei(width), GLsizei(height))
        glTexParameteri(GL.texture2D, GL.textureMinFilter, GL.nearest)
        glTexParameteri(GL.texture2D, GL.textureMagFilter, GL.nearest)
        glTexParameteri(GL.texture2D, GL.textureWrapS, GL.clampToEdge)
        glTexParameteri(GL.texture2D, GL.textureWrapT, GL.clampToEdge)
        glBindTexture(GL.texture2D, 0)
        glGenFramebuffers(1, &f)
        glBindFramebuffer(GL.framebuffer, f)
        glFramebufferTexture2D(GL.framebuffer, GL.colorAttachment0, GL.texture2D, t, 0)
        let status = glCheckFramebufferStatus(GL.framebuffer)
        glBindFramebuffer(GL.framebuffer, 0)
        guard status == GL.framebufferComplete else {
            glDeleteFramebuffers(1, &f); glDeleteTextures(1, &t)
            throw .gl(label: "framebuffer \(label) \(width)x\(height) incomplete", code: status)
        }
        fbo = f; texture = t; self.width = width; self.height = height
    }

    func release(_ r: GLReleaser) {
        let fbo = fbo, texture = texture
        r.timeline.retire(lastUse: lastUse) {
            r.delete(.framebuffer, [fbo])
            r.delete(.texture, [texture])
        }
    }
}

/// The compute path's render target: the output's NV12 frame in a shader
/// storage buffer (Y rows, then interleaved UV rows, `stride` bytes a row; GLES
/// has no r8/rg8 image format, so the pass packs four bytes into each uint).
final class NV12Buffer {
    let buffer: GLuint
    let bytes: Int
    var lastUse: UInt64 = 0

    init(stride: Int, height: Int) {
        bytes = stride * (height + height / 2)
        var b: GLuint = 0
        glGenBuffers(1, &b)
        glBindBuffer(GL.shaderStorageBuffer, b)
        glBufferData(GL.shaderStorageBuffer, GLsizeiptr(bytes), nil, GL.dynamicCopy)
        glBindBuffer(GL.shaderStorageBuffer, 0)
        buffer = b
    }

    func release(_ r: GLReleaser) { r.retire(lastUse: lastUse, .buffer, [buffer]) }
}

/// One output: its RGBA render target (the fragment path's composite; preview
/// and dma-buf export read it), and the NV12 target of the path that renders
/// it (the packed NV12 texture of the fragment and direct-copy paths, or the
/// compute path's storage buffer), each made on first use.
final class Output {
    let id: OutputID
    let canvas: PixelSize
    let target: ColorTarget
    let matrix: ColorMatrix
    let range: ColorRange
    /// ceil(W/4) × (H + H/2) RGBA8: Y rows then interleaved UV rows, four bytes a texel.
    private(set) var nv12: ColorTarget?
    private(set) var nv12Buffer: NV12Buffer?
    var lastPTS: MediaTime = .zero
    /// Someone asked for the RGBA target (preview, RGBA callback, export):
    /// the compute path then writes it with every frame.
    var wantsRGBA = false
    /// The RGBA target does not show the last frame (a compute frame that wrote NV12 only).
    var rgbaStale = false
    /// The last compute frame's draws, to bring the RGBA target up to date.
    var lastCompute: ComputeFrame?
    /// The NV12 buffers the encoder reads, converted from the RGBA target
    /// (`GPUCompositor.addEncoderTarget`).
    var encoderTargets: [Int: EncoderTarget] = [:]
    var nextEncoderTarget = 0
    /// The GPU H.264 encoder reading this output's NV12 buffer (`GPUCompositor.attachEncoder`).
    var encoder: OutputEncoder?

    init(id: OutputID, canvas: PixelSize, matrix: ColorMatrix, range: ColorRange) throws(GPUError) {
        self.id = id; self.canvas = canvas; self.matrix = matrix; self.range = range
        target = try ColorTarget(width: canvas.width, height: canvas.height, label: "\(id) render target")
    }

    /// Bytes per row of the NV12 frames this output produces.
    var nv12Stride: Int { (canvas.width + 3) / 4 * 4 }
    var nv12Bytes: Int { nv12Stride * (canvas.height + canvas.height / 2) }

    func nv12Texture() throws(GPUError) -> ColorTarget {
        if let nv12 { return nv12 }
        let t = try ColorTarget(width: nv12Stride / 4, height: canvas.height + canvas.height / 2, label: "\(id) nv12")
        nv12 = t
        return t
    }

    func nv12Storage() -> NV12Buffer {
        if let nv12Buffer { return nv12Buffer }
        let b = NV12Buffer(stride: nv12Stride, height: canvas.height)
        nv12Buffer = b
        return b
    }

    /// Marks every target as used by the submission being recorded.
    func used(_ serial: UInt64) {
        target.lastUse = serial
        nv12?.lastUse = serial
        nv12Buffer?.lastUse = serial
    }

    func release(_ r: GLReleaser) {
        if let encoder {
            try? encoder.collect(wait: true)
            encoder.release()
            self.encoder = nil
        }
        for t in encoderTargets.values { t.release(r) }
        encoderTargets.removeAll()
        target.release(r)
        nv12?.release(r)
        nv12Buffer?.release(r)
    }
}
