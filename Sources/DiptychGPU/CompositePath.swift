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
