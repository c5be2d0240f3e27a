import DiptychCore
import DiptychText
import Foundation
import Testing
@testable import DiptychGPU

/// The font shipped with the tests (DejaVu Sans 2.37, Tests/Fixtures/Fonts,
/// its licence beside it).
let testFontPath = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Fixtures/Fonts/DejaVuSans.ttf").path

/// Text overlays set by `TextRenderer` (HarfBuzz and FreeType, loaded at run
/// time): ink where the font's own outlines put it, and the picture drawn as
/// an image overlay is, within ±1 of a CPU reference on both passes.
extension GPU {
    @Suite(.enabled(if: TextSupport.unavailableReason == nil, "needs libfreetype.so.6 and libharfbuzz.so.0 (Debian: libfreetype6, libharfbuzz0b)"))
    struct TextOverlays {
        static let font = try! FontFile(path: testFontPath)

        /// DejaVu Sans's design numbers (its head, hhea and glyf tables): 2048
        /// units an em, ascender 1901; H's box x 201...1339, y 0...1493; A's
        /// advance 1401, V's box x 16...1384.
        static let unitsPerEm = 2048.0

        func render(_ o: TextOverlay, _ text: String, canvas: PixelSize = PixelSize(width: 400, height: 240)) throws -> RenderedText {
            try #require(try TextRenderer(font: Self.font, overlay: o).render(text, canvas: canvas))
        }

        /// "H" at 100 pixels an em, anchored at the canvas's top-left: its ink
        /// is the glyph's box scaled (x 9.8...65.4) under a baseline at the
        /// ascender (1901 units, rounded up to 93 pixels), each edge within a pixel.
        @Test func inkBoundsFollowTheFont() throws {
            let size = 100.0
            let r = try render(TextOverlay(text: "H", x: 0, y: 0, size: Int(size), font: testFontPath), "H")
            let ink = try #require(r.inkBounds)
            let baseline = (1901 / Self.unitsPerEm * size).rounded(.up)
            #expect(abs(Double(ink.x) - 201 / Self.unitsPerEm * size) <= 1, "\(ink)")
            #expect(abs(Double(ink.maxX) - 1339 / Self.unitsPerEm * size) <= 1, "\(ink)")
            #expect(abs(Double(ink.y) - (baseline - 1493 / Self.unitsPerEm * size)) <= 1, "\(ink)")
            #expect(ink.maxY == Int(baseline), "\(ink)")
            // The picture is the ink padded to even edges (no box, no outline).
            #expect(r.destination.x % 2 == 0 && r.destination.y % 2 == 0 && r.destination.width % 2 == 0 && r.destination.height % 2 == 0)
            #expect(r.destination.x <= ink.x && r.destination.maxX >= ink.maxX && r.destination.maxX - ink.maxX <= 1)
            #expect(r.image.width == r.destination.width && r.image.height == r.destination.height)
        }

        /// HarfBuzz shapes: "AV" is kerned (V moves left of A's advance),
        /// and a second line sits one line height lower; centred and right
        /// alignments put the box's middle or right edge on the anchor.
        @Test func shapingLinesAndAlignment() throws {
            let size = 100.0
            let av = try #require(try render(TextOverlay(text: "AV", x: 0, y: 0, size: Int(size), font: testFontPath), "AV").inkBounds)
            let unkerned = (1401 + 1384) / Self.unitsPerEm * size
            #expect(Double(av.maxX) < unkerned - 2, "AV's ink ends at \(av.maxX), unkerned \(unkerned)")
            let one = try #require(try render(TextOverlay(text: "H", x: 0, y: 0, size: 40, font: testFontPath), "H").inkBounds)
            let two = try #require(try render(TextOverlay(text: "H", x: 0, y: 0, size: 40, font: testFontPath), "H\nH").inkBounds)
            #expect(two.x == one.x && two.width == one.width && two.y == one.y)
            #expect(abs(two.maxY - one.maxY - 47) <= 1, "line height of DejaVu Sans at 40 px is 46.6: \(one) \(two)")
            let canvas = PixelSize(width: 400, height: 240)
            let centred = try render(TextOverlay(text: "H", x: 0.5, y: 0.25, size: 40, font: testFontPath, box: .black, boxPadding: 4, align: .center), "H", canvas: canvas)
            #expect(abs((centred.destination.x + centred.destination.maxX) - 400) <= 2, "\(centred.destination)")
            #expect(centred.destination.y == 60)
            let right = try render(TextOverlay(text: "H", x: 1, y: 0, size: 40, font: testFontPath, box: .black, boxPadding: 4, align: .right), "H", canvas: canvas)
            #expect(right.destination.maxX == 400, "\(right.destination)")
        }

