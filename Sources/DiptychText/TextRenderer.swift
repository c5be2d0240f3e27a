import CFreeType
import DiptychCore

/// A text set as a picture: premultiplied RGBA, one canvas pixel a pixel,
/// and where it goes on the canvas (even edges, within the canvas).
public struct RenderedText: Sendable {
    /// Premultiplied RGBA, tightly packed, `destination`'s size.
    public var image: VideoFrame
    /// Where on the canvas, in pixels.
    public var destination: PixelRect
    /// The text's own ink (its glyphs' coverage, no outline or box) on the
    /// canvas, before the picture was cut to the canvas; nil: no glyph has ink.
    public var inkBounds: PixelRect?
}

/// Sets one text overlay's texts (docs/ARCHITECTURE.md, "Overlays"): each
/// line shaped by HarfBuzz, each glyph rasterised by FreeType (and stroked
/// for the outline) once and kept, the lines laid out from the face's
/// ascender and line height, then the box, the outline and the glyphs
/// composited, premultiplied. Used by one thread; it has its own FreeType
/// library, so renderers on several threads share nothing.
public final class TextRenderer {
    public let overlay: TextOverlay
    private let face: FontFace
    private let hb: HarfBuzzFont
    private let buffer: HarfBuzzBuffer
    private let stroker: Stroker?
    /// Each glyph's coverage and outline coverage, by glyph index, and their bytes.
    private var glyphs: [UInt32: (fill: GlyphBitmap, outline: GlyphBitmap?)] = [:]
    private var cachedBytes = 0
    /// The face's ascender, descender (negative) and line height, in pixels.
    private let ascender: Double, descender: Double, lineHeight: Double

    /// Glyphs, and bytes of coverage, kept before the cache starts again (a
    /// template's digits stay well under both; a large size fills the bytes first).
    static let maximumCachedGlyphs = 512
    static let maximumCachedBytes = 32 << 20

    /// A renderer of `overlay`'s texts in `font`. Throws `.library` where
    /// FreeType or HarfBuzz cannot be loaded, `.font` where the font cannot be set at its size.
    public init(font: FontFile, overlay: TextOverlay) throws(TextError) {
        let lib = try TextLibrary.shared()
        self.overlay = overlay
        let library = try FreeTypeLibrary(lib)
        face = try FontFace(library: library, font: font)
        try face.setSize(overlay.size)
        hb = try HarfBuzzFont(face)
        buffer = try HarfBuzzBuffer(lib)
        stroker = overlay.outlineWidth > 0 ? try Stroker(library: library, radius: overlay.outlineWidth) : nil
        var a = 0, d = 0, h = 0
        diptych_ft_face_size_metrics(face.face, &a, &d, &h)
        ascender = Double(a) / 64; descender = Double(d) / 64; lineHeight = Double(h) / 64
    }

    /// `text` set on `canvas` at the overlay's anchor; nil where it shows
    /// nothing (no ink and no box, or all of it off the canvas).
    public func render(_ text: String, canvas: PixelSize) throws(TextError) -> RenderedText? {
        let anchor = overlay.anchor(in: canvas)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        // Shape each line: glyph indices with their pen positions, in 26.6 pixels.
        var shaped: [(glyphs: [(id: UInt32, x: Int, y: Int)], advance: Int)] = []
        for line in lines { shaped.append(shape(String(line))) }
        let blockWidth = Int((Double(shaped.map(\.advance).max() ?? 0) / 64).rounded(.up))
        let blockHeight = Int((ascender - descender + Double(lines.count - 1) * lineHeight).rounded(.up))
        let pad = overlay.padding
        let boxSize = (width: blockWidth + 2 * pad, height: blockHeight + 2 * pad)
        let boxX = anchor.x - (overlay.align == .left ? 0 : overlay.align == .center ? boxSize.width / 2 : boxSize.width)
        let box = PixelRect(x: boxX, y: anchor.y, width: boxSize.width, height: boxSize.height)

        // Place each glyph's coverage (pixels rounded from the pen).
        var placed: [(x: Int, y: Int, fill: GlyphBitmap, outline: GlyphBitmap?)] = []
        for (i, line) in shaped.enumerated() {
            let slack = (blockWidth * 64 - line.advance)
            let lineX = Double(box.x + pad) + Double(overlay.align == .left ? 0 : overlay.align == .center ? slack / 2 : slack) / 64
            let baseline = Double(box.y + pad) + ascender + Double(i) * lineHeight
            for g in line.glyphs {
                let bitmaps = try glyph(g.id)
                placed.append((Int((lineX + Double(g.x) / 64).rounded()), Int((baseline - Double(g.y) / 64).rounded()), bitmaps.fill, bitmaps.outline))
            }
        }
        func rect(_ p: (x: Int, y: Int), _ b: GlyphBitmap) -> PixelRect? {
            b.width > 0 && b.height > 0 ? PixelRect(x: p.x + b.left, y: p.y - b.top, width: b.width, height: b.height) : nil
        }
        var ink: PixelRect?, bounds: PixelRect?
        for p in placed {
            if let r = rect((p.x, p.y), p.fill) { ink = union(ink, r); bounds = union(bounds, r) }
            if let o = p.outline, let r = rect((p.x, p.y), o) { bounds = union(bounds, r) }
        }
        if overlay.box != nil { bounds = union(bounds, box) }
        guard let full = bounds else { return nil }
        // Even edges (the anchor is even), cut to the canvas.
        func down(_ v: Int) -> Int { v & ~1 }
        func up(_ v: Int) -> Int { (v + 1) & ~1 }
        let x0 = max(down(full.x), 0), y0 = max(down(full.y), 0)
        let x1 = min(up(full.maxX), canvas.width), y1 = min(up(full.maxY), canvas.height)
        guard x1 > x0, y1 > y0 else { return nil }
        let area = PixelRect(x: x0, y: y0, width: x1 - x0, height: y1 - y0)

        // Coverage planes of the glyphs and of their outlines over the area.
        let w = area.width, h = area.height
        var fill = [UInt8](repeating: 0, count: w * h)
        var outline = [UInt8](repeating: 0, count: stroker == nil ? 0 : w * h)
        func accumulate(_ b: GlyphBitmap, at p: (x: Int, y: Int), into plane: inout [UInt8]) {
            let ox = p.x + b.left - area.x, oy = p.y - b.top - area.y
            for gy in max(0, -oy)..<max(max(0, -oy), min(b.height, h - oy)) {
                let src = gy * b.width, dst = (oy + gy) * w + ox
                for gx in max(0, -ox)..<max(max(0, -ox), min(b.width, w - ox)) {
                    plane[dst + gx] = max(plane[dst + gx], b.coverage[src + gx])
                }
            }
        }
        for p in placed {
            accumulate(p.fill, at: (p.x, p.y), into: &fill)
            if let o = p.outline { accumulate(o, at: (p.x, p.y), into: &outline) }
        }
        // Box, outline, glyphs: each over the one before, premultiplied.
        let frame = VideoFrame.allocate(width: w, height: h, format: .rgba)
        let out = frame.planes[0].storage.mutableBase.assumingMemoryBound(to: UInt8.self)
        let text = premultiplied(overlay.color), rim = premultiplied(overlay.outlineColor)
        let back = overlay.box.map(premultiplied)
        let inBox = box.x - area.x..<box.maxX - area.x, inBoxRows = box.y - area.y..<box.maxY - area.y
        for y in 0..<h {
            for x in 0..<w {
                var c: SIMD4<Float> = .zero
                if let back, inBoxRows.contains(y), inBox.contains(x) { c = back }
                if !outline.isEmpty, outline[y * w + x] > 0 { c = over(rim, Float(outline[y * w + x]) / 255, c) }
                if fill[y * w + x] > 0 { c = over(text, Float(fill[y * w + x]) / 255, c) }
                let o = 4 * (y * w + x)
                for k in 0..<4 { out[o + k] = UInt8((c[k] * 255).rounded()) }
            }
        }
        return RenderedText(image: frame, destination: area, inkBounds: ink)
    }

