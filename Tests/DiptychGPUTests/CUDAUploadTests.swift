import CGLES
import DiptychCore
import DiptychCUDA
import Foundation
import Testing
@testable import DiptychGPU

/// CUDA–GL interop where there is no CUDA: "device memory" is host memory,
/// a registered resource is the texture's name, and a copy into a mapped
/// array is a glTexSubImage2D into that texture. Records every call, and
/// fails on cue. Runs on the render thread, as the driver's calls do.
final class HostInterop: CUDAGLCalls, @unchecked Sendable {
    var ordinal: Int { 0 }
    var registered: [UInt32] = []
    var unregistered: [UInt32] = []
    /// Resources per map call.
    var maps: [Int] = []
    var copies = 0
    var failMap = false
    var synchronized = 0
    /// Resources per unmap call.
    var unmaps: [Int] = []
    /// Every call in order: "map N", "copy", "unmap N".
    var calls: [String] = []
    private(set) var mapped: Set<CUDAGraphicsResource> = []
    /// The textures mapped now.
    var mappedTextures: Set<UInt32> { Set(mapped.map { Self.texture($0.opaque) }) }

    func begin() throws(CUDAError) {}
    func end() {}
    static func texture(_ p: OpaquePointer) -> UInt32 { UInt32(UInt(bitPattern: UnsafeRawPointer(p))) }

    var failRegister = false
    func register(texture: UInt32) throws(CUDAError) -> CUDAGraphicsResource {
        if failRegister { throw CUDAError(call: "cuGraphicsGLRegisterImage(texture \(texture))", code: 999, name: "CUDA_ERROR_UNKNOWN") }
        registered.append(texture)
        return CUDAGraphicsResource(opaque: OpaquePointer(bitPattern: UInt(texture))!)
    }
    func unregister(_ r: CUDAGraphicsResource) {
        precondition(!mapped.contains(r), "unregistered while mapped")
        unregistered.append(Self.texture(r.opaque))
    }
    func map(_ resources: [CUDAGraphicsResource]) throws(CUDAError) {
        if failMap { throw CUDAError(call: "cuGraphicsMapResources(\(resources.count))", code: 999, name: "CUDA_ERROR_UNKNOWN") }
        maps.append(resources.count)
        calls.append("map \(resources.count)")
        precondition(mapped.isDisjoint(with: resources), "mapped twice")
        mapped.formUnion(resources)
    }
    func array(of r: CUDAGraphicsResource) throws(CUDAError) -> CUDAMappedArray {
        guard mapped.contains(r) else { throw CUDAError(call: "cuGraphicsSubResourceGetMappedArray", code: 702, name: "CUDA_ERROR_NOT_MAPPED") }
        return CUDAMappedArray(opaque: r.opaque)
    }
    func copy(_ c: CUDAPlaneCopy) throws(CUDAError) {
        let t = Self.texture(c.destination.opaque)
        glBindTexture(GL.texture2D, t)
        var internalFormat: GLint = 0
        glGetTexLevelParameteriv(GL.texture2D, 0, GLenum(GL_TEXTURE_INTERNAL_FORMAT), &internalFormat)
        let (format, type, bytes): (GLenum, GLenum, Int) = switch GLenum(internalFormat) {
        case GL.r8: (GL.red, GL.unsignedByte, 1)
        case GL.rg8: (GL.rg, GL.unsignedByte, 2)
        case GL.r16: (GL.red, GLenum(GL_UNSIGNED_SHORT), 2)
        default: (GL.rg, GLenum(GL_UNSIGNED_SHORT), 4)
        }
        glPixelStorei(GL.unpackAlignment, 1)
        glPixelStorei(GL.unpackRowLength, GLint(c.sourcePitch / bytes))
        glTexSubImage2D(GL.texture2D, 0, 0, 0, GLsizei(c.widthBytes / bytes), GLsizei(c.rows), format, type,
                        UnsafeRawPointer(bitPattern: UInt(c.source)))
        glPixelStorei(GL.unpackRowLength, 0)
        glBindTexture(GL.texture2D, 0)
        copies += 1
        calls.append("copy")
    }
    func unmap(_ resources: [CUDAGraphicsResource]) throws(CUDAError) {
        precondition(mapped.isSuperset(of: resources), "unmapped what is not mapped")
        unmaps.append(resources.count)
        calls.append("unmap \(resources.count)")
        mapped.subtract(resources)
    }
    func synchronize() { synchronized += 1 }
}

