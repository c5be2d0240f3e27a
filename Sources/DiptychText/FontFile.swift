import CFreeType
import Glibc

/// A font file's bytes, read once (a take reads each font when it starts,
/// as it reads an image overlay) and shared by every text set in it; faces
/// are opened over these bytes (`FT_New_Memory_Face`), so the file is not
/// read again. Immutable once made.
public final class FontFile: @unchecked Sendable {   // the bytes are never written after init
    public let path: String
    let bytes: UnsafeMutableRawBufferPointer

    /// Font files larger than this are refused.
    public static let maximumBytes = 64 << 20

    /// Reads `path` and checks that FreeType opens it as an outline font.
    /// Throws `.library` where FreeType or HarfBuzz cannot be loaded,
    /// `.font` naming what is wrong with the file.
    public init(path: String) throws(TextError) {
        let lib = try TextLibrary.shared()
        self.path = path
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .font(path: path, "cannot be read (\(String(cString: strerror(errno))))") }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { throw .font(path: path, "is not a regular file") }
        guard st.st_size > 0, st.st_size <= Self.maximumBytes else {
            throw .font(path: path, st.st_size == 0 ? "is empty" : "is larger than \(Self.maximumBytes >> 20) MiB")
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Int(st.st_size), alignment: 16)
        var done = 0
        while done < buffer.count {
            let n = read(fd, buffer.baseAddress! + done, buffer.count - done)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                buffer.deallocate()
                throw .font(path: path, "cannot be read (\(n < 0 ? String(cString: strerror(errno)) : "ended early"))")
            }
            done += n
        }
        bytes = buffer
        // Opened once here so a file that is no font is refused before the take starts.
        let library = try FreeTypeLibrary(lib)
        let face = try FontFace(library: library, font: self)
        guard diptych_ft_face_is_scalable(face.face) != 0 else {
            throw .font(path: path, "is a bitmap font; text overlays need an outline font (TrueType or OpenType)")
        }
    }

    deinit { bytes.deallocate() }
}

/// One FT_Library. Each text renderer has its own, so renderers on
/// different threads share nothing of FreeType's.
final class FreeTypeLibrary {
    let lib: TextLibrary
    let handle: diptych_ft_library

    init(_ lib: TextLibrary) throws(TextError) {
        var h: diptych_ft_library?
        let e = lib.initFreeType(&h)
        guard e == 0, let h else { throw .render("FT_Init_FreeType failed: \(TextLibrary.describe(e))") }
        self.lib = lib; handle = h
    }

    deinit { _ = lib.doneFreeType(handle) }
}

/// One FT_Face over a font file's bytes (its first face), kept with the
/// library and the bytes it was opened from.
final class FontFace {
    let library: FreeTypeLibrary
    let font: FontFile
    let face: diptych_ft_face

    init(library: FreeTypeLibrary, font: FontFile) throws(TextError) {
        var f: diptych_ft_face?
        let e = library.lib.newMemoryFace(library.handle, font.bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), font.bytes.count, 0, &f)
        guard e == 0, let f else { throw .font(path: font.path, "is not a font FreeType reads (\(TextLibrary.describe(e)))") }
        self.library = library; self.font = font; face = f
    }

    deinit { _ = library.lib.doneFace(face) }

    /// Sets the em to `pixels` pixels.
    func setSize(_ pixels: Int) throws(TextError) {
        let e = library.lib.setPixelSizes(face, 0, UInt32(pixels))
        guard e == 0 else { throw .font(path: font.path, "cannot be set at \(pixels) pixels (\(TextLibrary.describe(e)))") }
    }
}

/// One hb_font_t over a FontFace at its size (HarfBuzz's FreeType font
/// functions: the advances FreeType gives), kept with the face.
final class HarfBuzzFont {
    let face: FontFace
    let font: OpaquePointer

    init(_ face: FontFace) throws(TextError) {
        guard let f = face.library.lib.hbFontCreate(face.face) else { throw .render("hb_ft_font_create_referenced failed") }
        self.face = face; font = f
    }

