import CGLES
import DiptychCore
import Foundation
import Testing
@testable import DiptychGPU

extension GPU {
    /// The encoder target's conversion (nv12planes.frag into R8 and GR88
    /// planes) on llvmpipe, with planes in GL's own memory: llvmpipe imports
    /// no dma-buf, so the planes of a real target are what differs.
    @Suite struct EncoderTargets {
        /// The planes hold exactly the NV12 frame the readback path delivers
        /// for the same render (fragment path: the same arithmetic), and the
        /// CPU reference within one code value (compute path too).
        @Test(arguments: [GPUPass.fragment, .compute],
              [(PixelSize(width: 64, height: 48), ColorMatrix.bt709, ColorRange.limited),
               (PixelSize(width: 38, height: 20), .bt709, .limited),
               (PixelSize(width: 30, height: 18), .bt601, .full)])
        func planesMatchTheReadback(pass: GPUPass, _ c: (PixelSize, ColorMatrix, ColorRange)) throws {
            let (canvas, matrix, range) = c
            let gpu = try makeCompositor(pass: pass)
            defer { gpu.shutdown() }
            let out = try gpu.addOutput(canvas: canvas, matrix: matrix, range: range)
            let target = try gpu.addHostEncoderTarget(output: out)
            var rng = LCG(state: 7)
            let noise = rgbaFrame(canvas.width, canvas.height) { _, _ in RGBA8(r: rng.next(), g: rng.next(), b: rng.next()) }
            try gpu.upload(noise, role: .primary)
            let plan = CompositionPlan(canvas: canvas, draws: [DrawDescription(role: .primary, destination: PixelRect(size: canvas))])
            let pts = MediaTime(value: 3, timescale: 30)
            try gpu.render(output: out, plan: plan, pts: pts)
            let readback = try #require(try gpu.nextNV12(wait: true))
            let serial = try gpu.renderEncoderTarget(target)
            #expect(try gpu.encoderTargetDone(serial, wait: true))
            let planes = try gpu.readEncoderTarget(target)
            #expect(planes.pts == pts && planes.matrix == matrix && planes.range == range)
            let rgba = try gpu.previewRGBA(output: out)
            let ref = Conversion.referenceNV12(rgba, matrix: matrix, range: range)
            var differ = 0, worst = 0
            for (plane, rows, bytes) in [(0, canvas.height, canvas.width), (1, canvas.height / 2, canvas.width)] {
                for y in 0..<rows {
                    for x in 0..<bytes {
                        let v = Int(planes.byte(plane: plane, x, y))
                        if v != Int(readback.byte(plane: plane, x, y)) { differ += 1 }
                        worst = max(worst, abs(v - Int(plane == 0 ? ref.y[y][x] : ref.uv[y][x])))
                    }
                }
            }
            if pass == .fragment { #expect(differ == 0, "\(differ) bytes differ from the readback") }
            #expect(worst <= 1, "largest difference from the CPU reference: \(worst) code values")
            #expect(try glErrorNow(gpu) == GL.noError)
        }

        /// Several frames into a ring of two targets: each fence completes, and
        /// each target keeps the frame converted into it.
        @Test func eachTargetKeepsItsFrame() throws {
            let gpu = try makeCompositor(pass: .fragment)
            defer { gpu.shutdown() }
            let canvas = PixelSize(width: 32, height: 16)
            let out = try gpu.addOutput(canvas: canvas)
            let targets = [try gpu.addHostEncoderTarget(output: out), try gpu.addHostEncoderTarget(output: out)]
            #expect(targets[0] != targets[1])
            let plan = CompositionPlan(canvas: canvas, draws: [DrawDescription(role: .primary, destination: PixelRect(size: canvas))])
            var serials: [UInt64] = []
            for (i, shade) in [UInt8(40), 200].enumerated() {
                try gpu.upload(solidFrame(32, 16, RGBA8(r: shade, g: shade, b: shade)), role: .primary)
                try gpu.render(output: out, plan: plan, pts: .zero, readback: false)
                serials.append(try gpu.renderEncoderTarget(targets[i]))
            }
            #expect(serials[1] > serials[0])
            #expect(try gpu.encoderTargetDone(serials[1], wait: true) && gpu.encoderTargetDone(serials[0], wait: false))
            let first = try gpu.readEncoderTarget(targets[0]), second = try gpu.readEncoderTarget(targets[1])
            #expect(first.byte(plane: 0, 5, 5) < second.byte(plane: 0, 5, 5))
            #expect(first.byte(plane: 1, 4, 3) == 128 && second.byte(plane: 1, 5, 3) == 128)  // grey: no chroma
        }

        /// A removed target's textures and framebuffers are deleted once the
        /// GPU is done with them, with the output's, and none twice.
        @Test func removalDeletesOnce() throws {
            let deleted = DeletionCounts()
            let gpu = try makeCompositor(hooks: GPUTestHooks(onDelete: { kind, ids in deleted.add(kind, ids) }), pass: .fragment)
            defer { gpu.shutdown() }
            let out = try gpu.addOutput(canvas: PixelSize(width: 16, height: 16))
            let kept = try gpu.addHostEncoderTarget(output: out), gone = try gpu.addHostEncoderTarget(output: out)
            _ = kept
            try gpu.upload(solidFrame(16, 16, RGBA8(r: 1, g: 2, b: 3)), role: .primary)
            try gpu.render(output: out, plan: CompositionPlan(canvas: PixelSize(width: 16, height: 16), draws: []), pts: .zero, readback: false)
            let serial = try gpu.renderEncoderTarget(gone)
            gpu.removeEncoderTarget(gone)
            _ = try gpu.encoderTargetDone(serial, wait: true)
            gpu.removeOutput(out)
            gpu.shutdown()
            #expect(deleted.count(.framebuffer) >= 4 && deleted.count(.texture) >= 4)
            #expect(deleted.duplicates.isEmpty, "deleted twice: \(deleted.duplicates)")
        }

        /// What llvmpipe offers: no GBM, so no render node; a dma-buf it
        /// cannot import is a typed error that leaves no GL error behind.
        @Test func softwareRendererRefusesCleanly() throws {
            let gpu = try makeCompositor(pass: .fragment)
            defer { gpu.shutdown() }
            let support = gpu.encoderTargetSupport()
            #expect(support.platform != .gbm && support.renderNode == nil)
            let out = try gpu.addOutput(canvas: PixelSize(width: 16, height: 16))
            let bogus = DmaBufFrame(width: 16, height: 16, fourcc: DmaBufFrame.nv12, modifier: 0,
                                    planes: [.init(fd: 9999, stride: 64), .init(fd: 9999, offset: 1024, stride: 64)])
            #expect(throws: GPUError.self) { _ = try gpu.addEncoderTarget(bogus, output: out) }
            let rgba = DmaBufFrame(width: 16, height: 16, fourcc: DmaBufFrame.abgr8888, planes: [.init(fd: 0, stride: 64)])
            #expect(throws: GPUError.badFrame("encoder target: NV12 of 2 planes and even size expected, got AB24 16x16 with 1 planes")) {
                _ = try gpu.addEncoderTarget(rgba, output: out)
            }
            let small = try gpu.addOutput(canvas: PixelSize(width: 8, height: 8))
            _ = small
            #expect(try glErrorNow(gpu) == GL.noError)
        }
    }
}

