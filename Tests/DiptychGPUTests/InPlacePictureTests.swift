import DiptychCore
import DiptychCUDA
import Foundation
import Synchronization
import Testing
@testable import DiptychGPU

/// A decoder's picture in a shareable allocation of its own, as NVDEC's pool
/// leaves it (luma at byte 0, chroma after it, rows wider than the picture);
/// here a mapped file llvmpipe imports, its mapping standing for the device address.
final class MemfdPicture: CUDAPictureHolder, @unchecked Sendable {
    final class Memory: ShareableDeviceMemory, @unchecked Sendable {
        let file: MemfdMemory
        /// Its export fails (a driver that will not share it).
        let unshareable: Bool
        init(_ file: MemfdMemory, unshareable: Bool) { self.file = file; self.unshareable = unshareable }
        var address: UInt64 { file.address }
        var size: Int { file.size }
        var device: Int { 0 }
        func exportDescriptor() throws(CUDAError) -> Int32 {
            if unshareable { throw CUDAError(call: "cuMemExportToShareableHandle", code: 1, name: "refused (test)") }
            do throws(GPUError) { return try file.exportDescriptor() } catch { throw CUDAError(call: "dup", code: -1, name: "\(error)") }
        }
    }
    let memory: Memory
    let frame: CUDAFrame
    var sharedMemory: (any ShareableDeviceMemory)? { memory }

    init(_ nv12: VideoFrame, ledger: MemfdMemory.Ledger, unshareable: Bool = false) throws {
        let pitch = nv12.width + 20, uvOffset = pitch * nv12.height + 64
        let file = try MemfdMemory(bytes: uvOffset + pitch * nv12.height / 2, ledger: ledger)
        for (plane, count) in [(0, nv12.height), (1, nv12.height / 2)] {
            var rows: [UInt8] = []
            for y in 0..<count { for x in 0..<pitch { rows.append(x < nv12.width ? nv12.byte(plane: plane, x, y) : 0xee) } }
            try rows.withUnsafeBytes { source in
                try file.copyIn([PlaneTransfer(source: .host(source.baseAddress!), pitch: pitch, rowBytes: pitch, rows: count,
                                               offset: plane == 0 ? 0 : uvOffset, dstPitch: pitch)])
            }
        }
        memory = Memory(file, unshareable: unshareable)
        frame = CUDAFrame(width: nv12.width, height: nv12.height, format: .nv12,
                          planes: [.init(address: file.address, pitch: pitch), .init(address: file.address + UInt64(uvOffset), pitch: pitch)],
                          device: 0, matrix: nv12.matrix, range: nv12.range)
    }
    func download() -> VideoFrame? { nil }
}

/// Pictures read in place (NV12, I420, RGBA, BGRA staged in imported memory: CUDA's
/// on NVIDIA, here llvmpipe importing mapped files): the compute pass reads
/// the staged bytes from the staging slot and filters them itself. Frames equal those from textures within ±1 but for a few
/// samples at ±2 (GL's filtering rounds its weights its own way), for every
/// rotation and mirror, scaled and 1:1; a slot is held
/// while its picture is current and reused only after the frames that read it.
extension GPU {
    @Suite struct InPlacePictures {
        static let canvas = PixelSize(width: 160, height: 90)

        /// Textures from GL's mapped staging, or (`inPlace`) the planner's
        /// default where staging is imported: pictures read in place.
        private func compositor(inPlace: Bool, hooks: GPUTestHooks? = nil, ledger: MemfdMemory.Ledger = MemfdMemory.Ledger(),
                                uploadDepth: Int? = nil, pass: GPUPass = .compute) throws -> GPUCompositor {
            guard inPlace else { return try makeCompositor(hooks: hooks ?? GPUTestHooks(), readbackDepth: 3, uploadDepth: uploadDepth, pass: pass) }
            return try makeCompositor(hooks: hooks ?? GPUTestHooks(exportedMemory: MemfdMemory.source(ledger)), request: .stagingOnly,
                                      readbackDepth: 3, uploadDepth: uploadDepth, pass: pass)
        }

