import DiptychCore

/// What every frame of a compositor does, decided once when it is made
/// (`GPUPlanner.plan`, docs/ARCHITECTURE.md, "The GPU plan"): the pass that
/// draws, where uploads are staged and how pictures are read, how CUDA frames
/// reach the pass, how NV12 comes back, which fences say when, the tuning
/// the benchmarks set, and why each better choice was not taken. The renderer
/// reads it and never decides again; `diptych probe`, the take log, `/healthz`
/// and `diptych-gpu-bench` print it; tests build it directly.
public struct GPUPlan: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The pass that composites and converts to NV12.
    public enum Pass: String, Hashable, Sendable, Codable {
        /// One compute dispatch per output frame (OpenGL ES 3.1).
        case compute
        /// A fragment pass per draw, then one packing NV12.
        case fragment
    }

    /// The memory the callers copy uploads into.
    public enum Staging: String, Hashable, Sendable, Codable {
        /// Host memory glTexSubImage2D copies from during the call (no GL_EXT_buffer_storage).
        case clientMemory = "client-memory"
        /// GL buffers persistently mapped for writing (GL_EXT_buffer_storage).
        case mappedBuffers = "mapped"
        /// CUDA device memory imported into GL, copied into by CUDA's copy engines.
        case cudaImported = "cuda-imported"
    }

    /// How the pass reads NV12, I420, RGBA and BGRA pictures.
    public enum Pictures: String, Hashable, Sendable, Codable {
        /// Uploaded into textures.
        case textures
        /// Read by the compute pass where they were staged (CUDA-imported or mapped staging).
        case inPlace = "in-place"
    }

    /// How frames in CUDA memory (NVDEC's) reach the pass.
    public enum CUDAFrames: Hashable, Sendable, Codable {
        /// NV12 frames of the staging's device copied device to device into
        /// the imported staging, as host frames are; the others through interop.
        case staged
        /// Copied into textures through CUDA–GL interop.
        case interop
        /// Copied to host memory, then uploaded as host frames (why).
        case viaHost(String)
        /// No CUDA here: no decoder makes CUDA frames.
        case none

        var name: String {
            switch self {
            case .staged: "staged"
            case .interop: "interop"
            case .viaHost: "via-host"
            case .none: "none"
            }
        }
    }

    /// Where NV12 frames are read back into before the callers copy them out.
    public enum Readback: String, Hashable, Sendable, Codable {
        /// GL buffers mapped on the render thread at delivery (no GL_EXT_buffer_storage).
        case mapOnRenderThread = "map"
        /// GL buffers persistently mapped for reading, copied out on the callers' threads.
        case mappedBuffers = "mapped"
        /// CUDA memory imported into GL, copied out by CUDA's copy engines.
        case cudaImported = "cuda-imported"
    }

    public internal(set) var pass: Pass
    /// Opaque 1:1 copies of YUV frames go straight into the NV12 planes (the
    /// direct copy), where a composition plan allows it.
    public internal(set) var softwareShortcut: Bool
    public internal(set) var staging: Staging
    public internal(set) var pictures: Pictures
    public internal(set) var cudaFrames: CUDAFrames
    public internal(set) var readback: Readback
    /// Which fences mark when work is complete: GL's the render thread polls
    /// (waited for on the callers' threads), EGL's (likewise, but their
    /// creation waits in NVIDIA's driver), or GL's waited for on the render thread.
    public internal(set) var fences: GPUTuning.Fences
    public internal(set) var tuning: GPUTuning
    /// Why each better choice was not taken, one line each.
    public internal(set) var notTaken: [String]

    init(pass: Pass, softwareShortcut: Bool = false, staging: Staging, pictures: Pictures = .textures, cudaFrames: CUDAFrames = .none,
         readback: Readback, fences: GPUTuning.Fences, tuning: GPUTuning = GPUTuning(), notTaken: [String] = []) {
        self.pass = pass; self.softwareShortcut = softwareShortcut; self.staging = staging; self.pictures = pictures
        self.cudaFrames = cudaFrames; self.readback = readback; self.fences = fences; self.tuning = tuning; self.notTaken = notTaken
    }

    /// Whether CUDA frames are taken on the GPU (staged or through interop).
    public var takesCUDAFrames: Bool { cudaFrames == .staged || cudaFrames == .interop }

    public var description: String {
        "plan: pass=\(pass.rawValue) shortcut=\(softwareShortcut ? "direct-copy" : "off") staging=\(staging.rawValue)"
            + " pictures=\(pictures.rawValue) cuda-frames=\(cudaFrames.name) readback=\(readback.rawValue) fences=\(fences.rawValue)"
            + " \(tuning)" + (notTaken.isEmpty ? "" : " (not taken: \(notTaken.joined(separator: "; ")))")
    }
}

