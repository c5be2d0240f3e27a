import DiptychCore
import Foundation
import Testing
@testable import DiptychGPU

/// Every row of the GPU path choice (docs/ARCHITECTURE.md, "The GPU plan"):
/// what each kind of machine offers, what is asked, the plan taken, and why
/// each better choice was not.
@Suite struct GPUPlannerTests {
    static let nvidia = GPUContextFacts()
    static let llvmpipe: GPUContextFacts = { var f = GPUContextFacts(); f.glVersion = "OpenGL ES 3.2 Mesa"; f.isSoftware = true; return f }()
    static let es30: GPUContextFacts = {
        var f = GPUContextFacts()
        f.glVersion = "OpenGL ES 3.0"; f.computeShaders = false; f.bufferStorage = false; f.memoryObjects = false; f.textureNorm16 = false
        return f
    }()
    static let noCUDA = CUDAFacts(device: .absent("libcuda.so.1: cannot open shared object file"))
    static let roundTrip = CUDAFacts(device: .sameAsGL(0), roundTrip: .works)
    static let noRoundTrip = CUDAFacts(device: .sameAsGL(0), roundTrip: .fails("bytes GL wrote into imported memory did not come back"))

    struct Row: CustomTestStringConvertible, Sendable {
        var name: String
        var context = GPUPlannerTests.nvidia
        var cuda = GPUPlannerTests.roundTrip
        var request = GPURequest()
        var options = GPUPlanner.Options(pass: .auto, directCopy: .auto)
        /// The plan's line, or the error's text.
        var expected: String
        var testDescription: String { name }

        init(_ name: String, expected: String, _ change: (inout Row) -> Void = { _ in }) {
            self.name = name; self.expected = expected
            change(&self)
        }
    }

    static let tuning = "batch=16 copiers=16 timers=on streaming-copy=on"

