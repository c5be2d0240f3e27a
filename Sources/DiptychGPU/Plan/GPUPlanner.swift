import DiptychCore

/// Decides a compositor's `GPUPlan` from what its context and CUDA offer
/// and what was asked for. Pure: the renderer probes the facts, the planner
/// decides, and the renderer does what the plan says (docs/ARCHITECTURE.md,
/// "The GPU plan"). `GPUPlannerTests` has a row per kind of machine.
public enum GPUPlanner {
    /// What the compositor's maker asks of it, beside the environment's `GPURequest`.
    struct Options: Hashable, Sendable {
        var pass = GPUPass.auto
        var directCopy = DirectCopyMode.off
        /// Slots of the upload staging ring (pictures are read in place with four or more).
        var uploadDepth = 8
        var tuning = GPUTuning()
    }

    /// Whether any choice the request allows would use imported CUDA memory:
    /// only then does the renderer try CUDA's round trip.
    static func wantsImportedMemory(_ request: GPURequest) -> Bool {
        request.readback != .gl || request.uploads == .import
    }

    /// The plan for a context with `context`'s facts and CUDA's `cuda`.
    /// Throws where the options ask for what the context cannot do (compute on OpenGL ES 3.0).
    static func plan(_ context: GPUContextFacts, _ cuda: CUDAFacts, _ request: GPURequest,
                     _ options: Options = Options()) throws(GPUError) -> GPUPlan {
        var notTaken: [String] = []
        // The pass: compute on hardware GPUs; a software renderer (llvmpipe)
        // rasterizes a composite about twice as fast as it runs the compute pass.
        if options.pass == .compute && !context.computeShaders {
            throw .unsupported("compute shaders (OpenGL ES 3.1; this context is \(context.glVersion))")
        }
        let pass: GPUPlan.Pass
        if !context.computeShaders {
            pass = .fragment
            notTaken.append("compute: \(context.glVersion) lacks compute shaders")
        } else if options.pass == .fragment {
            pass = .fragment
            notTaken.append("compute: fragment asked for")
        } else if options.pass == .auto && context.isSoftware {
            pass = .fragment
            notTaken.append("compute: a software renderer rasterizes faster")
        } else {
            pass = .compute
        }
        let shortcut = options.directCopy == .on || (options.directCopy == .auto && context.isSoftware)

        let fences: GPUTuning.Fences
        switch (options.tuning.fences, context.eglFences) {
        case (.watched, _): fences = .watched
        case (.egl, true): fences = .egl; notTaken.append("watched fences: egl fences asked for")
        case (.egl, false): fences = .watched; notTaken.append("egl fences: no EGL_KHR_fence_sync")
        case (.gl, _): fences = .gl; notTaken.append("watched fences: gl fences asked for")
        }

        // Imported CUDA memory: asked for (by default, for the readback), and
        // possible where the context imports memory and a round trip on the
        // CUDA device that runs it gave the bytes back.
        let wantReadback = request.readback != .gl
        let wantStaging = request.uploads == .import || (request.uploads == .auto && wantReadback)
        var importWorks = false
        if wantReadback || wantStaging {
            if !context.memoryObjects {
                notTaken.append("cuda-imported memory: no GL_EXT_memory_object_fd")
            } else {
                switch (cuda.device, cuda.roundTrip) {
                case (.absent(let why), _): notTaken.append("cuda-imported memory: no CUDA (\(why))")
                case (.other(let why), _): notTaken.append("cuda-imported memory: \(why)")
                case (.sameAsGL, .works): importWorks = true
                case (.sameAsGL, .fails(let why)): notTaken.append("cuda-imported memory: the round trip failed (\(why))")
                case (.sameAsGL, .notTried): notTaken.append("cuda-imported memory: the round trip was not tried")
                }
            }
        } else {
            notTaken.append("cuda-imported memory: gl readback and no imported uploads asked for")
        }

        let readback: GPUPlan.Readback
        if wantReadback && importWorks {
            readback = .cudaImported
        } else {
            readback = context.bufferStorage ? .mappedBuffers : .mapOnRenderThread
        }
        let staging: GPUPlan.Staging
        if wantStaging && importWorks && !shortcut {
            staging = .cudaImported
        } else {
            // The direct copy writes staging slots on the CPU: it keeps GL's.
            if wantStaging && importWorks { notTaken.append("cuda-imported staging: the direct copy writes staging on the CPU") }
            staging = context.bufferStorage ? .mappedBuffers : .clientMemory
        }
        if !context.bufferStorage { notTaken.append("mapped buffers: no GL_EXT_buffer_storage") }

        // Pictures in place: read by the compute pass where they were staged
        // (imported device memory; GL's mapped buffers where asked for, which
        // no texture upload then copies); a picture holds its slot while
        // current, so the ring needs four.
        var pictures = GPUPlan.Pictures.textures
        if staging == .cudaImported || (staging == .mappedBuffers && !shortcut && request.pictures == .inPlace) {
            if request.pictures == .textures {
                notTaken.append("pictures in place: textures asked for")
            } else if pass != .compute {
                notTaken.append("pictures in place: the fragment pass reads textures")
            } else if options.uploadDepth < 4 {
                notTaken.append("pictures in place: \(options.uploadDepth) staging slots (four needed)")
            } else {
                pictures = .inPlace
            }
        }

        let cudaFrames: GPUPlan.CUDAFrames
        switch cuda.device {
        case .absent: cudaFrames = .none
        case .other(let why): cudaFrames = .viaHost(why); notTaken.append("cuda frames on the GPU: \(why)")
        case .sameAsGL: cudaFrames = staging == .cudaImported ? .staged : .interop
        }
        if cudaFrames != .none && !context.textureNorm16 {
            notTaken.append("10-bit cuda frames on the GPU: no GL_EXT_texture_norm16")
        }
        return GPUPlan(pass: pass, softwareShortcut: shortcut, staging: staging, pictures: pictures, cudaFrames: cudaFrames,
                       readback: readback, fences: fences, tuning: options.tuning, notTaken: notTaken)
    }