        /// A text with an outline and a box over a stream: every pixel within
        /// ±1 of the CPU reference (the rendered picture, premultiplied, at the
        /// draw's opacity over what is beneath), on the compute and the
        /// fragment pass, and the two passes within ±1 of each other.
        @Test func drawnAsAnImageOverlayOnBothPasses() throws {
            let canvas = PixelSize(width: 160, height: 96)
            let o = TextOverlay(text: "{frame}", x: 0.1, y: 0.2, size: 28, color: RGBAColor(hex: "FFD020")!, font: testFontPath,
                                outlineWidth: 2, outlineColor: .black, box: RGBAColor(hex: "2040A080")!, boxPadding: 4, opacity: 0.9)
            let r = try render(o, "Ag 42", canvas: canvas)
            let d = r.destination
            #expect(d.x == 16 && d.y >= 18 && d.y <= 20, "\(d)")
            let stream = RGBA8(r: 200, g: 180, b: 20), background = RGBA8(r: 30, g: 60, b: 90)
            let plan = CompositionPlan(canvas: canvas, background: color(background), draws: [
                DrawDescription(role: .primary, destination: PixelRect(x: 0, y: 0, width: 80, height: 96)),
                o.draw(id: 9, destination: d, order: 0),
            ])
            var ref = [[RGBA8]](repeating: [RGBA8](repeating: background, count: canvas.width), count: canvas.height)
            for y in 0..<canvas.height { for x in 0..<80 { ref[y][x] = stream } }
            let px = r.image.planes[0].baseAddress.assumingMemoryBound(to: UInt8.self)
            for y in 0..<d.height {
                for x in 0..<d.width {
                    let p = (0..<4).map { Double(px[4 * (y * d.width + x) + $0]) / 255 * o.opacity }
                    let below = ref[d.y + y][d.x + x]
                    func mix(_ c: Double, _ b: UInt8) -> UInt8 { UInt8(((c + Double(b) / 255 * (1 - p[3])) * 255).rounded()) }
                    ref[d.y + y][d.x + x] = RGBA8(r: mix(p[0], below.r), g: mix(p[1], below.g), b: mix(p[2], below.b), a: 255)
                }
            }
            var rendered: [VideoFrame] = []
            for pass in [GPUPass.compute, .fragment] {
                let c = try makeCompositor(pass: pass)
                defer { c.shutdown() }
                let out = try c.addOutput(canvas: canvas)
                try c.upload(solidFrame(80, 96, stream), role: .primary)
                try c.setOverlay(9, image: r.image, premultiplied: true)
                try c.render(output: out, plan: plan, pts: .zero)
                _ = try c.flush()
                let rgba = try c.previewRGBA(output: out)
                #expect(mismatches(rgba, ref, tolerance: 1) == [], "\(pass)")
                rendered.append(rgba)
            }
            var worst = 0
            for y in 0..<canvas.height {
                for x in 0..<canvas.width {
                    let a = rendered[0].rgba(x, y), b = rendered[1].rgba(x, y)
                    worst = max(worst, abs(Int(a.r) - Int(b.r)), abs(Int(a.g) - Int(b.g)), abs(Int(a.b) - Int(b.b)))
                }
            }
            #expect(worst <= 1, "compute and fragment differ by \(worst)")
            // The text's own colour shows, opaque glyph pixels at 0.9 over the box over the stream or background.
            #expect(rendered[0].rgba(d.x + 2, d.y + 2).close(to: ref[d.y + 2][d.x + 2], within: 1))
        }

