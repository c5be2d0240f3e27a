import DiptychCore
import Foundation
import Testing
@testable import DiptychGPU

/// Pictures read in place (`DIPTYCH_GPU_PICTURES=in-place`; NV12, RGBA,
/// BGRA): the compute pass reads the staged bytes from the staging slot and
/// filters them itself. Frames equal those from textures within ±1 but for a few
/// samples at ±2 (GL's filtering rounds its weights its own way), for every
/// rotation and mirror, scaled and 1:1; I420 frames still go through textures; a slot is held
/// while its picture is current and reused only after the frames that read it.
extension GPU {
    @Suite struct InPlacePictures {
        static let canvas = PixelSize(width: 160, height: 90)

        private func compositor(inPlace: Bool, device: Bool = false, hooks: GPUTestHooks = GPUTestHooks(),
                                uploadDepth: Int? = nil) throws -> GPUCompositor {
            var h = hooks
            h.pictures = inPlace ? (device ? .device : .inPlace) : nil
            return try makeCompositor(hooks: h, readbackDepth: 3, uploadDepth: uploadDepth, pass: .compute)
        }

        /// The frames of `count` steps: a new primary every step, a new secondary every other one.
        private func run(_ c: GPUCompositor, plan: CompositionPlan, count: Int, primary: PixelFormat = .nv12,
                         secondary: PixelFormat = .nv12) throws -> [VideoFrame] {
            let out = try c.addOutput(canvas: plan.canvas)
            var got: [VideoFrame] = []
            for i in 0..<count {
                var uploads = [(ComputePath.picture(160, 90, primary, seed: i), StreamRole.primary)]
                if i % 2 == 0 { uploads.append((ComputePath.picture(96, 54, secondary, seed: 50 + i), .secondary)) }
                got += try c.composite(uploads: uploads, output: out, plan: plan, pts: MediaTime(value: Int64(i), timescale: 30))
            }
            got += try c.flush()
            return got
        }

        private func plan(_ o: Orientation, primary: PixelSize = PixelSize(width: 160, height: 90)) -> CompositionPlan {
            Layout(kind: .pip, pip: PiPPlacement(size: 0.45), insetStyle: DrawStyle(cornerRadius: 6, borderWidth: 2))
                .resolve(canvas: Self.canvas, primary: StreamGeometry(sensorSize: primary),
                         secondary: StreamGeometry(sensorSize: PixelSize(width: 96, height: 54), orientation: o))
        }

        /// Within ±2 everywhere and ±1 but for a few samples: GL's filter
        /// rounds its weights its own way, and where a filtered sample meets
        /// the inset's masked edge one step can become two.
        private func expectClose(_ a: [VideoFrame], _ b: [VideoFrame], _ label: String) {
            #expect(a.count == b.count, "\(label): \(a.count) against \(b.count) frames")
            for (i, (x, y)) in zip(a, b).enumerated() {
                let (d, at) = ComputePath.nv12Difference(x, y)
                let p = GPU.CUDAUploads.nv12Bytes(x), q = GPU.CUDAUploads.nv12Bytes(y)
                let overOne = zip(p, q).filter { abs(Int($0) - Int($1)) > 1 }.count
                #expect(d <= 2 && overOne <= 4, "\(label), frame \(i): differs by \(d) at \(at), \(overOne) samples by more than 1")
            }
        }

