import DiptychCore
/// Everything the GPU module throws. Each case says what failed and with which input.
public enum GPUError: Error, Hashable, Sendable, CustomStringConvertible {
    /// No rung of the display ladder gave a working context; every attempt is listed.
    case noDisplay(attempts: [RungOutcome])
    /// A device could not be opened (render node, libgbm, gbm_device).
    case deviceUnavailable(String)
    /// The selection (`GPUSelection.description`) names a device this
    /// machine does not have (an index past the EGL devices, a render node
    /// that does not exist): bad input rather than a GPU failure.
    case noSuchDevice(selection: String, reason: String)
    /// The GPU context was lost (reset, device removed, or a simulated loss).
    /// Every object of this compositor is dead: build a new `GPUCompositor`.
    case contextLost
    /// The frame cannot be uploaded as described (`reason` names the field).
    case badFrame(String)
    /// A feature needs an extension this context does not offer (its name).
    case unsupported(String)
    /// A shader failed to compile or link: info log and the numbered source.
    case shaderCompile(name: String, log: String, numberedSource: String)
    /// A GL error code seen at a pass boundary, with the pass's label.
    case gl(label: String, code: UInt32)
    /// An EGL call failed: which call and `eglGetError`.
    case egl(call: String, code: Int32)
    /// A dma-buf import or export failed.
    case dmaBuf(String)
    /// The output canvas cannot be rendered or converted (e.g. odd size for NV12).
    case badCanvas(String)
    /// The compositor was shut down.
    case shutDown
    /// CUDA frames could not be copied into the stream textures (CUDA–GL interop).
    case cudaInterop(String)
    /// A `DIPTYCH_GPU_*` or `DIPTYCH_CUDA_*` variable unknown or off its list (`GPURequest`).
    case badSetting(ConfigurationError)
    /// The GPU encoder cannot encode this picture or these settings.
    case encode(String)

    public var description: String {
        switch self {
        case .noDisplay(let attempts):
            return "no usable EGL display: " + attempts.map(\.description).joined(separator: "; ")
        case .deviceUnavailable(let r): return "device unavailable: \(r)"
        case .noSuchDevice(let selection, let reason): return "no such device '\(selection)': \(reason)"
        case .contextLost: return "GPU context lost"
        case .badFrame(let r): return "bad frame: \(r)"
        case .unsupported(let e): return "unsupported: needs \(e)"
        case .shaderCompile(let n, let log, let src): return "shader \(n) failed to compile:\n\(log)\n\(src)"
        case .gl(let label, let code): return "GL error 0x\(String(code, radix: 16)) in \(label)"
        case .egl(let call, let code): return "\(call) failed: EGL error 0x\(String(code, radix: 16))"
        case .dmaBuf(let r): return "dma-buf: \(r)"
        case .badCanvas(let r): return "bad canvas: \(r)"
        case .shutDown: return "GPU compositor is shut down"
        case .cudaInterop(let r): return "CUDA–GL interop: \(r)"
        case .badSetting(let e): return e.description
        case .encode(let r): return "GPU encoder: \(r)"
        }
    }
}