/// GBM's side, as far as a machine without a render node goes.
@Suite struct EncoderBufferTests {
    /// Debian's libgbm has every call the allocator makes (a misspelt symbol fails here, not on a GPU server).
    @Test func libgbmHasEveryCall() throws {
        guard case .success(let gbm) = GBMBufferLibrary.shared else {
            Issue.record("libgbm.so.1 does not load: \(GBMBufferLibrary.shared)"); return
        }
        #expect(gbm.createWithModifiers != nil, "gbm_bo_create_with_modifiers2 (Mesa 21.3)")
    }

    @Test func allocatorNeedsTheRenderNode() {
        #expect(throws: GPUError.deviceUnavailable("open /nonexistent/renderD128: No such file or directory")) {
            _ = try EncoderBufferAllocator(renderNode: "/nonexistent/renderD128")
        }
    }

    @Test(arguments: [(1080, 1088), (720, 736), (1088, 1088), (2, 32), (2160, 2176)])
    func planesArePaddedForTheEncoder(height: Int, padded: Int) {
        #expect(EncoderBufferAllocator.paddedHeight(height) == padded)
    }

    @Test func layoutsToTry() {
        #expect(EncoderBufferLayout.candidates(modifier: 0) == [.nv12, .stacked, .planes])
        #expect(EncoderBufferLayout.candidates(modifier: 0x0100_0000_0000_0002) == [.nv12, .planes])
    }
}

/// Every deletion the renderer makes, by kind.
final class DeletionCounts: @unchecked Sendable {
    private let lock = NSLock()
    private var ids: [GLResourceKind: [UInt32]] = [:]
    func add(_ kind: GLResourceKind, _ list: [UInt32]) { lock.lock(); ids[kind, default: []] += list; lock.unlock() }
    func count(_ kind: GLResourceKind) -> Int { lock.lock(); defer { lock.unlock() }; return ids[kind]?.count ?? 0 }
    var duplicates: [String] {
        lock.lock(); defer { lock.unlock() }
        return ids.flatMap { kind, list in Dictionary(grouping: list, by: { $0 }).filter { $0.value.count > 1 }.map { "\(kind) \($0.key)" } }
    }
}