/// Host memory posing as a decoder's frame; counts its releases.
final class HostCUDAFrame: CUDAFrameHolder, @unchecked Sendable {
    let luma: UnsafeMutableRawPointer, chroma: UnsafeMutableRawPointer
    let frame: CUDAFrame
    let released: Released
    final class Released: @unchecked Sendable { var count = 0 }

    /// An NV12 (or, `p010`, the same samples << 8 in 16 bits) frame of `nv12`'s
    /// pixels with a row pitch wider than the picture.
    init(_ nv12: VideoFrame, p010: Bool = false, released: Released) {
        let bps = p010 ? 2 : 1, pitch = nv12.width * bps + 64
        luma = .allocate(byteCount: pitch * nv12.height, alignment: 64)
        chroma = .allocate(byteCount: pitch * nv12.height / 2, alignment: 64)
        for (plane, dst, rows) in [(0, luma, nv12.height), (1, chroma, nv12.height / 2)] {
            for y in 0..<rows {
                for x in 0..<nv12.width {
                    let v = nv12.byte(plane: plane, x, y)
                    if p010 { dst.storeBytes(of: UInt16(v) << 8, toByteOffset: y * pitch + x * 2, as: UInt16.self) }
                    else { dst.storeBytes(of: v, toByteOffset: y * pitch + x, as: UInt8.self) }
                }
            }
        }
        frame = CUDAFrame(width: nv12.width, height: nv12.height, format: p010 ? .p010 : .nv12,
                          planes: [.init(address: UInt64(UInt(bitPattern: luma)), pitch: pitch),
                                   .init(address: UInt64(UInt(bitPattern: chroma)), pitch: pitch)],
                          device: 0, matrix: nv12.matrix, range: nv12.range)
        self.released = released
    }
    deinit { luma.deallocate(); chroma.deallocate(); released.count += 1 }
    func download() -> VideoFrame? { nil }
}

extension GPU {
    @Suite struct CUDAUploads {
        static let canvas = PixelSize(width: 64, height: 48)
        static let plan = CompositionPlan(canvas: canvas, draws: [
            DrawDescription(role: .primary, destination: PixelRect(size: canvas)),
            DrawDescription(role: .secondary, destination: PixelRect(x: 32, y: 24, width: 32, height: 24),
                                orientation: Orientation(rotation: .r0, mirrored: true), zIndex: 1)])

        /// An NV12 frame with a distinct value at every sample.
        static func nv12(_ w: Int, _ h: Int, seed: Int) -> VideoFrame {
            let f = VideoFrame.allocate(width: w, height: h, format: .nv12)
            for (p, rows, cols) in [(0, h, w), (1, h / 2, w)] {
                let base = f.planes[p].storage.mutableBase.advanced(by: f.planes[p].offset).assumingMemoryBound(to: UInt8.self)
                for y in 0..<rows { for x in 0..<cols { base[y * f.planes[p].stride + x] = UInt8(16 + (x * 7 + y * 13 + seed * 31 + p * 50) % 220) } }
            }
            return f
        }

        static func nv12Bytes(_ f: VideoFrame) -> [UInt8] {
            var out: [UInt8] = []
            for (p, rows) in [(0, f.height), (1, f.height / 2)] { for y in 0..<rows { for x in 0..<f.width { out.append(f.byte(plane: p, x, y)) } } }
            return out
        }

