import DiptychCore
import Testing
@testable import DiptychGPU

extension GPU {
    /// Placements, rotations and mirrors checked pixel for pixel against the CPU reference.
    @Suite struct Layouts {
        struct Case: CustomStringConvertible, Sendable {
            var name: String
            var canvas: PixelSize
            var primary: PixelSize
            var secondary: PixelSize
            var draws: @Sendable (PixelSize, PixelSize) -> [DrawDescription]
            var description: String { name }
        }

        static let cases: [Case] = [
            Case(name: "primary-only", canvas: PixelSize(width: 64, height: 32), primary: PixelSize(width: 64, height: 32),
                 secondary: PixelSize(width: 16, height: 16)) { _, _ in
                [DrawDescription(role: .primary, destination: PixelRect(x: 0, y: 0, width: 64, height: 32))]
            },
            Case(name: "secondary-only", canvas: PixelSize(width: 64, height: 32), primary: PixelSize(width: 16, height: 16),
                 secondary: PixelSize(width: 64, height: 32)) { _, _ in
                [DrawDescription(role: .secondary, destination: PixelRect(x: 0, y: 0, width: 64, height: 32))]
            },
            Case(name: "side-by-side", canvas: PixelSize(width: 64, height: 32), primary: PixelSize(width: 64, height: 32),
                 secondary: PixelSize(width: 32, height: 32)) { p, s in
                [DrawDescription(role: .primary, destination: PixelRect(x: 0, y: 0, width: 32, height: 32),
                                 crop: aspectFillCrop(picture: p, destination: PixelSize(width: 32, height: 32))),
                 DrawDescription(role: .secondary, destination: PixelRect(x: 32, y: 0, width: 32, height: 32),
                                 orientation: Orientation(rotation: .r0, mirrored: true))]
            },
            Case(name: "stacked", canvas: PixelSize(width: 32, height: 64), primary: PixelSize(width: 32, height: 64),
                 secondary: PixelSize(width: 64, height: 32)) { p, s in
                [DrawDescription(role: .primary, destination: PixelRect(x: 0, y: 0, width: 32, height: 32),
                                 crop: aspectFillCrop(picture: p, destination: PixelSize(width: 32, height: 32))),
                 DrawDescription(role: .secondary, destination: PixelRect(x: 0, y: 32, width: 32, height: 32),
                                 crop: aspectFillCrop(picture: s, destination: PixelSize(width: 32, height: 32)))]
            },
            Case(name: "pip-bottom-right", canvas: PixelSize(width: 64, height: 32), primary: PixelSize(width: 64, height: 32),
                 secondary: PixelSize(width: 16, height: 8)) { _, _ in
                [DrawDescription(role: .secondary, destination: PixelRect(x: 46, y: 22, width: 16, height: 8), zIndex: 1),
                 DrawDescription(role: .primary, destination: PixelRect(x: 0, y: 0, width: 64, height: 32))]
            },
            Case(name: "pip-top-left-portrait", canvas: PixelSize(width: 32, height: 64), primary: PixelSize(width: 64, height: 32),
                 secondary: PixelSize(width: 8, height: 16)) { _, _ in
                // Primary is a landscape sensor turned upright by 90°, secondary a mirrored selfie.
                [DrawDescription(role: .primary, destination: PixelRect(x: 0, y: 0, width: 32, height: 64),
                                 orientation: Orientation(rotation: .r90)),
                 DrawDescription(role: .secondary, destination: PixelRect(x: 2, y: 2, width: 8, height: 16),
                                 orientation: Orientation(rotation: .r0, mirrored: true), zIndex: 1)]
            },
        ]

        @Test(arguments: cases)
        func placementIsPixelExact(_ k: Case) throws {
            let c = try makeCompositor()
            defer { c.shutdown() }
            let out = try c.addOutput(canvas: k.canvas)
            let pf = coordinateFrame(k.primary.width, k.primary.height, tag: 50)
            let sf = coordinateFrame(k.secondary.width, k.secondary.height, tag: 200)
            try c.upload(pf, role: .primary)
            try c.upload(sf, role: .secondary)
            let bg = RGBA8(r: 1, g: 2, b: 3)
            let draws = k.draws(k.primary, k.secondary)
            let plan = CompositionPlan(canvas: k.canvas, background: color(bg), draws: draws)
            let img = try renderPreview(c, out, plan)
            let ref = referenceComposite(canvas: k.canvas, background: bg,
                                         draws: draws.map { ($0, $0.role == .primary ? pf : sf) })
            #expect(mismatches(img, ref) == [], "\(k.name)")
            // The NV12 frame comes from the same target.
            try c.render(output: out, plan: plan, pts: .zero)
            let nv = try #require(try c.nextNV12(wait: true))
            #expect(nv.width == k.canvas.width && nv.height == k.canvas.height)
        }