    static let rows: [Row] = [
        Row("llvmpipe", expected: "plan: pass=fragment shortcut=direct-copy staging=mapped pictures=textures cuda-frames=none readback=mapped"
            + " fences=watched \(tuning) (not taken: compute: a software renderer rasterizes faster; cuda-imported memory: no CUDA"
            + " (libcuda.so.1: cannot open shared object file))") { $0.context = llvmpipe; $0.cuda = noCUDA },
        Row("llvmpipe, compute asked for", expected: "plan: pass=compute shortcut=direct-copy staging=mapped pictures=textures cuda-frames=none"
            + " readback=mapped fences=watched \(tuning) (not taken: cuda-imported memory: no CUDA (libcuda.so.1: cannot open shared object file))") {
            $0.context = llvmpipe; $0.cuda = noCUDA; $0.options.pass = .compute
        },
        Row("OpenGL ES 3.0 only", expected: "plan: pass=fragment shortcut=off staging=client-memory pictures=textures cuda-frames=none readback=map"
            + " fences=watched \(tuning) (not taken: compute: OpenGL ES 3.0 lacks compute shaders; cuda-imported memory: no GL_EXT_memory_object_fd;"
            + " mapped buffers: no GL_EXT_buffer_storage)") { $0.context = es30; $0.cuda = noCUDA },
        Row("OpenGL ES 3.0, compute asked for", expected: "unsupported: needs compute shaders (OpenGL ES 3.1; this context is OpenGL ES 3.0)") {
            $0.context = es30; $0.cuda = noCUDA; $0.options.pass = .compute
        },
        Row("NVIDIA with a working CUDA round trip", expected: "plan: pass=compute shortcut=off staging=cuda-imported pictures=in-place"
            + " cuda-frames=staged readback=cuda-imported fences=watched \(tuning)"),
        Row("NVIDIA, a shallow staging ring", expected: "plan: pass=compute shortcut=off staging=cuda-imported pictures=textures"
            + " cuda-frames=staged readback=cuda-imported fences=watched \(tuning) (not taken: pictures in place: 3 staging slots (four needed))") {
            $0.options.uploadDepth = 3
        },
        Row("NVIDIA, fragment asked for", expected: "plan: pass=fragment shortcut=off staging=cuda-imported pictures=textures"
            + " cuda-frames=staged readback=cuda-imported fences=watched \(tuning) (not taken: compute: fragment asked for;"
            + " pictures in place: the fragment pass reads textures)") { $0.options.pass = .fragment },
        Row("NVIDIA, direct copy on", expected: "plan: pass=compute shortcut=direct-copy staging=mapped pictures=textures"
            + " cuda-frames=interop readback=cuda-imported fences=watched \(tuning) (not taken: cuda-imported staging: the direct copy writes"
            + " staging on the CPU)") { $0.options.directCopy = .on },
        Row("NVIDIA without a working CUDA round trip", expected: "plan: pass=compute shortcut=off staging=mapped pictures=textures"
            + " cuda-frames=interop readback=mapped fences=watched \(tuning) (not taken: cuda-imported memory: the round trip failed"
            + " (bytes GL wrote into imported memory did not come back))") { $0.cuda = noRoundTrip },
        Row("GL on another GPU than CUDA's", expected: "plan: pass=compute shortcut=off staging=mapped pictures=textures cuda-frames=via-host"
            + " readback=mapped fences=watched \(tuning) (not taken: cuda-imported memory: no CUDA device runs this GL context (Mesa Intel);"
            + " cuda frames on the GPU: no CUDA device runs this GL context (Mesa Intel))") {
            $0.cuda = CUDAFacts(device: .other("no CUDA device runs this GL context (Mesa Intel)"))
        },
        Row("P010 pictures without 16-bit textures", expected: "plan: pass=compute shortcut=off staging=cuda-imported pictures=in-place"
            + " cuda-frames=staged readback=cuda-imported fences=watched \(tuning) (not taken: 10-bit cuda frames on the GPU: no GL_EXT_texture_norm16)") {
            $0.context.textureNorm16 = false
        },
        Row("EGL fences asked for", expected: "plan: pass=compute shortcut=off staging=cuda-imported pictures=in-place cuda-frames=staged"
            + " readback=cuda-imported fences=egl \(tuning) (not taken: watched fences: egl fences asked for)") { $0.options.tuning.fences = .egl },
        Row("EGL fences asked for, none there", expected: "plan: pass=compute shortcut=off staging=cuda-imported pictures=in-place cuda-frames=staged"
            + " readback=cuda-imported fences=watched \(tuning) (not taken: egl fences: no EGL_KHR_fence_sync)") {
            $0.context.eglFences = false; $0.options.tuning.fences = .egl
        },
        Row("GL fences asked for", expected: "plan: pass=compute shortcut=off staging=cuda-imported pictures=in-place cuda-frames=staged"
            + " readback=cuda-imported fences=gl batch=4 copiers=2 timers=off streaming-copy=off (not taken: watched fences: gl fences asked for)") {
            $0.options.tuning = GPUTuning(frameBatch: 4, copiers: 2, timerQueries: false, streamingCopy: false, fences: .gl)
        },
        Row("DIPTYCH_GPU_READBACK=gl", expected: "plan: pass=compute shortcut=off staging=mapped pictures=textures cuda-frames=interop"
            + " readback=mapped fences=watched \(tuning) (not taken: cuda-imported memory: gl readback and no imported uploads asked for)") {
            $0.request.readback = .gl
        },
        Row("DIPTYCH_GPU_READBACK=gl, DIPTYCH_CUDA_UPLOADS=import", expected: "plan: pass=compute shortcut=off staging=cuda-imported"
            + " pictures=in-place cuda-frames=staged readback=mapped fences=watched \(tuning)") { $0.request.readback = .gl; $0.request.uploads = .import },
        Row("DIPTYCH_CUDA_UPLOADS=off", expected: "plan: pass=compute shortcut=off staging=mapped pictures=textures cuda-frames=interop"
            + " readback=cuda-imported fences=watched \(tuning)") { $0.request.uploads = .off },
        Row("DIPTYCH_CUDA_UPLOADS=off, DIPTYCH_GPU_PICTURES=in-place", expected: "plan: pass=compute shortcut=off staging=mapped"
            + " pictures=in-place cuda-frames=interop readback=cuda-imported fences=watched \(tuning)") {
            $0.request.uploads = .off; $0.request.pictures = .inPlace
        },
        Row("llvmpipe, compute and DIPTYCH_GPU_PICTURES=in-place asked for", expected: "plan: pass=compute shortcut=direct-copy staging=mapped"
            + " pictures=textures cuda-frames=none readback=mapped fences=watched \(tuning) (not taken: cuda-imported memory: no CUDA"
            + " (libcuda.so.1: cannot open shared object file))") {
            $0.context = llvmpipe; $0.cuda = noCUDA; $0.options.pass = .compute; $0.request.pictures = .inPlace
        },
        Row("DIPTYCH_GPU_PICTURES=textures", expected: "plan: pass=compute shortcut=off staging=cuda-imported pictures=textures"
            + " cuda-frames=staged readback=cuda-imported fences=watched \(tuning) (not taken: pictures in place: textures asked for)") {
            $0.request.pictures = .textures
        },
        Row("DIPTYCH_GPU_READBACK=cuda without CUDA", expected: "plan: pass=compute shortcut=off staging=mapped pictures=textures cuda-frames=none"
            + " readback=mapped fences=watched \(tuning) (not taken: cuda-imported memory: no CUDA (no driver))") {
            $0.request.readback = .cuda; $0.cuda = CUDAFacts(device: .absent("no driver"))
        },
    ]

    @Test(arguments: rows)
    func plan(_ row: Row) {
        do throws(GPUError) {
            let p = try GPUPlanner.plan(row.context, row.cuda, row.request, row.options)
            #expect(p.description == row.expected)
            // Whatever the planner decides, the context can do.
            #expect(throws: Never.self) { try GPUPlanner.check(p, row.context, row.cuda, uploadDepth: row.options.uploadDepth) }
        } catch {
            #expect("\(error)" == row.expected)
        }
    }

    /// The round trip is tried only where a choice the request allows needs imported memory.
    @Test func importedMemoryIsWantedOnlyWhereAsked() {
        var r = GPURequest()
        #expect(GPUPlanner.wantsImportedMemory(r))
        r.readback = .gl
        #expect(!GPUPlanner.wantsImportedMemory(r))
        r.uploads = .import
        #expect(GPUPlanner.wantsImportedMemory(r))
    }

