import CGLES
import DiptychCore
import DiptychCUDA
import Foundation
import Testing
@testable import DiptychGPU

/// Host NV12 frames through CUDA (`DIPTYCH_CUDA_UPLOADS=on`): staged in pinned
/// memory on the callers' threads, copied into the stream textures by CUDA in
/// the hop's one map and unmap, with the same pictures as through GL; other
/// formats still go through GL; a slot is reused only after its fence.
extension GPU {
    @Suite struct CUDAHostUploads {
        static let canvas = PixelSize(width: 64, height: 48)
        static let plan = GPU.CUDAUploads.plan

        private func run(_ c: GPUCompositor, frames: [[(VideoFrame, StreamRole)]]) throws -> [[UInt8]] {
            let out = try c.addOutput(canvas: Self.canvas)
            var got: [VideoFrame] = []
            for (i, uploads) in frames.enumerated() {
                got += try c.composite(uploads: uploads, output: out, plan: Self.plan, pts: MediaTime(value: Int64(i), timescale: 30))
            }
            got += try c.flush()
            return got.map(GPU.CUDAUploads.nv12Bytes)
        }

        /// The pictures of `frames` through GL alone.
        private func throughGL(_ frames: [[(VideoFrame, StreamRole)]]) throws -> [[UInt8]] {
            let gl = try makeCompositor(readbackDepth: 2)
            defer { gl.shutdown() }
            return try run(gl, frames: frames)
        }

        @Test func hostFramesThroughCUDAGiveThePicturesOfGL() throws {
            // NV12 with padded strides (copied as blocks).
            let frames = (0..<4).map { i in
                [(ComputePath.picture(64, 48, .nv12, seed: i), StreamRole.primary), (ComputePath.picture(32, 24, .nv12, seed: 9 + i), .secondary)]
            }
            let expected = try throughGL(frames)
            let interop = HostInterop()
            let c = try makeCompositor(hooks: GPUTestHooks(cudaCalls: { _ in interop }, cudaHostUploads: true), readbackDepth: 2)
            #expect(c.paths.description.contains("host NV12 frames uploaded through CUDA"), "\(c.paths)")
            let got = try run(c, frames: frames)
            #expect(got.count == 4 && got == expected, "the pictures through CUDA differ from those through GL")
            #expect(interop.copies == 4 * 4, "two frames of two planes a composite: \(interop.copies)")
            // Once the staging slots exist (growing one is a hop of its own), one map a composite for both frames.
            #expect(interop.maps.reduce(0, +) == 16 && interop.maps.suffix(2) == [4, 4], "\(interop.maps)")
            #expect(interop.hostBlocks > 0, "the staging is pinned memory")
            c.shutdown()
            #expect(interop.hostBlocks == 0, "every pinned block freed")
        }

        /// A hop that fails after a host frame was queued takes its copy back
        /// (it would run after the fence meant to cover it) and frees its slots.
        @Test func aFailedHopLeavesNoCopyQueued() throws {
            let interop = HostInterop(), released = HostCUDAFrame.Released()
            let c = try makeCompositor(hooks: GPUTestHooks(cudaCalls: { _ in interop }, cudaHostUploads: true), readbackDepth: 2)
            defer { c.shutdown() }
            let out = try c.addOutput(canvas: Self.canvas)
            let f = HostCUDAFrame(GPU.CUDAUploads.nv12(32, 24, seed: 3), released: released)
            var other = f.frame
            other.device = 1
            try c.upload(ComputePath.picture(64, 48, .nv12, seed: 1), role: .primary)
            try c.upload(other, holder: f, role: .secondary)
            #expect(throws: GPUError.self) { try c.render(output: out, plan: Self.plan, pts: .zero) }
            #expect(try c.withRenderer { r in (r.context.cudaUploads?.isEmpty ?? true, r.staging.slots.allSatisfy { !$0.staged }) } == (true, true))
            let copies = interop.copies
            // The compositor goes on, and nothing left over is copied.
            let frames = [[(ComputePath.picture(64, 48, .nv12, seed: 2), StreamRole.primary), (ComputePath.picture(32, 24, .nv12, seed: 4), .secondary)]]
            _ = try run(c, frames: frames)
            #expect(interop.copies == copies + 4)
        }

        /// Where CUDA cannot take a set (registration fails) the frame goes
        /// through GL from the same slot; where pinned memory cannot be had,
        /// the compositor stages through GL from the start.
        @Test func failuresFallBackToGL() throws {
            let frames = [[(ComputePath.picture(64, 48, .nv12, seed: 5), StreamRole.primary), (ComputePath.picture(32, 24, .nv12, seed: 6), .secondary)]]
            let expected = try throughGL(frames)
            let refusing = HostInterop()
            refusing.failRegister = true
            let c = try makeCompositor(hooks: GPUTestHooks(cudaCalls: { _ in refusing }, cudaHostUploads: true), readbackDepth: 2)
            #expect(try run(c, frames: frames) == expected)
            #expect(refusing.copies == 0)
            #expect(try c.withRenderer { r in r.staging.slots.allSatisfy { !$0.staged } })
            c.shutdown()
            let noMemory = HostInterop()
            noMemory.failAllocate = true
            let d = try makeCompositor(hooks: GPUTestHooks(cudaCalls: { _ in noMemory }, cudaHostUploads: true), readbackDepth: 2)
            defer { d.shutdown() }
            #expect(!d.paths.description.contains("CUDA"), "\(d.paths)")
            #expect(try run(d, frames: frames) == expected)
        }

        @Test func otherFormatsStillGoThroughGL() throws {
            let frames = [[(ComputePath.picture(64, 48, .i420, seed: 1), StreamRole.primary),
                           (ComputePath.picture(32, 24, .rgba, seed: 2), .secondary)]]
            let expected = try throughGL(frames)
            let interop = HostInterop()
            let c = try makeCompositor(hooks: GPUTestHooks(cudaCalls: { _ in interop }, cudaHostUploads: true), readbackDepth: 2)
            defer { c.shutdown() }
            #expect(try run(c, frames: frames) == expected)
            #expect(interop.copies == 0 && interop.maps.isEmpty)
        }

        /// A staging slot of pinned memory is written again only after the
        /// fence that follows the draws its copy fed.
        @Test func aSlotIsReusedOnlyAfterItsFence() throws {
            let fences = FakeFences(finishGL: true), interop = HostInterop()
            // Staging not otherwise tracked (no persistent GL mapping): only the pinned path makes slots wait.
            let c = try makeCompositor(hooks: GPUTestHooks(fenceOps: fences.ops, persistentMapping: false, cudaCalls: { _ in interop },
                                                           cudaHostUploads: true), readbackDepth: 2, uploadDepth: 2)
            #expect(c.paths.description.contains("uploaded through CUDA") && !c.paths.persistentStaging)
            defer { c.shutdown() }
            let out = try c.addOutput(canvas: Self.canvas)
            try c.upload(ComputePath.picture(64, 48, .nv12, seed: 1), role: .primary)
            try c.upload(ComputePath.picture(32, 24, .nv12, seed: 2), role: .secondary)
            try c.render(output: out, plan: Self.plan, pts: .zero, readback: false)
            let read = try c.withRenderer { r in r.staging.slots.map(\.lastUse) }
            #expect(read.allSatisfy { $0 > 0 }, "both slots read by the submission: \(read)")
            #expect(fences.waits.isEmpty)
            try c.upload(ComputePath.picture(64, 48, .nv12, seed: 3), role: .primary)
            #expect(fences.waits.contains(Int(read[0])), "waited for \(read[0]) before writing its slot again: \(fences.waits)")
        }
    }
}