    /// One line shaped: its glyphs' indices and pen positions (26.6), and its advance.
    private func shape(_ line: String) -> (glyphs: [(id: UInt32, x: Int, y: Int)], advance: Int) {
        guard !line.isEmpty else { return ([], 0) }
        let lib = face.library.lib
        lib.hbBufferReset(buffer.buffer)
        var line = line
        line.withUTF8 { u in
            u.withMemoryRebound(to: CChar.self) { lib.hbBufferAddUTF8(buffer.buffer, $0.baseAddress, Int32($0.count), 0, Int32($0.count)) }
        }
        lib.hbGuessSegmentProperties(buffer.buffer)
        lib.hbShape(hb.font, buffer.buffer, nil, 0)
        var n: UInt32 = 0, m: UInt32 = 0
        guard let infos = lib.hbGlyphInfos(buffer.buffer, &n), let positions = lib.hbGlyphPositions(buffer.buffer, &m) else { return ([], 0) }
        var out: [(id: UInt32, x: Int, y: Int)] = []
        var pen = 0, rise = 0
        for i in 0..<Int(min(n, m)) {
            let p = positions[i]
            out.append((infos[i].codepoint, pen + Int(p.x_offset), rise + Int(p.y_offset)))
            pen += Int(p.x_advance); rise += Int(p.y_advance)
        }
        return (out, pen)
    }

    /// Glyph `id`'s coverage, and its outline's, rasterised once.
    private func glyph(_ id: UInt32) throws(TextError) -> (fill: GlyphBitmap, outline: GlyphBitmap?) {
        if let g = glyphs[id] { return g }
        let lib = face.library.lib
        let e = lib.loadGlyph(face.face, id, Int32(DIPTYCH_FT_LOAD_NO_BITMAP))
        guard e == 0 else { throw .render("glyph \(id) of \(face.font.path) cannot be loaded: \(TextLibrary.describe(e))") }
        let fill = try FreeTypeGlyph(face).coverage()
        var outline: GlyphBitmap?
        if let stroker {
            let g = try FreeTypeGlyph(face)
            try g.stroke(stroker)
            outline = try g.coverage()
        }
        let bytes = fill.coverage.count + (outline?.coverage.count ?? 0)
        if glyphs.count >= Self.maximumCachedGlyphs || cachedBytes + bytes > Self.maximumCachedBytes {
            glyphs.removeAll(keepingCapacity: true)
            cachedBytes = 0
        }
        glyphs[id] = (fill, outline)
        cachedBytes += bytes
        return (fill, outline)
    }

    private func union(_ a: PixelRect?, _ b: PixelRect) -> PixelRect {
        guard let a else { return b }
        let x = min(a.x, b.x), y = min(a.y, b.y)
        return PixelRect(x: x, y: y, width: max(a.maxX, b.maxX) - x, height: max(a.maxY, b.maxY) - y)
    }

    private func premultiplied(_ c: RGBAColor) -> SIMD4<Float> {
        SIMD4(Float(c.r * c.a), Float(c.g * c.a), Float(c.b * c.a), Float(c.a))
    }

    /// `colour` (premultiplied) at `coverage` over `under`.
    private func over(_ colour: SIMD4<Float>, _ coverage: Float, _ under: SIMD4<Float>) -> SIMD4<Float> {
        let s = colour * coverage
        return s + under * (1 - s.w)
    }
}