    /// A take whose CUDA frames failed to reach the pass copies them through host memory.
    @Test func aCUDAFailureSendsFramesThroughHostMemory() throws {
        let p = try GPUPlanner.plan(Self.nvidia, Self.noRoundTrip, GPURequest())
        let after = GPUPlanner.afterCUDAFailure(p, .cudaInterop("cuGraphicsMapResources(2) failed"))
        #expect(p.takesCUDAFrames && !after.takesCUDAFrames)
        guard case .viaHost(let why) = after.cudaFrames else { Issue.record("\(after.cudaFrames)"); return }
        #expect(why.contains("cuGraphicsMapResources(2) failed"), "\(why)")
        #expect(after.description.contains("cuda-frames=via-host") && after.notTaken.last!.hasPrefix("cuda frames on the GPU: "))
        #expect(after.pass == p.pass && after.staging == p.staging && after.readback == p.readback)
    }

    /// Plans given by tests and benchmarks are checked against the context.
    @Test func givenPlansAreChecked() throws {
        let p = try GPUPlanner.plan(Self.nvidia, Self.roundTrip, GPURequest())
        for (name, context, cuda) in [("OpenGL ES 3.0", Self.es30, Self.roundTrip), ("no round trip", Self.nvidia, Self.noRoundTrip)] {
            #expect(throws: GPUError.self, "\(name)") { try GPUPlanner.check(p, context, cuda) }
        }
        var noFences = Self.nvidia
        noFences.eglFences = false
        var egl = p
        egl.fences = .egl
        #expect(throws: GPUError.self) { try GPUPlanner.check(egl, noFences, Self.roundTrip) }
        #expect(throws: Never.self) { try GPUPlanner.check(p, noFences, Self.roundTrip) }
        #expect(throws: GPUError.self) { try GPUPlanner.check(p, Self.nvidia, Self.roundTrip, uploadDepth: 3) }
        var inPlaceOverMapped = p
        inPlaceOverMapped.staging = .mappedBuffers
        #expect(throws: Never.self) { try GPUPlanner.check(inPlaceOverMapped, Self.nvidia, Self.roundTrip) }
        var inPlaceOverClient = p
        inPlaceOverClient.staging = .clientMemory
        #expect(throws: GPUError.self) { try GPUPlanner.check(inPlaceOverClient, Self.nvidia, Self.roundTrip) }
    }

    /// The plan travels as JSON (the take summary, `/healthz`, the bench's results) and comes back equal.
    @Test func planRoundTripsThroughJSON() throws {
        let p = GPUPlanner.afterCUDAFailure(try GPUPlanner.plan(Self.llvmpipe, Self.noCUDA, GPURequest()), .cudaInterop("x"))
        let back = try JSONDecoder().decode(GPUPlan.self, from: try JSONEncoder().encode(p))
        #expect(back == p)
    }
}

/// The renderer does what its plan says, on llvmpipe: the planner's plan for
/// what the context offers, a given plan checked against it, and CUDA frames
/// refused where the plan takes none.
extension GPU {
    @Suite struct PlanTaken {
        @Test func thePlannersPlanForThisContext() throws {
            let c = try makeCompositor()
            defer { c.shutdown() }
            let facts = try c.withRenderer { r in GPUContextFacts(r.context) }
            #expect(facts.isSoftware && facts.computeShaders, "\(facts)")
            // No CUDA here: GL's buffers, textures, no CUDA frames.
            let expected = try GPUPlanner.plan(facts, CUDAFacts(device: .absent("none")), GPURequest(), .init(pass: .compute, uploadDepth: 8))
            #expect(c.plan.pass == .compute && c.plan.cudaFrames == .none && c.plan.pictures == .textures, "\(c.plan)")
            #expect(c.plan.staging == expected.staging && c.plan.readback == expected.readback && c.plan.fences == expected.fences)
            let lanes = try c.withRenderer { r in (r.staging.imported == nil, r.readbacks.exported == nil, r.timeline.canWaitOffThread) }
            #expect(lanes == (true, true, c.plan.fences != .gl))
        }

        @Test func aGivenPlanTheContextCannotDoIsRefused() throws {
            let probe = try makeCompositor()
            var p = probe.plan
            probe.shutdown()
            p.readback = .cudaImported   // no CUDA and no stand-in memory here
            #expect(throws: GPUError.self) { _ = try makeCompositor(plan: p) }
        }

        @Test func cudaFramesAreRefusedWhereThePlanTakesNone() throws {
            let c = try makeCompositor()
            defer { c.shutdown() }
            #expect(c.plan.cudaFrames == .none)
            let f = HostCUDAFrame(ComputePath.picture(64, 48, .nv12, seed: 1), released: HostCUDAFrame.Released())
            #expect(throws: GPUError.cudaInterop("the plan takes no CUDA frames on the GPU (cuda-frames=none)")) {
                try c.upload(f.frame, holder: f, role: .primary)
            }
        }
    }
}
