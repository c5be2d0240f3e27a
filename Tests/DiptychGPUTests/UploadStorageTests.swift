import DiptychCore
import Foundation
import Testing
@testable import DiptychGPU

/// `GPUCompositor.copyIntoUploadStorage` (`makeUploadStorage`): where uploads are not staged in
/// imported CUDA memory (here, llvmpipe) it is ordinary memory, and a frame
/// whose planes point into it composites exactly as the same frame anywhere
/// else.
@Suite struct UploadStorageTests {
    @Test func framesInUploadStorageCompositeAsAnyOther() throws {
        let w = 64, h = 48
        let a = VideoFrame.allocate(width: w, height: h, format: .nv12)
        let n = a.planes[0].storage.count
        let p = a.planes[0].storage.mutableBase.assumingMemoryBound(to: UInt8.self)
        for i in 0..<n { p[i] = UInt8(truncatingIfNeeded: 16 + (i &* 7) % 220) }
        let c = try GPUCompositor(selection: .software, directCopy: .off)
        defer { c.shutdown() }
        let b = c.copyIntoUploadStorage(a)
        let s = b.planes[0].storage
        #expect(s !== a.planes[0].storage && b.planes.allSatisfy { $0.storage === s }, "the bytes were copied into upload storage")
        #expect(s.count == n && !s.pageLocked, "no CUDA here: ordinary memory")
        let canvas = PixelSize(width: w, height: h)
        let out = try c.addOutput(canvas: canvas)
        let plan = CompositionPlan(canvas: canvas, draws: [DrawDescription(role: .primary, destination: PixelRect(size: canvas))])
        var frames: [VideoFrame] = []
        for f in [a, b] {
            try c.upload(f, role: .primary)
            try c.render(output: out, plan: plan, pts: .zero)
            frames += try c.flush()
        }
        try #require(frames.count == 2)
        let (x, y) = (frames[0], frames[1])
        for k in 0..<2 {
            let rows = k == 0 ? h : h / 2
            for r in 0..<rows {
                let ra = x.planes[k].baseAddress + r * x.planes[k].stride, rb = y.planes[k].baseAddress + r * y.planes[k].stride
                #expect(memcmp(ra, rb, w) == 0, "plane \(k) row \(r)")
            }
        }
    }
}
