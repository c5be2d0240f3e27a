import DiptychCore
import Foundation
import Testing
@testable import DiptychGPU

extension GPU {
    @Suite struct Masks {
        /// Signed distance of a pixel centre (local coordinates) to a rounded rectangle.
        static func distance(_ lx: Double, _ ly: Double, w: Double, h: Double, radius: Double) -> Double {
            let hx = w / 2, hy = h / 2
            let r = min(radius, min(hx, hy))
            let qx = abs(lx - hx) - (hx - r), qy = abs(ly - hy) - (hy - r)
            return (max(qx, 0) * max(qx, 0) + max(qy, 0) * max(qy, 0)).squareRoot() + min(max(qx, qy), 0) - r
        }

        @Test(arguments: [(8.0, 2.0), (0.0, 3.0), (6.0, 0.0), (16.0, 1.0)])
        func roundedCornersAndBorder(_ radius: Double, _ border: Double) throws {
            let c = try makeCompositor()
            defer { c.shutdown() }
            let canvas = PixelSize(width: 64, height: 48)
            let out = try c.addOutput(canvas: canvas)
            let picture = RGBA8(r: 0, g: 200, b: 0), bg = RGBA8(r: 10, g: 20, b: 30), borderColor = RGBA8(r: 250, g: 0, b: 0)
            try c.upload(solidFrame(32, 32, picture), role: .primary)
            let dest = PixelRect(x: 16, y: 8, width: 32, height: 32)
            let img = try renderPreview(c, out, CompositionPlan(canvas: canvas, background: color(bg), draws: [
                DrawDescription(role: .primary, destination: dest, cornerRadius: radius, borderWidth: border, borderColor: color(borderColor))]))
            var checked = 0
            for y in 0..<canvas.height {
                for x in 0..<canvas.width {
                    let lx = Double(x - dest.x) + 0.5, ly = Double(y - dest.y) + 0.5
                    let want: RGBA8
                    if !dest.contains(x: Double(x) + 0.5, y: Double(y) + 0.5) {
                        want = bg
                    } else {
                        let d = Self.distance(lx, ly, w: 32, h: 32, radius: radius)
                        if d >= 0.51 { want = bg }
                        else if d <= -0.51 && (border == 0 || d + border <= -0.51) { want = picture }
                        else if d <= -0.51 && d + border >= 0.51 { want = borderColor }
                        else { continue }   // antialiased edge
                    }
                    checked += 1
                    #expect(img.rgba(x, y) == want, "(\(x),\(y)) r=\(radius) b=\(border)")
                    if img.rgba(x, y) != want { return }
                }
            }
            #expect(checked > canvas.width * canvas.height * 3 / 4)
            // Known pixels: the destination's corner pixel is outside a rounded corner,
            // the left edge's middle is border (when there is one), the centre is picture.
            if radius >= 2 { #expect(img.rgba(16, 8) == bg) }
            if border >= 1 && radius <= 8 { #expect(img.rgba(16, 24) == borderColor) }
            #expect(img.rgba(32, 24) == picture)
        }

        @Test(arguments: [0.5, 0.25, 0.0, 1.0])
        func opacityBlendsOverTheCanvas(_ opacity: Double) throws {
            let c = try makeCompositor()
            defer { c.shutdown() }
            let canvas = PixelSize(width: 32, height: 16)
            let out = try c.addOutput(canvas: canvas)
            let under = RGBA8(r: 200, g: 100, b: 50), over = RGBA8(r: 0, g: 40, b: 250)
            try c.upload(solidFrame(32, 16, under), role: .primary)
            try c.upload(solidFrame(16, 8, over), role: .secondary)
            let img = try renderPreview(c, out, CompositionPlan(canvas: canvas, draws: [
                DrawDescription(role: .primary, destination: PixelRect(size: canvas)),
                DrawDescription(role: .secondary, destination: PixelRect(x: 8, y: 4, width: 16, height: 8), opacity: opacity, zIndex: 1)]))
            func mix(_ a: UInt8, _ b: UInt8) -> UInt8 { UInt8((Double(a) * opacity + Double(b) * (1 - opacity)).rounded()) }
            let want = RGBA8(r: mix(over.r, under.r), g: mix(over.g, under.g), b: mix(over.b, under.b))
            #expect(img.rgba(12, 6).close(to: want, within: 1), "\(img.rgba(12, 6)) vs \(want)")
            #expect(img.rgba(12, 6).a == 255)
            #expect(img.rgba(2, 2) == under)
        }

        @Test func backgroundColour() throws {
            let c = try makeCompositor()
            defer { c.shutdown() }
            let canvas = PixelSize(width: 10, height: 6)
            let out = try c.addOutput(canvas: canvas)
            let img = try renderPreview(c, out, CompositionPlan(canvas: canvas, background: RGBAColor(r: 1, g: 0.5, b: 0), draws: []))
            #expect(img.rgba(0, 0).close(to: RGBA8(r: 255, g: 128, b: 0), within: 1))
            #expect(img.rgba(9, 5) == img.rgba(0, 0))
        }

        @Test func perDrawUniformsDoNotLeak() throws {
            // Three draws of one program with different opacities, radii and
            // borders: each must keep its own values.
            let c = try makeCompositor()
            defer { c.shutdown() }
            let canvas = PixelSize(width: 48, height: 16)
            let out = try c.addOutput(canvas: canvas)
            try c.upload(solidFrame(16, 16, RGBA8(r: 255, g: 255, b: 255)), role: .primary)
            let img = try renderPreview(c, out, CompositionPlan(canvas: canvas, draws: [
                DrawDescription(role: .primary, destination: PixelRect(x: 0, y: 0, width: 16, height: 16), opacity: 1, borderWidth: 1, borderColor: RGBAColor(r: 1, g: 0, b: 0)),
                DrawDescription(role: .primary, destination: PixelRect(x: 16, y: 0, width: 16, height: 16), opacity: 0.5, borderWidth: 3, borderColor: RGBAColor(r: 0, g: 0, b: 1)),
                DrawDescription(role: .primary, destination: PixelRect(x: 32, y: 0, width: 16, height: 16), opacity: 1, cornerRadius: 8),
            ]))
            #expect(img.rgba(0, 8) == RGBA8(r: 255, g: 0, b: 0))
            #expect(img.rgba(1, 8) == RGBA8(r: 255, g: 255, b: 255))
            #expect(img.rgba(18, 8).close(to: RGBA8(r: 0, g: 0, b: 128), within: 1))
            #expect(img.rgba(19, 8).close(to: RGBA8(r: 128, g: 128, b: 128), within: 1))
            #expect(img.rgba(32, 0) == RGBA8(r: 0, g: 0, b: 0))
            #expect(img.rgba(40, 8) == RGBA8(r: 255, g: 255, b: 255))
        }
    }
}