        @Test func cudaFramesCompositeLikeTheSameFramesFromHostMemory() throws {
            let primary = Self.nv12(64, 48, seed: 1), secondary = Self.nv12(32, 24, seed: 2)
            let cpu = try makeCompositor()
            defer { cpu.shutdown() }
            let a = try cpu.addOutput(canvas: Self.canvas)
            try cpu.upload(primary, role: .primary)
            try cpu.upload(secondary, role: .secondary)
            try cpu.render(output: a, plan: Self.plan, pts: .zero)
            let expected = try #require(try cpu.flush().first)

            let interop = HostInterop(), released = HostCUDAFrame.Released()
            let c = try makeCompositor(hooks: GPUTestHooks(cudaCalls: { _ in interop }))
            defer { c.shutdown() }
            let b = try c.addOutput(canvas: Self.canvas)
            do {
                let q = HostCUDAFrame(secondary, released: released)
                try c.upload(q.frame, holder: q, role: .primary)
            }
            let p = HostCUDAFrame(primary, released: released), s = HostCUDAFrame(secondary, released: released)
            try c.upload(p.frame, holder: p, role: .primary)
            try c.upload(s.frame, holder: s, role: .secondary)
            #expect(released.count == 1, "a pending frame replaced before any hop is let go at once")
            try c.render(output: b, plan: Self.plan, pts: .zero)
            #expect(interop.maps == [4], "both frames' four planes in one map")
            #expect(interop.copies == 4 && interop.registered.count == 4)
            let got = try #require(try c.flush().first)
            #expect(Self.nv12Bytes(got) == Self.nv12Bytes(expected))
            #expect(try c.withRenderer { r in (r.timer.stats.cudaFrames, r.timer.stats.cudaMaps) } == (2, 1))
        }

        @Test func aFrameIsKeptUntilTheFenceAfterTheDrawsThatReadIt() throws {
            let fences = FakeFences(finishGL: true)
            let interop = HostInterop(), released = HostCUDAFrame.Released()
            let c = try makeCompositor(hooks: GPUTestHooks(fenceOps: fences.ops, cudaCalls: { _ in interop }), readbackDepth: 1)
            defer { c.shutdown() }
            let out = try c.addOutput(canvas: Self.canvas)
            for i in 0..<3 {
                let f = HostCUDAFrame(Self.nv12(64, 48, seed: i), released: released)
                try c.upload(f.frame, holder: f, role: .primary)
                try c.render(output: out, plan: Self.plan, pts: .zero, readback: false)
                try c.withRenderer { r in r.timeline.poll() }
                #expect(released.count == 0, "frame \(i) released before its fence")
            }
            #expect(interop.maps == [2, 2, 2])
            fences.signalAll()
            try c.withRenderer { r in r.timeline.poll() }
            #expect(released.count == 3)
            // The sets are registered once each; unregistered with their textures at shutdown.
            let sets = Set(interop.registered).count
            #expect(sets == interop.registered.count && sets <= 2 * 3)
            c.shutdown()
            #expect(Set(interop.unregistered) == Set(interop.registered))
        }