        @Test func pipSolidColoursAndOrdering() throws {
            let c = try makeCompositor()
            defer { c.shutdown() }
            let canvas = PixelSize(width: 48, height: 32)
            let out = try c.addOutput(canvas: canvas)
            try c.upload(solidFrame(48, 32, RGBA8(r: 255, g: 0, b: 0)), role: .primary)
            try c.upload(solidFrame(12, 8, RGBA8(r: 0, g: 0, b: 255)), role: .secondary)
            let pip = PixelRect(x: 34, y: 22, width: 12, height: 8)
            // The secondary is listed first but has the higher zIndex: it must end on top.
            let plan = CompositionPlan(canvas: canvas, draws: [
                DrawDescription(role: .secondary, destination: pip, zIndex: 1),
                DrawDescription(role: .primary, destination: PixelRect(size: canvas)),
            ])
            let img = try renderPreview(c, out, plan)
            for y in 0..<32 {
                for x in 0..<48 {
                    let inPip = pip.contains(x: Double(x) + 0.5, y: Double(y) + 0.5)
                    #expect(img.rgba(x, y) == (inPip ? RGBA8(r: 0, g: 0, b: 255) : RGBA8(r: 255, g: 0, b: 0)), "(\(x),\(y))")
                    if img.rgba(x, y) != (inPip ? RGBA8(r: 0, g: 0, b: 255) : RGBA8(r: 255, g: 0, b: 0)) { return }
                }
            }
        }

        static let orientations: [Orientation] = Rotation.allCases.flatMap { r in [false, true].map { Orientation(rotation: r, mirrored: $0) } }

        /// Which sensor pixel lands on the upright picture's top-left and top-right
        /// corners, written out by hand from docs/ARCHITECTURE.md, "Explicit orientation" (independent of the reference).
        static func expectedCorners(_ o: Orientation, w: Int, h: Int) -> (topLeft: (Int, Int), topRight: (Int, Int)) {
            switch (o.rotation, o.mirrored) {
            case (.r0, false): return ((0, 0), (w - 1, 0))
            case (.r90, false): return ((0, h - 1), (0, 0))
            case (.r180, false): return ((w - 1, h - 1), (0, h - 1))
            case (.r270, false): return ((w - 1, 0), (w - 1, h - 1))
            case (.r0, true): return ((w - 1, 0), (0, 0))
            case (.r90, true): return ((0, 0), (0, h - 1))
            case (.r180, true): return ((0, h - 1), (w - 1, h - 1))
            case (.r270, true): return ((w - 1, h - 1), (w - 1, 0))
            }
        }

        @Test(arguments: orientations)
        func rotationAndMirror(_ o: Orientation) throws {
            let c = try makeCompositor()
            defer { c.shutdown() }
            let sensor = PixelSize(width: 32, height: 16)
            let upright = sensor.rotated(o.rotation)
            let canvas = PixelSize(width: 48, height: 40)
            let out = try c.addOutput(canvas: canvas)
            let f = coordinateFrame(sensor.width, sensor.height, tag: 9)
            try c.upload(f, role: .primary)
            let dest = PixelRect(x: 4, y: 6, width: upright.width, height: upright.height)
            let draw = DrawDescription(role: .primary, destination: dest, orientation: o)
            let plan = CompositionPlan(canvas: canvas, draws: [draw])
            let img = try renderPreview(c, out, plan)
            let ref = referenceComposite(canvas: canvas, background: RGBA8(r: 0, g: 0, b: 0), draws: [(draw, f)])
            #expect(mismatches(img, ref) == [], "\(o)")
            let (tl, tr) = Self.expectedCorners(o, w: sensor.width, h: sensor.height)
            #expect(img.rgba(dest.x, dest.y) == f.rgba(tl.0, tl.1), "top-left for \(o)")
            #expect(img.rgba(dest.maxX - 1, dest.y) == f.rgba(tr.0, tr.1), "top-right for \(o)")
        }

        @Test func aspectFillCropKeepsTheCentreColumns() throws {
            // A 64×32 landscape picture in a 16×32 column at scale 1 keeps
            // columns 24...39: 37.5 % cut on each side.
            let c = try makeCompositor()
            defer { c.shutdown() }
            let canvas = PixelSize(width: 16, height: 32)
            let out = try c.addOutput(canvas: canvas)
            let f = coordinateFrame(64, 32, tag: 1)
            try c.upload(f, role: .primary)
            let crop = aspectFillCrop(picture: PixelSize(width: 64, height: 32), destination: canvas)
            #expect(crop == NormalizedRect(x: 0.375, y: 0, width: 0.25, height: 1))
            let img = try renderPreview(c, out, CompositionPlan(canvas: canvas, draws: [
                DrawDescription(role: .primary, destination: PixelRect(size: canvas), crop: crop)]))
            #expect(img.rgba(0, 0).r == 24)
            #expect(img.rgba(15, 31).r == 39)
            let columns = Set((0..<16).flatMap { x in (0..<32).map { img.rgba(x, $0).r } })
            #expect(columns == Set(24...39))
        }

