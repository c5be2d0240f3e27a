import DiptychCore
import Testing
@testable import DiptychGPU

/// Overlay pictures (`GPUCompositor.setOverlay`, `DrawDescription.overlay`):
/// premultiplied RGBA drawn by the same passes as the streams, against a CPU
/// reference, compute equal to fragment, the direct-copy path too.
extension GPU {
    @Suite struct Overlays {
        static let canvas = PixelSize(width: 64, height: 48)
        static let background = RGBA8(r: 30, g: 60, b: 90)

        /// A 16×16 picture whose alpha runs 0...255 over the pixels (0 and
        /// 255 included), colours varying too.
        static func logo() -> VideoFrame {
            rgbaFrame(16, 16, padding: 12) { x, y in
                let i = y * 16 + x
                return RGBA8(r: UInt8((x * 16 + 7) % 256), g: UInt8((y * 16 + 3) % 256), b: UInt8((i * 37) % 256),
                             a: i == 255 ? 255 : UInt8(i))
            }
        }

        /// The CPU reference: the picture premultiplied as the compositor does,
        /// times opacity, over `below`, each step rounded to 8 bits as the passes round.
        static func over(_ p: RGBA8, opacity: Double, below: RGBA8) -> RGBA8 {
            let a = Int(p.a)
            func pm(_ c: UInt8) -> Double { Double((Int(c) * a + 127) / 255) / 255 * opacity }
            func q(_ v: Double) -> Double { (min(max(v, 0), 1) * 255).rounded() / 255 }
            let oa = q(Double(a) / 255 * opacity)
            func blend(_ c: UInt8, _ b: UInt8) -> UInt8 { UInt8((q(q(pm(c)) + Double(b) / 255 * (1 - oa)) * 255).rounded()) }
            return RGBA8(r: blend(p.r, below.r), g: blend(p.g, below.g), b: blend(p.b, below.b), a: UInt8((q(oa + Double(below.a) / 255 * (1 - oa)) * 255).rounded()))
        }

        static func plan(opacity: Double, destination: PixelRect = PixelRect(x: 8, y: 10, width: 16, height: 16)) -> CompositionPlan {
            CompositionPlan(canvas: canvas, background: color(background), draws: [
                DrawDescription(role: .primary, destination: PixelRect(x: 32, y: 0, width: 32, height: 48)),
                .overlay(7, destination: destination, opacity: opacity, zIndex: 1),
                // The same overlay again, over the stream.
                .overlay(7, destination: PixelRect(x: 40, y: 20, width: 16, height: 16), opacity: 1, zIndex: 2),
            ])
        }

        static let stream = RGBA8(r: 200, g: 180, b: 20)

        func rendered(_ c: GPUCompositor, _ plan: CompositionPlan) throws -> (nv12: VideoFrame, rgba: VideoFrame) {
            let out = try c.addOutput(canvas: plan.canvas)
            defer { c.removeOutput(out) }
            try c.upload(solidFrame(32, 48, Self.stream), role: .primary)
            try c.setOverlay(7, image: Self.logo())
            try c.render(output: out, plan: plan, pts: .zero)
            let nv12 = try #require(try c.flush().first)
            return (nv12, try c.previewRGBA(output: out))
        }