    deinit { face.library.lib.hbFontDestroy(font) }
}

/// One hb_buffer_t, reused for every line shaped.
final class HarfBuzzBuffer {
    let lib: TextLibrary
    let buffer: OpaquePointer

    init(_ lib: TextLibrary) throws(TextError) {
        guard let b = lib.hbBufferCreate() else { throw .render("hb_buffer_create failed") }
        self.lib = lib; buffer = b
    }

    deinit { lib.hbBufferDestroy(buffer) }
}

/// One FT_Stroker: a round border `radius` pixels out from each contour.
final class Stroker {
    let library: FreeTypeLibrary
    let stroker: diptych_ft_stroker

    init(library: FreeTypeLibrary, radius: Double) throws(TextError) {
        var s: diptych_ft_stroker?
        let e = library.lib.strokerNew(library.handle, &s)
        guard e == 0, let s else { throw .render("FT_Stroker_New failed: \(TextLibrary.describe(e))") }
        self.library = library; stroker = s
        library.lib.strokerSet(s, Int((radius * 64).rounded()), UInt32(DIPTYCH_FT_STROKER_LINECAP_ROUND),
                               UInt32(DIPTYCH_FT_STROKER_LINEJOIN_ROUND), 0)
    }

    deinit { library.lib.strokerDone(stroker) }
}

/// One FT_Glyph (an outline, or the bitmap it was turned into).
final class FreeTypeGlyph {
    let lib: TextLibrary
    var glyph: diptych_ft_glyph

    /// The glyph in `face`'s slot.
    init(_ face: FontFace) throws(TextError) {
        lib = face.library.lib
        var g: diptych_ft_glyph?
        let e = lib.getGlyph(diptych_ft_face_glyph(face.face), &g)
        guard e == 0, let g else { throw .render("FT_Get_Glyph failed: \(TextLibrary.describe(e))") }
        glyph = g
    }

    deinit { lib.doneGlyph(glyph) }

    /// Replaces the outline by its stroked border.
    func stroke(_ s: Stroker) throws(TextError) {
        var g: diptych_ft_glyph? = glyph
        let e = lib.glyphStroke(&g, s.stroker, 1)
        guard let g else { throw .render("FT_Glyph_Stroke lost its glyph") }
        glyph = g
        guard e == 0 else { throw .render("FT_Glyph_Stroke failed: \(TextLibrary.describe(e))") }
    }

    /// Renders the outline into 8-bit coverage (anti-aliased).
    func coverage() throws(TextError) -> GlyphBitmap {
        var g: diptych_ft_glyph? = glyph
        let e = lib.glyphToBitmap(&g, UInt32(DIPTYCH_FT_RENDER_MODE_NORMAL), nil, 1)
        guard let g else { throw .render("FT_Glyph_To_Bitmap lost its glyph") }
        glyph = g
        guard e == 0 else { throw .render("FT_Glyph_To_Bitmap failed: \(TextLibrary.describe(e))") }
        var b = diptych_ft_bitmap()
        diptych_ft_bitmap_glyph(glyph, &b)
        let w = Int(b.width), h = Int(b.rows)
        var pixels = [UInt8](repeating: 0, count: w * h)
        if let src = b.buffer, w > 0, h > 0 {
            guard b.pixel_mode == UInt8(DIPTYCH_FT_PIXEL_MODE_GRAY) else { throw .render("FreeType rendered pixel mode \(b.pixel_mode), not 8-bit grey") }
            for y in 0..<h {
                let row = b.pitch >= 0 ? src + y * Int(b.pitch) : src + (h - 1 - y) * Int(-b.pitch)
                for x in 0..<w { pixels[y * w + x] = row[x] }
            }
        }
        return GlyphBitmap(left: Int(b.left), top: Int(b.top), width: w, height: h, coverage: pixels)
    }
}

/// A glyph's coverage: `width` × `height` bytes, its top-left corner `left`
/// pixels right of the pen and `top` pixels above the baseline.
struct GlyphBitmap {
    var left: Int, top: Int, width: Int, height: Int
    var coverage: [UInt8]
}