        /// Over NV12 and RGBA streams, in NV12 and RGB: the compute pass
        /// equals the fragment pass within ±1 for texts with an outline and a
        /// translucent box, one running off the canvas.
        @Test func computeEqualsFragmentInNV12() throws {
            let pair = try ComputePath.Pair()
            let canvas = ComputePath.canvas
            let a = TextOverlay(text: "x", x: 0.05, y: 0.1, size: 18, color: RGBAColor(hex: "FFFFFF")!, font: testFontPath,
                                outlineWidth: 1.5, box: RGBAColor(hex: "10204080")!, boxPadding: 3)
            let b = TextOverlay(text: "x", x: 0.7, y: 0.6, size: 24, color: RGBAColor(hex: "20FF40C0")!, font: testFontPath, layer: .bottom)
            let ra = try render(a, "12:34:56 Äg", canvas: canvas), rb = try render(b, "Wide text", canvas: canvas)
            #expect(rb.destination.maxX == canvas.width)
            for c in [pair.fragment, pair.compute] {
                try c.setOverlay(21, image: ra.image, premultiplied: true)
                try c.setOverlay(22, image: rb.image, premultiplied: true)
            }
            defer { for c in [pair.fragment, pair.compute] { try? c.setOverlay(21, image: nil); try? c.setOverlay(22, image: nil) } }
            for format in [PixelFormat.nv12, .rgba] {
                let plan = CompositionPlan(canvas: canvas, background: color(RGBA8(r: 10, g: 20, b: 30)), draws: [
                    DrawDescription(role: .primary, destination: PixelRect(x: 10, y: 6, width: 100, height: 56),
                                    crop: NormalizedRect(x: 0.125, y: 0.1, width: 100.0 / 160, height: 56.0 / 90)),
                    a.draw(id: 21, destination: ra.destination, order: 0),
                    b.draw(id: 22, destination: rb.destination, order: 1),
                ])
                try pair.expectSame(plan, ComputePath.frames(format), "texts over \(format)", tolerance: 1)
            }
        }

        /// Cut to the canvas: a text running off the right edge keeps its
        /// pixels one to one (not squeezed), and one wholly off shows nothing.
        @Test func cutToTheCanvas() throws {
            let canvas = PixelSize(width: 120, height: 60)
            let o = TextOverlay(text: "x", x: 0.9, y: 0.1, size: 30, font: testFontPath)
            let renderer = try TextRenderer(font: Self.font, overlay: o)
            let r = try #require(try renderer.render("WWWW", canvas: canvas))
            #expect(r.destination.maxX == 120 && r.destination.x == 108)
            #expect(r.image.width == 12)
            #expect(try renderer.render("   ", canvas: canvas) == nil)
        }

        /// A file that is no font, and a missing one, are refused naming the file.
        @Test func badFontsAreRefused() throws {
            let junk = FileManager.default.temporaryDirectory.appendingPathComponent("diptych-not-a-font-\(getpid()).ttf").path
            _ = FileManager.default.createFile(atPath: junk, contents: Data("not a font".utf8))
            defer { try? FileManager.default.removeItem(atPath: junk) }
            do {
                _ = try FontFile(path: junk)
                Issue.record("a text file was taken for a font")
            } catch {
                guard case .font(let path, let why) = error else { Issue.record("\(error)"); return }
                #expect(path == junk && why.hasPrefix("is not a font FreeType reads (FreeType error 0x"), "\(why)")
            }
            #expect(throws: TextError.font(path: "/nonexistent/font.ttf", "cannot be read (No such file or directory)")) { try FontFile(path: "/nonexistent/font.ttf") }
        }
    }
}