    /// `plan` after CUDA frames failed to reach the pass (`error`): a take
    /// copies them through host memory from then on instead of failing.
    public static func afterCUDAFailure(_ plan: GPUPlan, _ error: GPUError) -> GPUPlan {
        var p = plan
        p.cudaFrames = .viaHost("\(error)")
        p.notTaken.append("cuda frames on the GPU: \(error)")
        return p
    }

    /// Throws where `plan` asks for what this context (or CUDA) cannot do:
    /// plans given by tests and benchmarks are checked before they are taken.
    static func check(_ plan: GPUPlan, _ context: GPUContextFacts, _ cuda: CUDAFacts, uploadDepth: Int = 8) throws(GPUError) {
        if plan.pass == .compute && !context.computeShaders {
            throw .unsupported("compute shaders (OpenGL ES 3.1; this context is \(context.glVersion))")
        }
        if (plan.staging == .mappedBuffers || plan.readback == .mappedBuffers) && !context.bufferStorage {
            throw .unsupported("mapped buffers (GL_EXT_buffer_storage)")
        }
        if plan.fences == .egl && !context.eglFences { throw .unsupported("EGL fences (EGL_KHR_fence_sync)") }
        if (plan.staging == .cudaImported || plan.readback == .cudaImported) && cuda.roundTrip != .works {
            throw .unsupported("CUDA-imported memory (\(cuda.roundTrip))")
        }
        if plan.pictures == .inPlace && (plan.staging == .clientMemory || plan.pass != .compute || plan.softwareShortcut) {
            throw .unsupported("pictures in place without CUDA-imported or mapped staging and the compute pass")
        }
        if plan.pictures == .inPlace && uploadDepth < 4 {
            throw .unsupported("pictures in place with \(uploadDepth) staging slots (four needed)")
        }
        if plan.staging == .cudaImported && plan.softwareShortcut {
            throw .unsupported("CUDA-imported staging with the direct copy (it writes staging on the CPU)")
        }
    }
}
