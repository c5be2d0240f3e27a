/// How a compositor turns a plan into its output frames.
public enum CompositePath: String, Sendable, Codable, CaseIterable, CustomStringConvertible {
    /// One compute dispatch per output frame does the composite and the NV12
    /// conversion together (OpenGL ES 3.1; the default where it exists).
    case compute
    /// A fragment pass per draw into the RGBA target, then a fragment pass
    /// packing NV12 (OpenGL ES 3.0 contexts, and frames a compute pass cannot
    /// draw: dma-buf imported pictures, more than 16 draws).
    case fragment
    /// The CPU shortcut: opaque 1:1 copies of YUV frames go straight into the
    /// NV12 planes and only the region above them is rendered on the GPU.
    case directCopy = "direct copy"

    public var description: String { rawValue }
}

/// Which GPU pass renders a compositor's frames.
public enum GPUPass: String, Sendable, Codable, CaseIterable {
    /// Compute where a hardware GPU offers OpenGL ES 3.1, else fragment (a
    /// software renderer such as llvmpipe rasterizes faster than it computes).
    case auto
    /// Compute; `GPUError.unsupported` on an OpenGL ES 3.0 context.
    case compute
    /// Fragment, even where compute exists.
    case fragment
}

/// When a compositor takes the direct-copy shortcut (`CompositePath.directCopy`)
/// for the plans that allow it.
public enum DirectCopyMode: String, Sendable, Codable, CaseIterable {
    /// Never: every frame is drawn on the GPU.
    case off
    /// Only where the GPU is the CPU (a software renderer such as llvmpipe),
    /// where copying bytes beats drawing them. Hardware GPUs draw every frame.
    case auto
    /// Wherever a plan allows it, hardware GPUs too.
    case on
}

/// The paths a compositor takes, as `probe`, logs and benchmarks name them.
public struct GPUPathInfo: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The pass that draws frames (compute or fragment).
    public var pass: CompositePath
    /// Whether plans that allow it take the direct-copy shortcut.
    public var directCopy: Bool
    /// Uploads and readbacks through persistently mapped buffers (GL_EXT_buffer_storage).
    public var persistentStaging: Bool
    /// Fences waited for on the callers' threads (EGL_KHR_fence_sync).
    public var fencesOffRenderThread: Bool
    /// NV12 readbacks into memory imported from this API (`CUDA`: copied out
    /// by CUDA's copy engines, `DIPTYCH_GPU_READBACK=cuda`); nil: GL's buffers.
    public var readbackThrough: String? = nil
    /// Uploads staged in memory imported from this API (`CUDA`: copied in by
    /// CUDA's copy engines; the default where the readback goes through CUDA,
    /// `DIPTYCH_CUDA_UPLOADS=import|off`); nil: GL's buffers.
    public var uploadsThrough: String? = nil
    /// NV12 pictures read by the compute pass from buffers, no texture upload
    /// (the default with imported staging; `DIPTYCH_GPU_PICTURES=in-place|device|textures`).
    public var picturesInPlace = false
    /// Host pictures copied into device buffers first (`DIPTYCH_GPU_PICTURES=device`).
    public var picturesCopiedToDevice = false

    public var description: String {
        "composite path \(pass)\(directCopy ? " (direct copy where a plan allows it)" : ""), "
            + (persistentStaging ? "persistently mapped staging" : "staging in host memory") + ", "
            + (fencesOffRenderThread ? "fences waited for on the callers' threads" : "fences waited for on the render thread")
            + (readbackThrough.map { ", NV12 read back through \($0)" } ?? "")
            + (uploadsThrough.map { ", uploads staged through \($0)" } ?? "")
            + (picturesInPlace ? (picturesCopiedToDevice ? ", NV12, RGBA and BGRA pictures read from device copies" : ", NV12, RGBA and BGRA pictures read in place") : "")
    }
}