        /// Every pixel of both overlays, and around them, within ±1 of the
        /// CPU reference in RGBA and in BT.709 limited-range NV12, on both passes.
        @Test(arguments: [GPUPass.compute, .fragment]) func pixelsMatchTheCPUReference(_ pass: GPUPass) throws {
            let c = try makeCompositor(pass: pass)
            defer { c.shutdown() }
            let opacity = 0.8
            let (nv12, rgba) = try rendered(c, Self.plan(opacity: opacity))
            let logo = Self.logo()
            var ref = [[RGBA8]](repeating: [RGBA8](repeating: Self.background, count: 64), count: 48)
            for y in 0..<48 { for x in 32..<64 { ref[y][x] = Self.stream } }
            for y in 0..<16 { for x in 0..<16 { ref[10 + y][8 + x] = Self.over(logo.rgba(x, y), opacity: opacity, below: Self.background) } }
            for y in 0..<16 { for x in 0..<16 { ref[20 + y][40 + x] = Self.over(logo.rgba(x, y), opacity: 1, below: Self.stream) } }
            #expect(mismatches(rgba, ref, tolerance: 1) == [], "\(pass) RGBA")
            // NV12 (BT.709 limited): Y of every pixel, U and V of every 2×2 block, from the reference's RGB.
            let k = YUVCoefficients(matrix: .bt709, range: .limited)
            func rgb(_ p: RGBA8) -> (Double, Double, Double) { (Double(p.r) / 255, Double(p.g) / 255, Double(p.b) / 255) }
            var worst = (0, "-")
            for y in 0..<48 {
                for x in 0..<64 {
                    let (r, g, b) = rgb(ref[y][x])
                    let want = Int((k.yuv(r: r, g: g, b: b).y * 255).rounded())
                    let d = abs(Int(nv12.byte(plane: 0, x, y)) - want)
                    if d > worst.0 { worst = (d, "Y (\(x), \(y)): \(nv12.byte(plane: 0, x, y)) want \(want)") }
                }
            }
            for by in 0..<24 {
                for bx in 0..<32 {
                    var s = (0.0, 0.0, 0.0)
                    for (dx, dy) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                        let (r, g, b) = rgb(ref[2 * by + dy][2 * bx + dx])
                        s = (s.0 + r / 4, s.1 + g / 4, s.2 + b / 4)
                    }
                    let yuv = k.yuv(r: s.0, g: s.1, b: s.2)
                    for (i, want) in [Int((yuv.u * 255).rounded()), Int((yuv.v * 255).rounded())].enumerated() {
                        let got = Int(nv12.byte(plane: 1, 2 * bx + i, by))
                        if abs(got - want) > worst.0 { worst = (abs(got - want), "UV[\(i)] (\(bx), \(by)): \(got) want \(want)") }
                    }
                }
            }
            #expect(worst.0 <= 1, "\(pass) NV12: \(worst.1)")
            // A transparent pixel leaves what is below; an opaque one at opacity 1 replaces it.
            #expect(rgba.rgba(8, 10).close(to: Self.background, within: 0))
            #expect(rgba.rgba(55, 35).close(to: logo.rgba(15, 15), within: 1))
        }

        /// Scaled (bilinear) and 1:1, at several opacities, over NV12 and RGBA
        /// streams: the compute pass equals the fragment passes within ±1
        /// (±2 for translucent overlays over a detailed picture).
        @Test func computeEqualsFragment() throws {
            let pair = try ComputePath.Pair()
            for c in [pair.fragment, pair.compute] { try c.setOverlay(3, image: Self.logo()); try c.setOverlay(4, image: solidFrame(6, 4, RGBA8(r: 250, g: 10, b: 10, a: 128))) }
            defer { for c in [pair.fragment, pair.compute] { try? c.setOverlay(3, image: nil); try? c.setOverlay(4, image: nil) } }
            let canvas = ComputePath.canvas
            for format in [PixelFormat.nv12, .rgba] {
                for opacity in [1.0, 0.5, 0.25] {
                    let plan = CompositionPlan(canvas: canvas, background: color(RGBA8(r: 10, g: 20, b: 30)), draws: [
                        .overlay(4, destination: PixelRect(x: 0, y: 0, width: 128, height: 72), opacity: 1, zIndex: -1),
                        // The stream 1:1, so what differs is the overlays' (a filtered stream's own ±1 would add up under them).
                        DrawDescription(role: .primary, destination: PixelRect(x: 10, y: 6, width: 100, height: 56),
                                        crop: NormalizedRect(x: 0.125, y: 0.1, width: 100.0 / 160, height: 56.0 / 90)),
                        .overlay(3, destination: PixelRect(x: 4, y: 4, width: 16, height: 16), opacity: opacity, zIndex: 1),
                        .overlay(3, destination: PixelRect(x: 60, y: 30, width: 50, height: 34), opacity: opacity, zIndex: 2),
                        .overlay(4, destination: PixelRect(x: 90, y: 8, width: 30, height: 12), opacity: opacity, zIndex: 3),
                    ])
                    // Translucent over a detailed picture: each pass is within ±1 of the CPU
                    // (`pixelsMatchTheCPUReference`), and the picture beneath within ±1 of the
                    // other's, so the two may differ by 2 where both round the other way.
                    try pair.expectSame(plan, ComputePath.frames(format), "overlays over \(format) at \(opacity)",
                                        tolerance: opacity < 1 ? 2 : 1)
                }
            }
        }