/// The values a benchmark tunes (`diptych-gpu-bench` flags); everything else
/// keeps the defaults, which are the measured best.
public struct GPUTuning: Hashable, Sendable, Codable, CustomStringConvertible {
    public enum Fences: String, Hashable, Sendable, Codable, CaseIterable {
        /// EGL fence syncs (EGL_KHR_fence_sync), waited for on the callers' threads.
        case egl
        /// GL sync objects, waited for on the render thread.
        case gl
        /// GL sync objects the render thread polls, waited for on the callers' threads (`FenceWatch`).
        case watched
    }

    /// Frames of compositors sharing a render thread run phase by phase together (1 to 256).
    public var frameBatch = 16
    /// CUDA streams each way for imported memory's copies (1 to 64).
    public var copiers = 16
    /// GPU timer queries around passes (one pass in eight is timed).
    public var timerQueries = true
    /// Host frames gathered into the page-locked bounce buffers with streaming stores (x86-64).
    public var streamingCopy = true
    /// The fences asked for (EGL's are taken only where the context has them).
    public var fences = Fences.watched

    public init(frameBatch: Int = 16, copiers: Int = 16, timerQueries: Bool = true, streamingCopy: Bool = true, fences: Fences = .watched) {
        precondition((1...256).contains(frameBatch) && (1...64).contains(copiers))
        self.frameBatch = frameBatch; self.copiers = copiers; self.timerQueries = timerQueries
        self.streamingCopy = streamingCopy; self.fences = fences
    }

    public var description: String {
        "batch=\(frameBatch) copiers=\(copiers) timers=\(timerQueries ? "on" : "off") streaming-copy=\(streamingCopy ? "on" : "off")"
    }
}

/// What a GL context offers the plan (probed once, on the render thread).
public struct GPUContextFacts: Hashable, Sendable, Codable {
    /// GL_VERSION.
    public var glVersion = "OpenGL ES 3.2"
    /// A renderer on the CPU (llvmpipe, softpipe).
    public var isSoftware = false
    /// OpenGL ES 3.1: compute shaders and shader storage buffers.
    public var computeShaders = true
    /// GL_EXT_buffer_storage: persistently mapped buffers.
    public var bufferStorage = true
    /// EGL_KHR_fence_sync with the calls to create, wait for and destroy fences.
    public var eglFences = true
    /// GL_EXT_memory_object_fd: memory exported by CUDA imported into GL.
    public var memoryObjects = true
    /// GL_EXT_texture_norm16: 16-bit textures for P010 frames.
    public var textureNorm16 = true
    public init() {}
}

/// What CUDA offers the plan (probed once, on the render thread).
public struct CUDAFacts: Hashable, Sendable, Codable {
    /// Where CUDA stands against the GL context's GPU.
    public enum Device: Hashable, Sendable, Codable {
        /// No CUDA driver (why).
        case absent(String)
        /// The CUDA device that runs the GL context.
        case sameAsGL(Int)
        /// CUDA is here, but no CUDA device runs the GL context (why).
        case other(String)
    }
    /// A round trip of bytes GL copies into imported CUDA memory and CUDA copies out.
    public enum RoundTrip: Hashable, Sendable, Codable {
        /// Not tried: nothing asked for imported memory, or it could not be made.
        case notTried
        case works
        case fails(String)
    }
    public var device: Device
    public var roundTrip: RoundTrip
    public init(device: Device, roundTrip: RoundTrip = .notTried) { self.device = device; self.roundTrip = roundTrip }
}
