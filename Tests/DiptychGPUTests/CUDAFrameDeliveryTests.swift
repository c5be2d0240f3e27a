import DiptychCore
import Foundation
import Glibc
import Testing
@testable import DiptychGPU

/// Host buffers standing in for an NVENC encoder's CUDA frames (their
/// addresses stand for device addresses, as `MemfdMemory` copies to them),
/// each lent once and counted; a row pitch wider than the frame's, as
/// FFmpeg's CUDA pool aligns its rows.
final class FrameLender: @unchecked Sendable {
    final class Frame { let base: UnsafeMutableRawPointer; init(_ n: Int) { base = .allocate(byteCount: n, alignment: 256) }; deinit { base.deallocate() } }
    let pitch: Int
    private let lock = NSLock()
    private(set) var lent = 0
    /// Lends nothing after this many (the pool is empty: host memory instead).
    var limit = Int.max

    init(pitch: Int) { self.pitch = pitch }

    var provider: CUDAFrameProvider {
        { [self] size in
            lock.lock(); defer { lock.unlock() }
            guard lent < limit else { return nil }
            lent += 1
            let f = Frame(pitch * size.height * 3 / 2)
            let base = UInt64(UInt(bitPattern: f.base))
            return CUDAFrameTarget(picture: CUDANV12Picture(luma: base, chroma: base + UInt64(pitch * size.height), pitch: pitch,
                                                            width: size.width, height: size.height), owner: f)
        }
    }

    /// A lent frame's NV12 bytes, row by row without the pitch's padding.
    static func bytes(_ t: CUDAFrameTarget) -> [UInt8] {
        let p = t.picture
        let base = UnsafeRawPointer(bitPattern: UInt(p.luma))!
        var out: [UInt8] = []
        for y in 0..<p.height { out += Array(UnsafeRawBufferPointer(start: base + y * p.pitch, count: p.width)) }
        let chroma = UnsafeRawPointer(bitPattern: UInt(p.chroma))!
        for y in 0..<p.height / 2 { out += Array(UnsafeRawBufferPointer(start: chroma + y * p.pitch, count: p.width)) }
        return out
    }
}

/// Frames an output's encoder takes in CUDA memory (NVENC,
/// docs/ARCHITECTURE.md, "Encoder paths"): with the readback in imported
/// CUDA memory, each frame is copied device to device into a CUDA frame the
/// encoder lends, never through host memory (here llvmpipe importing mapped
/// files, whose copies to "device" addresses are memcpy into host buffers).
extension GPU {
    @Suite struct CUDAFrameDelivery {
        static let canvas = PixelSize(width: 64, height: 48)

        /// Uploads and renders `count` frames; every readback as it comes.
        private func readbacks(_ c: GPUCompositor, out: OutputID, count: Int) throws -> [NV12Readback] {
            var got: [NV12Readback] = []
            for i in 0..<count {
                try c.upload(ComputePath.picture(64, 48, .nv12, seed: i), role: .primary)
                try c.upload(ComputePath.picture(32, 24, .i420, seed: 7 + i), role: .secondary)
                try c.render(output: out, plan: GPU.CUDAUploads.plan, pts: MediaTime(value: Int64(i), timescale: 30))
                while let r = try c.nextReadback(wait: false) { got.append(r) }
            }
            return got + (try c.flushReadbacks())
        }

        private func supported() throws -> Bool {
            let c = try makeCompositor()
            defer { c.shutdown() }
            return c.info.capabilities.memoryObjectFD
        }

        @Test(arguments: [GPUPass.compute, .fragment])
        func framesGoDeviceToDeviceIntoLentFrames(_ pass: GPUPass) throws {
            guard try supported() else { Issue.record("llvmpipe lacks GL_EXT_memory_object_fd"); return }
            let gl = try makeCompositor(readbackDepth: 3, pass: pass)
            let expected = try readbacks(gl, out: try gl.addOutput(canvas: Self.canvas), count: 7).map { GPU.CUDAUploads.nv12Bytes($0.frame) }
            gl.shutdown()
            let ledger = MemfdMemory.Ledger()
            let c = try makeCompositor(hooks: GPUTestHooks(exportedMemory: MemfdMemory.source(ledger)), request: .readbackOnly,
                                       readbackDepth: 3, pass: pass)
            defer { c.shutdown() }
            let out = try c.addOutput(canvas: Self.canvas)
            let lender = FrameLender(pitch: 128)
            #expect(c.setCUDAFrameProvider(output: out, lender.provider), "the readback is imported memory: \(c.plan)")
            let got = try readbacks(c, out: out, count: 7)
            #expect(got.count == 7 && got.allSatisfy { $0.device != nil && $0.frame.planes.isEmpty && $0.output == out })
            #expect(got.compactMap(\.device).map(FrameLender.bytes) == expected, "frames copied to the lent frames differ from GL's readback")
            #expect(got.map(\.frame.pts.value) == Array(0..<7))
            #expect(lender.lent == 7 && ledger.copies == 0 && ledger.planesToDevice == 14, "no copy to host memory, two planes a frame")
        }

        /// Where the encoder lends none (its pool is empty), or the provider
        /// is taken away, frames come in host memory as always; a compositor
        /// that reads back through GL's own buffers says it cannot take them.
        @Test func hostMemoryWhereNoFrameIsLent() throws {
            guard try supported() else { Issue.record("llvmpipe lacks GL_EXT_memory_object_fd"); return }
            let ledger = MemfdMemory.Ledger()
            let c = try makeCompositor(hooks: GPUTestHooks(exportedMemory: MemfdMemory.source(ledger)), request: .readbackOnly, readbackDepth: 3)
            defer { c.shutdown() }
            let out = try c.addOutput(canvas: Self.canvas)
            let lender = FrameLender(pitch: 64)
            lender.limit = 2
            c.setCUDAFrameProvider(output: out, lender.provider)
            let got = try readbacks(c, out: out, count: 5)
            #expect(got.map { $0.device != nil } == [true, true, false, false, false])
            #expect(got.dropFirst(2).allSatisfy { $0.frame.planes.count == 2 } && ledger.copies == 3)
            c.setCUDAFrameProvider(output: out, nil)
            lender.limit = .max
            #expect(try readbacks(c, out: out, count: 2).allSatisfy { $0.device == nil })
            let gl = try makeCompositor(readbackDepth: 2)
            defer { gl.shutdown() }
            #expect(!gl.setCUDAFrameProvider(output: try gl.addOutput(canvas: Self.canvas), lender.provider))
        }
    }
}