        /// The software shortcut (direct copy) renders the overlays on the GPU
        /// over its copies: the same frame as the fragment pass, within ±1.
        @Test func directCopyDrawsOverlaysToo() throws {
            let direct = try GPUCompositor(selection: .software, directCopy: true)
            let plain = try makeCompositor(pass: .fragment)
            defer { direct.shutdown(); plain.shutdown() }
            let frame = ComputePath.picture(128, 72, .nv12, seed: 2)
            let plan = CompositionPlan(canvas: ComputePath.canvas, draws: [
                DrawDescription(role: .primary, destination: PixelRect(x: 0, y: 0, width: 128, height: 72)),
                .overlay(1, destination: PixelRect(x: 8, y: 8, width: 16, height: 16), opacity: 0.9, zIndex: 1),
            ])
            var got: [VideoFrame] = []
            for c in [direct, plain] {
                let out = try c.addOutput(canvas: plan.canvas)
                try c.upload(frame, role: .primary)
                try c.setOverlay(1, image: Self.logo())
                try c.render(output: out, plan: plan, pts: .zero)
                got.append(try #require(try c.flush().first))
            }
            #expect(direct.stats.framesDirect == 1)
            // Outside the overlay the stream is copied as it is; over it, the overlay as the fragment pass draws it.
            var worst = (0, "-")
            for y in 0..<72 {
                for x in 0..<128 {
                    let inside = (8..<24).contains(x) && (8..<24).contains(y)
                    let want = inside ? got[1].byte(plane: 0, x, y) : frame.byte(plane: 0, x, y)
                    let d = abs(Int(got[0].byte(plane: 0, x, y)) - Int(want))
                    if d > worst.0 { worst = (d, "Y (\(x), \(y)) \(inside ? "inside" : "outside")") }
                }
            }
            #expect(worst.0 <= 1, "direct copy: \(worst)")
        }

        /// An overlay at opacity 1 is not opaque on the direct copy: its
        /// transparent pixels show the stream of this frame, never the last
        /// frame's composite (frame after frame, as the fragment pass draws them).
        @Test func directCopyOverlayAtFullOpacityShowsTheStreamBeneath() throws {
            let direct = try GPUCompositor(selection: .software, directCopy: true)
            let plain = try makeCompositor(pass: .fragment)
            defer { direct.shutdown(); plain.shutdown() }
            let plan = CompositionPlan(canvas: ComputePath.canvas, draws: [
                DrawDescription(role: .primary, destination: PixelRect(x: 0, y: 0, width: 128, height: 72)),
                .overlay(1, destination: PixelRect(x: 8, y: 8, width: 16, height: 16), opacity: 1, zIndex: 1),
            ])
            var got: [[VideoFrame]] = [[], []]
            for (k, c) in [direct, plain].enumerated() {
                let out = try c.addOutput(canvas: plan.canvas)
                try c.setOverlay(1, image: Self.logo())
                for seed in 1...3 {
                    try c.upload(ComputePath.picture(128, 72, .nv12, seed: seed), role: .primary)
                    try c.render(output: out, plan: plan, pts: MediaTime(value: Int64(seed), timescale: 30))
                    got[k].append(try #require(try c.flush().first))
                }
            }
            #expect(direct.stats.framesDirect == 3)
            for i in 0..<3 {
                var worst = (0, "-")
                for y in 8..<24 {
                    for x in 8..<24 {
                        let d = abs(Int(got[0][i].byte(plane: 0, x, y)) - Int(got[1][i].byte(plane: 0, x, y)))
                        if d > worst.0 { worst = (d, "Y (\(x), \(y))") }
                    }
                }
                #expect(worst.0 <= 1, "frame \(i): \(worst)")
            }
        }

        /// A removed overlay's draws are skipped; a picture that is not RGBA,
        /// or larger than the GPU holds, is refused with a typed error and no GL error left.
        @Test func removedAndRefused() throws {
            let c = try makeCompositor()
            defer { c.shutdown() }
            let out = try c.addOutput(canvas: Self.canvas)
            try c.setOverlay(2, image: solidFrame(4, 4, RGBA8(r: 255, g: 0, b: 0)))
            let plan = CompositionPlan(canvas: Self.canvas, background: color(Self.background),
                                       draws: [.overlay(2, destination: PixelRect(x: 0, y: 0, width: 64, height: 48))])
            #expect(try renderPreview(c, out, plan).rgba(30, 30).close(to: RGBA8(r: 255, g: 0, b: 0), within: 0))
            try c.setOverlay(2, image: nil)
            #expect(try renderPreview(c, out, plan).rgba(30, 30).close(to: Self.background, within: 0))
            let yuv = yuvFrame(4, 4, format: .nv12, matrix: .bt709, range: .limited) { _, _ in (100, 128, 128) }
            #expect(throws: GPUError.self) { try c.setOverlay(2, image: yuv) }
            #expect(throws: GPUError.self) { try c.setOverlay(2, image: solidFrame(1, 40000, RGBA8(r: 1, g: 2, b: 3))) }
            #expect(try glErrorNow(c) == 0)
        }
    }
}
