import DiptychCore
import Testing
@testable import DiptychGPU

extension GPU {
    @Suite struct Smoke {
        @Test func rendersOneFrame() throws {
            let c = try makeCompositor()
            defer { c.shutdown() }
            print(c.info)
            let out = try c.addOutput(canvas: PixelSize(width: 16, height: 8))
            try c.upload(coordinateFrame(16, 8, tag: 7), role: .primary)
            let plan = CompositionPlan(canvas: PixelSize(width: 16, height: 8),
                                       draws: [DrawDescription(role: .primary, destination: PixelRect(x: 0, y: 0, width: 16, height: 8))])
            try c.render(output: out, plan: plan, pts: MediaTime(value: 5, timescale: 30))
            let rgba = try c.previewRGBA(output: out)
            #expect(rgba.rgba(0, 0) == RGBA8(r: 0, g: 0, b: 7))
            #expect(rgba.rgba(15, 7) == RGBA8(r: 15, g: 7, b: 7))
            let nv = try #require(try c.nextNV12(wait: true))
            #expect(nv.pts == MediaTime(value: 5, timescale: 30))
            #expect(nv.format == .nv12)
            print(c.stats)
        }
    }
}