        /// llvmpipe imports memory (GL_EXT_memory_object_fd) in the Mesa builds this runs on.
        static let imports: Bool = {
            guard let c = try? makeCompositor() else { return false }
            defer { c.shutdown() }
            return c.info.capabilities.memoryObjectFD
        }()

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

        /// Read from the imported staging slot.
        @Test(.enabled(if: GPU.InPlacePictures.imports, "needs GL_EXT_memory_object_fd"))
        func everyRotationAndMirrorMatchesTextures() throws {
            let gl = try compositor(inPlace: false)
            defer { gl.shutdown() }
            let c = try compositor(inPlace: true)
            defer { c.shutdown() }
            #expect(c.plan.pictures == .inPlace && c.plan.staging == .cudaImported && c.plan.description.contains("pictures=in-place"),
                    "\(c.plan)")
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
            // Read in place, no upload at all.
            #expect(c.stats.upload.count < gl.stats.upload.count, "uploads: \(c.stats.upload.count) against \(gl.stats.upload.count)")
        }

        /// `DIPTYCH_GPU_PICTURES=in-place` with GL's mapped staging: the
        /// pass reads each picture where the CPU wrote it, with no upload, and
        /// the frames match textures as above, NV12, I420 and RGBA.
        @Test func readFromMappedStagingMatchesTextures() throws {
            let gl = try compositor(inPlace: false)
            defer { gl.shutdown() }
            var request = GPURequest.readbackOnly
            request.pictures = .inPlace
            let c = try makeCompositor(request: request, readbackDepth: 3)
            defer { c.shutdown() }
            #expect(c.plan.pictures == .inPlace && c.plan.staging == .mappedBuffers, "\(c.plan)")
            for o in ComputePath.orientations {
                expectClose(try run(c, plan: plan(o), count: 3), try run(gl, plan: plan(o), count: 3), "mapped, inset \(o)")
            }
            for format in [PixelFormat.i420, .rgba] {
                let p = plan(Orientation(rotation: .r90, mirrored: false))
                expectClose(try run(c, plan: p, count: 3, primary: format, secondary: format),
                            try run(gl, plan: p, count: 3, primary: format, secondary: format), "mapped, \(format)")
            }
            #expect(c.stats.upload.count < gl.stats.upload.count, "uploads: \(c.stats.upload.count) against \(gl.stats.upload.count)")
        }

        /// RGBA and BGRA pictures are read in place too, in every rotation
        /// and mirror, with no upload.
        @Test(.enabled(if: GPU.InPlacePictures.imports, "needs GL_EXT_memory_object_fd"))
        func rgbaAndBGRAMatchTextures() throws {
            for format in [PixelFormat.rgba, .bgra] {
                let gl = try compositor(inPlace: false)
                let c = try compositor(inPlace: true)
                for o in ComputePath.orientations {
                    expectClose(try run(c, plan: plan(o), count: 3, primary: format, secondary: format),
                                try run(gl, plan: plan(o), count: 3, primary: format, secondary: format), "\(format), inset \(o)")
                }
                let oneToOne = plan(Orientation(rotation: .r0, mirrored: true))
                expectClose(try run(c, plan: oneToOne, count: 2, primary: format, secondary: .nv12),
                            try run(gl, plan: oneToOne, count: 2, primary: format, secondary: .nv12), "\(format) 1:1 primary")
                #expect(c.stats.upload.count == 0, "\(format) uploads: \(c.stats.upload.count) against \(gl.stats.upload.count)")
                c.shutdown()
                gl.shutdown()
            }
        }

        /// I420 pictures are read in place too (their three planes), in every
        /// rotation and mirror, as primary and as secondary, with no upload.
        @Test(.enabled(if: GPU.InPlacePictures.imports, "needs GL_EXT_memory_object_fd")) func i420IsReadInPlace() throws {
            let gl = try compositor(inPlace: false)
            defer { gl.shutdown() }
            let c = try compositor(inPlace: true)
            defer { c.shutdown() }
            for o in ComputePath.orientations {
                expectClose(try run(c, plan: plan(o), count: 3, primary: .i420, secondary: .i420),
                            try run(gl, plan: plan(o), count: 3, primary: .i420, secondary: .i420), "I420, inset \(o)")
            }
            let oneToOne = plan(Orientation(rotation: .r0, mirrored: true))
            expectClose(try run(c, plan: oneToOne, count: 2, primary: .i420, secondary: .nv12),
                        try run(gl, plan: oneToOne, count: 2, primary: .i420, secondary: .nv12), "I420 1:1 primary beside NV12")
            #expect(gl.stats.upload.count > 0 && c.stats.upload.count == 0, "uploads: \(c.stats.upload.count) against \(gl.stats.upload.count)")
        }