        @Test func aspectFillCropWhenScaled() throws {
            // 128×64 picture (stripes: 0-47 red, 48-79 green, 80-127 blue) into a
            // 16×32 column: scale 0.5, the crop keeps exactly the green stripe.
            let c = try makeCompositor()
            defer { c.shutdown() }
            let canvas = PixelSize(width: 16, height: 32)
            let out = try c.addOutput(canvas: canvas)
            try c.upload(rgbaFrame(128, 64) { x, _ in
                x < 48 ? RGBA8(r: 255, g: 0, b: 0) : x < 80 ? RGBA8(r: 0, g: 255, b: 0) : RGBA8(r: 0, g: 0, b: 255)
            }, role: .primary)
            let crop = aspectFillCrop(picture: PixelSize(width: 128, height: 64), destination: canvas)
            let img = try renderPreview(c, out, CompositionPlan(canvas: canvas, draws: [
                DrawDescription(role: .primary, destination: PixelRect(size: canvas), crop: crop)]))
            for y in 0..<32 { for x in 0..<16 { #expect(img.rgba(x, y) == RGBA8(r: 0, g: 255, b: 0), "(\(x),\(y))") } }
        }

        @Test func upscaledGradientIsLinear() throws {
            // 16-wide gradient (texel centres 8, 24, ... 248) doubled: pixel X = 8X + 4, clamped at the edges.
            let c = try makeCompositor()
            defer { c.shutdown() }
            let canvas = PixelSize(width: 32, height: 32)
            let out = try c.addOutput(canvas: canvas)
            try c.upload(rgbaFrame(16, 16) { x, y in RGBA8(r: UInt8(x * 16 + 8), g: UInt8(y * 16 + 8), b: 77) }, role: .primary)
            let img = try renderPreview(c, out, CompositionPlan(canvas: canvas, draws: [
                DrawDescription(role: .primary, destination: PixelRect(size: canvas))]))
            for y in 0..<32 {
                for x in 0..<32 {
                    let want = RGBA8(r: UInt8(min(max(8 * x + 4, 8), 248)), g: UInt8(min(max(8 * y + 4, 8), 248)), b: 77)
                    #expect(img.rgba(x, y).close(to: want, within: 1), "(\(x),\(y)) \(img.rgba(x, y)) vs \(want)")
                }
            }
        }

        @Test func twoOutputsShareTheStreamTextures() throws {
            let c = try makeCompositor()
            defer { c.shutdown() }
            let pf = coordinateFrame(32, 32, tag: 3), sf = coordinateFrame(32, 32, tag: 4)
            try c.upload(pf, role: .primary)
            try c.upload(sf, role: .secondary)
            let a = try c.addOutput(canvas: PixelSize(width: 64, height: 32))
            let b = try c.addOutput(canvas: PixelSize(width: 32, height: 64))
            let da = [DrawDescription(role: .primary, destination: PixelRect(x: 0, y: 0, width: 32, height: 32)),
                      DrawDescription(role: .secondary, destination: PixelRect(x: 32, y: 0, width: 32, height: 32))]
            let db = [DrawDescription(role: .secondary, destination: PixelRect(x: 0, y: 0, width: 32, height: 32)),
                      DrawDescription(role: .primary, destination: PixelRect(x: 0, y: 32, width: 32, height: 32), orientation: Orientation(rotation: .r180))]
            try c.render(output: a, plan: CompositionPlan(canvas: PixelSize(width: 64, height: 32), draws: da), pts: .zero)
            try c.render(output: b, plan: CompositionPlan(canvas: PixelSize(width: 32, height: 64), draws: db), pts: .zero)
            let ia = try c.previewRGBA(output: a), ib = try c.previewRGBA(output: b)
            #expect(mismatches(ia, referenceComposite(canvas: PixelSize(width: 64, height: 32), background: RGBA8(r: 0, g: 0, b: 0),
                                                      draws: da.map { ($0, $0.role == .primary ? pf : sf) })) == [])
            #expect(mismatches(ib, referenceComposite(canvas: PixelSize(width: 32, height: 64), background: RGBA8(r: 0, g: 0, b: 0),
                                                      draws: db.map { ($0, $0.role == .primary ? pf : sf) })) == [])
            let done = try c.flushReadbacks()
            #expect(done.map(\.output) == [a, b])
            #expect(done.map(\.frame.width) == [64, 32])
        }

        @Test func missingStreamIsSkippedAndBackgroundShows() throws {
            let c = try makeCompositor()
            defer { c.shutdown() }
            let canvas = PixelSize(width: 16, height: 16)
            let out = try c.addOutput(canvas: canvas)
            try c.upload(solidFrame(8, 8, RGBA8(r: 9, g: 9, b: 9)), role: .primary)
            c.clearStream(.primary)
            let bg = RGBA8(r: 30, g: 60, b: 90)
            let img = try renderPreview(c, out, CompositionPlan(canvas: canvas, background: color(bg), draws: [
                DrawDescription(role: .primary, destination: PixelRect(size: canvas)),
                DrawDescription(role: .secondary, destination: PixelRect(x: 0, y: 0, width: 8, height: 8))]))
            #expect(img.rgba(0, 0) == bg && img.rgba(15, 15) == bg)
        }
    }
}