        /// Read from the staging slot (`in-place`), and from device copies (`device`).
        @Test(arguments: [false, true])
        func everyRotationAndMirrorMatchesTextures(_ device: Bool) throws {
            let gl = try compositor(inPlace: false)
            defer { gl.shutdown() }
            let c = try compositor(inPlace: true, device: device)
            defer { c.shutdown() }
            #expect(c.paths.picturesInPlace && c.paths.picturesCopiedToDevice == device
                    && c.paths.description.contains(device ? "pictures read from device copies" : "pictures read in place"), "\(c.paths)")
            for o in ComputePath.orientations {
                let p = plan(o)
                expectClose(try run(c, plan: p, count: 3), try run(gl, plan: p, count: 3), "inset \(o)")
            }
            // A cropped, turned primary filling the canvas, and a 1:1 one (read texel by texel).
            let turned = Layout.stacked.resolve(canvas: Self.canvas,
                                                primary: StreamGeometry(sensorSize: PixelSize(width: 160, height: 90),
                                                                        orientation: Orientation(rotation: .r90, mirrored: true)),
                                                secondary: StreamGeometry(sensorSize: PixelSize(width: 96, height: 54)))
            expectClose(try run(c, plan: turned, count: 2), try run(gl, plan: turned, count: 2), "stacked, primary turned")
            let oneToOne = plan(Orientation(rotation: .r0, mirrored: true))
            expectClose(try run(c, plan: oneToOne, count: 2), try run(gl, plan: oneToOne, count: 2), "1:1 primary")
            // Read in place, no upload at all; device copies count as uploads (buffer copies).
            #expect(device ? c.stats.upload.count == gl.stats.upload.count : c.stats.upload.count < gl.stats.upload.count,
                    "uploads: \(c.stats.upload.count) against \(gl.stats.upload.count)")
        }

        /// RGBA and BGRA pictures are read in place too, from the slot and
        /// from device copies, in every rotation and mirror, with no upload.
        @Test(arguments: [false, true])
        func rgbaAndBGRAMatchTextures(_ device: Bool) throws {
            for format in [PixelFormat.rgba, .bgra] {
                let gl = try compositor(inPlace: false)
                let c = try compositor(inPlace: true, device: device)
                for o in ComputePath.orientations {
                    expectClose(try run(c, plan: plan(o), count: 3, primary: format, secondary: format),
                                try run(gl, plan: plan(o), count: 3, primary: format, secondary: format), "\(format), inset \(o)")
                }
                let oneToOne = plan(Orientation(rotation: .r0, mirrored: true))
                expectClose(try run(c, plan: oneToOne, count: 2, primary: format, secondary: .nv12),
                            try run(gl, plan: oneToOne, count: 2, primary: format, secondary: .nv12), "\(format) 1:1 primary")
                #expect(device ? c.stats.upload.count == gl.stats.upload.count : c.stats.upload.count == 0,
                        "\(format) uploads: \(c.stats.upload.count) against \(gl.stats.upload.count)")
                c.shutdown()
                gl.shutdown()
            }
        }

        /// I420 keeps its textures, beside a picture read in place.
        @Test func i420StillUsesTextures() throws {
            let p = plan(Orientation(rotation: .r180, mirrored: false))
            let gl = try compositor(inPlace: false)
            let expected = try run(gl, plan: p, count: 4, secondary: .i420)
            gl.shutdown()
            let c = try compositor(inPlace: true)
            let got = try run(c, plan: p, count: 4, secondary: .i420)
            #expect(c.stats.upload.count > 0, "the I420 secondary's textures were uploaded")
            c.shutdown()
            expectClose(got, expected, "NV12 primary in place, I420 secondary through textures")
        }

        /// The held slots never exhaust the ring (a shallow one included), and
        /// are reused once the frames that read them are done: many frames
        /// with the secondary staying current across two of them.
        @Test func heldSlotsComeBack() throws {
            let p = plan(Orientation(rotation: .r0, mirrored: true))
            let gl = try compositor(inPlace: false)
            let expected = try run(gl, plan: p, count: 24)
            gl.shutdown()
            let c = try compositor(inPlace: true, uploadDepth: 4)
            defer { c.shutdown() }
            expectClose(try run(c, plan: p, count: 24), expected, "24 frames through a ring of 4 slots")
            let held = try c.withRenderer { r throws(GPUError) in r.staging.slots.filter(\.held).count }
            #expect(held == 2, "one held slot per role's current picture: \(held)")
        }

        /// Device copies: no slot is held, a role's buffers are reused (at
        /// most the pool's sets), and every one is deleted at shutdown; a
        /// role turning to I420 lets its buffers go.
        @Test func deviceCopiesAreReusedAndFreed() throws {
            let p = plan(Orientation(rotation: .r90, mirrored: true))
            let gl = try compositor(inPlace: false)
            let expected = try run(gl, plan: p, count: 24)
            gl.shutdown()
            let deleted = DeletedBuffers()
            var hooks = GPUTestHooks(onDelete: { kind, ids in if kind == .buffer { deleted.add(ids) } })
            hooks.pictures = .device
            let c = try makeCompositor(hooks: hooks, readbackDepth: 3, uploadDepth: 2, pass: .compute)
            expectClose(try run(c, plan: p, count: 24), expected, "24 frames from device copies, a ring of 2 slots")
            let (held, buffers) = try c.withRenderer { r throws(GPUError) in
                (r.staging.slots.filter(\.held).count,
                 StreamRole.allCases.flatMap { r.textures.streams[$0]!.pool.compactMap { $0.inPlace?.ownsBuffer == true ? $0.inPlace!.buffer : nil } })
            }
            #expect(held == 0 && !buffers.isEmpty && buffers.count <= 2 * 5, "held \(held), device buffers \(buffers.count)")
            _ = try run(c, plan: p, count: 2, secondary: .i420)
            c.shutdown()
            #expect(Set(buffers).isSubset(of: deleted.ids), "every device buffer deleted")
        }

        final class DeletedBuffers: @unchecked Sendable {
            private let lock = NSLock()
            private var all = Set<UInt32>()
            func add(_ ids: [UInt32]) { lock.lock(); all.formUnion(ids); lock.unlock() }
            var ids: Set<UInt32> { lock.lock(); defer { lock.unlock() }; return all }
        }

        /// A ring too shallow to hold pictures (fewer than four slots), and the
        /// fragment path, keep textures.
        @Test func notTakenWhereItCannotBe() throws {
            let shallow = try compositor(inPlace: true, uploadDepth: 3)
            #expect(!shallow.paths.picturesInPlace)
            shallow.shutdown()
            var h = GPUTestHooks()
            h.pictures = .inPlace
            let fragment = try makeCompositor(hooks: h, readbackDepth: 3, pass: .fragment)
            #expect(!fragment.paths.picturesInPlace)
            fragment.shutdown()
        }

        /// NV12 staged in imported memory (CUDA's, here mapped files) is read in place too.
        @Test func importedStagingIsReadInPlace() throws {
            let probe = try makeCompositor()
            let supported = probe.info.capabilities.memoryObjectFD
            probe.shutdown()
            guard supported else { Issue.record("llvmpipe lacks GL_EXT_memory_object_fd"); return }
            let p = plan(Orientation(rotation: .r270, mirrored: true))
            let gl = try compositor(inPlace: false)
            let expected = try run(gl, plan: p, count: 5)
            gl.shutdown()
            let ledger = MemfdMemory.Ledger()
            var hooks = GPUTestHooks(exportedMemory: MemfdMemory.source(ledger))
            hooks.importedStaging = true
            hooks.importedReadback = false
            let c = try compositor(inPlace: true, hooks: hooks)
            #expect(c.paths.picturesInPlace && c.paths.uploadsThrough != nil, "\(c.paths)")
            expectClose(try run(c, plan: p, count: 5), expected, "imported staging read in place")
            #expect(ledger.copiesIn == 8, "every picture copied in once: \(ledger.copiesIn)")
            c.shutdown()
            #expect(ledger.live == 0)

            // NVDEC's road: NV12 CUDA frames copied device to device into the
            // imported slots, read in place: no interop map, holders let go at once.
            let interop = HostInterop(), released = HostCUDAFrame.Released()
            var cudaHooks = hooks
            cudaHooks.cudaCalls = { _ in interop }
            let k = try compositor(inPlace: true, hooks: cudaHooks)
            defer { k.shutdown() }
            let out = try k.addOutput(canvas: Self.canvas)
            var got: [VideoFrame] = []
            for i in 0..<5 {
                let f = HostCUDAFrame(ComputePath.picture(160, 90, .nv12, seed: i), released: released)
                try k.upload(f.frame, holder: f, role: .primary)
                if i % 2 == 0 {
                    let g = HostCUDAFrame(ComputePath.picture(96, 54, .nv12, seed: 50 + i), released: released)
                    try k.upload(g.frame, holder: g, role: .secondary)
                }
                try k.render(output: out, plan: p, pts: MediaTime(value: Int64(i), timescale: 30))
                got += try k.nextNV12(wait: false).map { [$0] } ?? []
            }
            got += try k.flush()
            expectClose(got, expected, "NV12 CUDA frames read in place")
            #expect(interop.maps.isEmpty && released.count == 8, "no map; every holder let go: \(interop.maps.count), \(released.count)")
        }
    }
}