        @Test func tenBitFramesGoIntoSixteenBitTextures() throws {
            let probe = try makeCompositor()
            let norm16 = probe.info.capabilities.textureNorm16
            probe.shutdown()
            let primary = Self.nv12(64, 48, seed: 5)
            let interop = HostInterop(), released = HostCUDAFrame.Released()
            let c = try makeCompositor(hooks: GPUTestHooks(cudaCalls: { _ in interop }))
            defer { c.shutdown() }
            let out = try c.addOutput(canvas: Self.canvas)
            let f = HostCUDAFrame(primary, p010: true, released: released)
            try c.upload(f.frame, holder: f, role: .primary)
            let only = CompositionPlan(canvas: Self.canvas, draws: [DrawDescription(role: .primary, destination: PixelRect(size: Self.canvas))])
            guard norm16 else {
                #expect(throws: GPUError.cudaInterop("10-bit frames need GL_EXT_texture_norm16, which this GL context lacks")) {
                    try c.upload(f.frame, holder: f, role: .primary)
                }
                return
            }
            try c.render(output: out, plan: only, pts: .zero)
            let got = try #require(try c.flush().first)
            let cpu = try makeCompositor()
            defer { cpu.shutdown() }
            let a = try cpu.addOutput(canvas: Self.canvas)
            try cpu.upload(primary, role: .primary)
            try cpu.render(output: a, plan: only, pts: .zero)
            let expected = try #require(try cpu.flush().first)
            // v << 8 in 16 bits reads as v × 256 / 65535 of full scale, within 0.4 % of v / 255:
            // within two codes of the 8-bit frame's composite after the round trip through RGB.
            let worst = zip(Self.nv12Bytes(expected), Self.nv12Bytes(got)).map { abs(Int($0) - Int($1)) }.max() ?? 0
            #expect(worst <= 2)
            #expect(try c.withRenderer { r in r.streams[.primary]!.current!.sixteenBit })
        }

        @Test func aCopyThatFailsFailsTheRenderAndLeavesThePictureAsItWas() throws {
            let interop = HostInterop(), released = HostCUDAFrame.Released()
            let c = try makeCompositor(hooks: GPUTestHooks(cudaCalls: { _ in interop }))
            defer { c.shutdown() }
            let out = try c.addOutput(canvas: Self.canvas)
            let only = CompositionPlan(canvas: Self.canvas, draws: [DrawDescription(role: .primary, destination: PixelRect(size: Self.canvas))])
            let first = Self.nv12(64, 48, seed: 8)
            try c.upload(first, role: .primary)
            try c.render(output: out, plan: only, pts: .zero)
            let before = try #require(try c.flush().first)
            interop.failMap = true
            let f = HostCUDAFrame(Self.nv12(64, 48, seed: 9), released: released)
            try c.upload(f.frame, holder: f, role: .primary)
            #expect(throws: GPUError.cudaInterop("cuGraphicsMapResources(2) failed: CUDA_ERROR_UNKNOWN (999)")) {
                try c.render(output: out, plan: only, pts: .zero)
            }
            #expect(interop.synchronized > 0, "issued copies complete before the frames they read may go")
            #expect(try glErrorNow(c) == GL.noError)
            // The compositor goes on: a host upload renders as before.
            try c.upload(first, role: .primary)
            try c.render(output: out, plan: only, pts: .zero)
            #expect(Self.nv12Bytes(try #require(try c.flush().first)) == Self.nv12Bytes(before))
        }

        @Test func aFrameOnAnotherDeviceIsRefused() throws {
            let interop = HostInterop(), released = HostCUDAFrame.Released()
            let c = try makeCompositor(hooks: GPUTestHooks(cudaCalls: { _ in interop }))
            defer { c.shutdown() }
            let out = try c.addOutput(canvas: Self.canvas)
            let f = HostCUDAFrame(Self.nv12(64, 48, seed: 3), released: released)
            var other = f.frame
            other.device = 1
            try c.upload(f.frame, holder: f, role: .primary)
            try c.render(output: out, plan: Self.plan, pts: .zero, readback: false)
            try c.upload(other, holder: f, role: .primary)
            #expect(throws: GPUError.cudaInterop("the frame is on CUDA device 1, the compositor's GL context on device 0")) {
                try c.render(output: out, plan: Self.plan, pts: .zero, readback: false)
            }
            var odd = f.frame
            odd.width = 63
            #expect(throws: GPUError.badFrame("CUDA frame 63x48: width and height must be positive and even")) {
                try c.upload(odd, holder: f, role: .primary)
            }
        }
    }
}
