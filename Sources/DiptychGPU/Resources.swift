import CEGL
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
    public var frame: VideoFrame
}

/// The kinds of GL/EGL object the renderer deletes (for the test deleter hook).
enum GLResourceKind: String, Hashable, Sendable { case texture, buffer, framebuffer, image }

/// Injection points for tests: fences that signal on command, and a deleter
/// that sees every deletion.
struct GPUTestHooks {
    var fenceOps: FenceOps?
    var onDelete: ((GLResourceKind, [UInt32]) -> Void)?
    init(fenceOps: FenceOps? = nil, onDelete: ((GLResourceKind, [UInt32]) -> Void)? = nil) {
        self.fenceOps = fenceOps; self.onDelete = onDelete
    }
}

/// The textures of one uploaded (or imported) stream frame. Owned by the renderer,
/// deleted only after the fence of its last use (`lastUse`) has signalled.
final class TextureSet {
    /// The CPU format it was made for; nil for a dma-buf import (never reused).
    let format: PixelFormat?
    let input: ShaderKey.Input
    let width: Int
    let height: Int
    let textures: [GLuint]
    /// The EGLImage behind an imported texture (destroyed after the texture).
    let image: EGLImageKHR?
    var lastUse: UInt64 = 0
    var matrix: ColorMatrix = .bt709
    var range: ColorRange = .limited
    /// Which upload its pictures hold (unique per upload in a renderer).
    var uploadSerial: UInt64 = 0

    init(format: PixelFormat?, input: ShaderKey.Input, width: Int, height: Int, textures: [GLuint], image: EGLImageKHR? = nil) {
        self.format = format; self.input = input; self.width = width; self.height = height
        self.textures = textures; self.image = image
    }

    func matches(_ f: PixelFormat, _ w: Int, _ h: Int) -> Bool { format == f && width == w && height == h }

    /// Allocates immutable textures for `format` (BGRA through texture swizzle).
    static func make(format: PixelFormat, width: Int, height: Int) -> TextureSet {
        let shapes = format.planeShapes(width: width, height: height)
        var ids = [GLuint](repeating: 0, count: shapes.count)
        glGenTextures(GLsizei(ids.count), &ids)
        for (i, s) in shapes.enumerated() {
            glBindTexture(GL.texture2D, ids[i])
            glTexStorage2D(GL.texture2D, 1, s.internalFormat, GLsizei(s.width), GLsizei(s.height))
            glTexParameteri(GL.texture2D, GL.textureWrapS, GL.clampToEdge)
            glTexParameteri(GL.texture2D, GL.textureWrapT, GL.clampToEdge)
            glTexParameteri(GL.texture2D, GL.textureMinFilter, GL.nearest)
            glTexParameteri(GL.texture2D, GL.textureMagFilter, GL.nearest)
            if format == .bgra {
                glTexParameteri(GL.texture2D, GL.textureSwizzleR, GL.blueValue)
                glTexParameteri(GL.texture2D, GL.textureSwizzleB, GL.redValue)
            }
        }
        glBindTexture(GL.texture2D, 0)
        let input: ShaderKey.Input = format == .nv12 ? .nv12 : format == .i420 ? .i420 : .rgb
        return TextureSet(format: format, input: input, width: width, height: height, textures: ids)
    }
}

/// A stream role's current textures and its pool of reusable sets.
final class StreamSlot {
    var pool: [TextureSet] = []
    var current: TextureSet?
    /// Direct-copy mode: the latest YUV frame, kept until the next upload.
    var cpuFrame: VideoFrame?
    /// Whether `current` already holds `cpuFrame`'s picture.
    var textureFresh = false
}

/// A framebuffer with one color texture.
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
}

/// One output: its RGBA render target (the composite; preview reads it) and the
/// packed NV12 target converted from it.
final class Output {
    let id: OutputID
    let canvas: PixelSize
    let target: ColorTarget
    /// ceil(W/4) × (H + H/2) RGBA8: Y rows then interleaved UV rows, four bytes a texel.
    let nv12: ColorTarget
    let matrix: ColorMatrix
    let range: ColorRange
    var lastPTS: MediaTime = .zero
    /// The last frame took the direct-copy path: the RGBA target holds only its rendered region.
    var directLast = false
    /// The last direct-copy frame delivered (its bytes are filled once the
    /// caller has run the delivery copies, before the next call).
    var lastDirectFrame: VideoFrame?
    /// The last direct-copy region rendered with nothing beneath showing, and
    /// where its bytes land once that frame is delivered (see `RegionKey`).
    var regionKey: GPURenderer.RegionKey?
    var regionCache: RegionCache?
    init(id: OutputID, canvas: PixelSize, target: ColorTarget, nv12: ColorTarget, matrix: ColorMatrix, range: ColorRange) {
        self.id = id; self.canvas = canvas; self.target = target; self.nv12 = nv12; self.matrix = matrix; self.range = range
    }
    /// Bytes per row of the NV12 frames this output produces.
    var nv12Stride: Int { nv12.width * 4 }
}

/// A pixel buffer in a ring (unpack for uploads, pack for readbacks).
struct RingBuffer {
    var buffer: GLuint
    var capacity = 0
    var lastUse: UInt64 = 0
    var busy = false
}

/// An NV12 readback submitted but not yet delivered.
struct PendingReadback {
    var serial: UInt64
    /// The pack buffer, or -1 when nothing is read from the GPU (a direct-copy frame without a rendered region).
    var slot: Int
    var output: OutputID
    var pts: MediaTime
    var width: Int
    var height: Int
    var stride: Int
    var bytes: Int
    var matrix: ColorMatrix
    var range: ColorRange
    /// A direct-copy frame: assembled on the CPU from the copies' frames, then
    /// the rendered region read from the GPU (`bytes` of it in the pack buffer).
    var direct: DirectFrame?
    /// Bytes of the delivered NV12 frame.
    var frameBytes: Int { stride * height + stride * (height / 2) }
}

/// A draw that is a 1:1 copy of a YUV frame: `destination` on the canvas
/// from the same-sized rectangle at (`sourceX`, `sourceY`) of `frame`
/// (sensor pixels), mirrored horizontally or not.
struct CopyDraw {
    var destination: PixelRect
    var frame: VideoFrame
    var sourceX: Int
    var sourceY: Int
    var mirrored: Bool
}

/// How a direct-copy frame is put together: each copy's source rectangle of
/// its (kept) frame into its destination, then the region from the GPU.
struct DirectFrame {
    var copies: [CopyDraw]
    /// The rendered region; its Y rows then its UV rows, tightly packed, lead the pack buffer.
    var region: PixelRect?
    /// Copy the region into this cache on delivery (a later frame may reuse it).
    var fill: RegionCache?
    /// The region was not rendered: its bytes come from this cache, filled by
    /// an earlier frame's delivery (frames are delivered in order).
    var reuse: RegionCache?
}

/// The bytes of one rendered region (Y rows then UV rows, tightly packed).
final class RegionCache: @unchecked Sendable {
    let region: PixelRect
    let bytes: Int
    let base: UnsafeMutableRawPointer
    init(region: PixelRect) {
        self.region = region
        bytes = region.width * region.height * 3 / 2
        base = UnsafeMutableRawPointer.allocate(byteCount: max(bytes, 1), alignment: 64)
    }
    deinit { base.deallocate() }
}