        /// The held slots never exhaust the ring (a shallow one included), and
        /// are reused once the frames that read them are done: many frames
        /// with the secondary staying current across two of them.
        @Test(.enabled(if: GPU.InPlacePictures.imports, "needs GL_EXT_memory_object_fd")) func heldSlotsComeBack() throws {
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

        /// A ring too shallow to hold pictures (fewer than four slots), and the
        /// fragment path, keep textures.
        @Test(.enabled(if: GPU.InPlacePictures.imports, "needs GL_EXT_memory_object_fd"))
        func notTakenWhereItCannotBe() throws {
            let shallow = try compositor(inPlace: true, uploadDepth: 3)
            #expect(shallow.plan.staging == .cudaImported && shallow.plan.pictures == .textures
                    && shallow.plan.notTaken.contains("pictures in place: 3 staging slots (four needed)"), "\(shallow.plan)")
            shallow.shutdown()
            let fragment = try compositor(inPlace: true, pass: .fragment)
            #expect(fragment.plan.pictures == .textures
                    && fragment.plan.notTaken.contains("pictures in place: the fragment pass reads textures"), "\(fragment.plan)")
            fragment.shutdown()
        }

        /// NV12 staged in imported memory (CUDA's, here mapped files) is read in place too.
        @Test(.enabled(if: GPU.InPlacePictures.imports, "needs GL_EXT_memory_object_fd"))
        func importedStagingIsReadInPlace() throws {
            let p = plan(Orientation(rotation: .r270, mirrored: true))
            let gl = try compositor(inPlace: false)
            let expected = try run(gl, plan: p, count: 5)
            gl.shutdown()
            let ledger = MemfdMemory.Ledger()
            let hooks = GPUTestHooks(exportedMemory: MemfdMemory.source(ledger))
            let c = try compositor(inPlace: true, hooks: hooks)
            #expect(c.plan.pictures == .inPlace && c.plan.staging == .cudaImported && c.plan.readback == .mappedBuffers, "\(c.plan)")
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
            #expect(k.plan.cudaFrames == .staged, "\(k.plan)")
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

        /// A decoder's picture in a shareable allocation (NVDEC's pool) is
        /// read where it lies: the frames of the same pictures staged, nothing
        /// copied in and no interop map; each holder kept until the frames that
        /// read it have completed, and each allocation's import let go once it
        /// has gone.
        @Test(.enabled(if: GPU.InPlacePictures.imports, "needs GL_EXT_memory_object_fd"))
        func decodersPicturesAreReadWhereTheyLie() throws {
            let p = plan(Orientation(rotation: .r90, mirrored: false))
            let ledger = MemfdMemory.Ledger(), pictures = MemfdMemory.Ledger()
            let interop = HostInterop()
            var hooks = GPUTestHooks(exportedMemory: MemfdMemory.source(ledger))
            hooks.cudaCalls = { _ in interop }
            let staged = try compositor(inPlace: true, hooks: hooks)
            let expected = try run(staged, plan: p, count: 6)
            staged.shutdown()
            let copied = ledger.copiesIn
            let k = try compositor(inPlace: true, hooks: hooks)
            defer { k.shutdown() }
            #expect(k.plan.cudaFrames == .staged && k.plan.pictures == .inPlace, "\(k.plan)")
            let out = try k.addOutput(canvas: Self.canvas)
            var got: [VideoFrame] = []
            weak var first: MemfdPicture.Memory?
            for i in 0..<6 {
                let f = try MemfdPicture(ComputePath.picture(160, 90, .nv12, seed: i), ledger: pictures)
                if i == 0 { first = f.memory }
                try k.upload(f.frame, holder: f, role: .primary)
                if i % 2 == 0 {
                    let g = try MemfdPicture(ComputePath.picture(96, 54, .nv12, seed: 50 + i), ledger: pictures)
                    try k.upload(g.frame, holder: g, role: .secondary)
                }
                try k.render(output: out, plan: p, pts: MediaTime(value: Int64(i), timescale: 30))
                if i == 0 { #expect(first != nil, "the current picture's holder is kept") }
                got += try k.nextNV12(wait: false).map { [$0] } ?? []
            }
            got += try k.flush()
            #expect(got.count == expected.count && zip(got, expected).allSatisfy { GPU.CUDAUploads.nv12Bytes($0) == GPU.CUDAUploads.nv12Bytes($1) },
                    "the frames of the same pictures staged, byte for byte")
            #expect(ledger.copiesIn == copied && interop.maps.isEmpty, "nothing copied in, no map: \(ledger.copiesIn - copied), \(interop.maps.count)")
            try k.withRenderer { r in r.timeline.poll() }
            #expect(first == nil && pictures.live == 2, "replaced pictures let go once their frames completed: \(pictures.live) live")
            // The next import lets go of the imports of allocations that have gone.
            let last = try MemfdPicture(ComputePath.picture(160, 90, .nv12, seed: 9), ledger: pictures)
            try k.upload(last.frame, holder: last, role: .primary)
            try k.render(output: out, plan: p, pts: MediaTime(value: 6, timescale: 30))
            _ = try k.flush()
            let imports = try k.withRenderer { r in r.pictureImports?.count ?? -1 }
            #expect(imports >= 2 && imports <= 3, "imports held: \(imports)")
        }

        /// A decoder's picture whose allocation cannot be imported is copied
        /// into staging instead (said once), with the same frames.
        @Test(.enabled(if: GPU.InPlacePictures.imports, "needs GL_EXT_memory_object_fd"))
        func aPictureThatCannotBeImportedIsStaged() throws {
            let p = plan(Orientation(rotation: .r0, mirrored: true))
            let ledger = MemfdMemory.Ledger(), pictures = MemfdMemory.Ledger()
            var hooks = GPUTestHooks(exportedMemory: MemfdMemory.source(ledger))
            hooks.cudaCalls = { _ in HostInterop() }
            let staged = try compositor(inPlace: true, hooks: hooks)
            let expected = try run(staged, plan: p, count: 4)
            staged.shutdown()
            let copied = ledger.copiesIn
            let lines = Mutex<[String]>([])
            let k = try makeCompositor(hooks: hooks, request: .stagingOnly, readbackDepth: 3, log: { l in lines.withLock { $0.append(l) } })
            defer { k.shutdown() }
            let out = try k.addOutput(canvas: Self.canvas)
            var got: [VideoFrame] = []
            for i in 0..<4 {
                let f = try MemfdPicture(ComputePath.picture(160, 90, .nv12, seed: i), ledger: pictures, unshareable: true)
                try k.upload(f.frame, holder: f, role: .primary)
                if i % 2 == 0 {
                    let g = try MemfdPicture(ComputePath.picture(96, 54, .nv12, seed: 50 + i), ledger: pictures, unshareable: true)
                    try k.upload(g.frame, holder: g, role: .secondary)
                }
                try k.render(output: out, plan: p, pts: MediaTime(value: Int64(i), timescale: 30))
                got += try k.nextNV12(wait: false).map { [$0] } ?? []
            }
            got += try k.flush()
            #expect(got.count == expected.count && zip(got, expected).allSatisfy { GPU.CUDAUploads.nv12Bytes($0) == GPU.CUDAUploads.nv12Bytes($1) },
                    "the frames of the same pictures staged")
            #expect(ledger.copiesIn - copied == 6, "every picture copied into staging: \(ledger.copiesIn - copied)")
            let said = lines.withLock { $0.filter { $0.contains("could not be imported") } }
            #expect(said.count == 1 && said[0].contains("refused (test)"), "\(said)")
        }
    }
}
