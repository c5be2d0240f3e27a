import CFreeType
import Glibc

/// Why a text could not be set: the libraries cannot be loaded, the font
/// cannot be read, or FreeType or HarfBuzz failed.
public enum TextError: Error, Hashable, Sendable, CustomStringConvertible {
    /// libfreetype or libharfbuzz cannot be loaded, or lacks a function.
    case library(String)
    /// The font file cannot be read or is not a font FreeType reads.
    case font(path: String, String)
    /// FreeType failed while setting a text.
    case render(String)

    public var description: String {
        switch self {
        case .library(let m): m
        case .font(let path, let m): "\(path): \(m)"
        case .render(let m): m
        }
    }
}

/// FreeType (`libfreetype.so.6`) and HarfBuzz (`libharfbuzz.so.0`), loaded
/// with dlopen the first time a take sets a text, so binaries (the
/// self-contained server archive among them) run without them until a text
/// overlay is asked for. The libraries stay loaded for the process's life;
/// the functions have the types `Sources/CFreeType/include/CFreeType.h`
/// declares (checked against the real headers when it is compiled).
struct TextLibrary: Sendable {
    nonisolated(unsafe) let initFreeType: diptych_ft_init_fn
    nonisolated(unsafe) let doneFreeType: diptych_ft_done_library_fn
    nonisolated(unsafe) let newMemoryFace: diptych_ft_new_memory_face_fn
    nonisolated(unsafe) let doneFace: diptych_ft_done_face_fn
    nonisolated(unsafe) let setPixelSizes: diptych_ft_set_pixel_sizes_fn
    nonisolated(unsafe) let loadGlyph: diptych_ft_load_glyph_fn
    nonisolated(unsafe) let getGlyph: diptych_ft_get_glyph_fn
    nonisolated(unsafe) let glyphToBitmap: diptych_ft_glyph_to_bitmap_fn
    nonisolated(unsafe) let doneGlyph: diptych_ft_done_glyph_fn
    nonisolated(unsafe) let strokerNew: diptych_ft_stroker_new_fn
    nonisolated(unsafe) let strokerSet: diptych_ft_stroker_set_fn
    nonisolated(unsafe) let strokerDone: diptych_ft_stroker_done_fn
    nonisolated(unsafe) let glyphStroke: diptych_ft_glyph_stroke_fn
    nonisolated(unsafe) let hbFontCreate: diptych_hb_ft_font_create_referenced_fn
    nonisolated(unsafe) let hbFontDestroy: diptych_hb_font_destroy_fn
    nonisolated(unsafe) let hbBufferCreate: diptych_hb_buffer_create_fn
    nonisolated(unsafe) let hbBufferDestroy: diptych_hb_buffer_destroy_fn
    nonisolated(unsafe) let hbBufferReset: diptych_hb_buffer_reset_fn
    nonisolated(unsafe) let hbBufferAddUTF8: diptych_hb_buffer_add_utf8_fn
    nonisolated(unsafe) let hbGuessSegmentProperties: diptych_hb_buffer_guess_segment_properties_fn
    nonisolated(unsafe) let hbShape: diptych_hb_shape_fn
    nonisolated(unsafe) let hbGlyphInfos: diptych_hb_buffer_get_glyph_infos_fn
    nonisolated(unsafe) let hbGlyphPositions: diptych_hb_buffer_get_glyph_positions_fn

    /// The process's one copy (loaded once, thread-safely).
    static func shared() throws(TextError) -> TextLibrary { try loaded.get() }

    private static let loaded: Result<TextLibrary, TextError> = {
        func open(_ name: String, package: String) -> Result<UnsafeMutableRawPointer, TextError> {
            if let h = dlopen(name, RTLD_NOW | RTLD_LOCAL) { return .success(h) }
            return .failure(.library("text overlays need \(name) (Debian: \(package)), which cannot be loaded: \(dlerror().map { String(cString: $0) } ?? "dlopen failed")"))
        }
        do throws(TextError) {
            let ft = try open("libfreetype.so.6", package: "libfreetype6").get()
            let hb = try open("libharfbuzz.so.0", package: "libharfbuzz0b").get()
            func sym<T>(_ h: UnsafeMutableRawPointer, _ lib: String, _ name: String, _: T.Type) throws(TextError) -> T {
                guard let p = dlsym(h, name) else { throw .library("\(lib) has no \(name)") }
                return unsafeBitCast(p, to: T.self)
            }
            func f<T>(_ name: String, _ t: T.Type) throws(TextError) -> T { try sym(ft, "libfreetype.so.6", name, t) }
            func h<T>(_ name: String, _ t: T.Type) throws(TextError) -> T { try sym(hb, "libharfbuzz.so.0", name, t) }
            return .success(TextLibrary(
                initFreeType: try f("FT_Init_FreeType", diptych_ft_init_fn.self),
                doneFreeType: try f("FT_Done_FreeType", diptych_ft_done_library_fn.self),
                newMemoryFace: try f("FT_New_Memory_Face", diptych_ft_new_memory_face_fn.self),
                doneFace: try f("FT_Done_Face", diptych_ft_done_face_fn.self),
                setPixelSizes: try f("FT_Set_Pixel_Sizes", diptych_ft_set_pixel_sizes_fn.self),
                loadGlyph: try f("FT_Load_Glyph", diptych_ft_load_glyph_fn.self),
                getGlyph: try f("FT_Get_Glyph", diptych_ft_get_glyph_fn.self),
                glyphToBitmap: try f("FT_Glyph_To_Bitmap", diptych_ft_glyph_to_bitmap_fn.self),
                doneGlyph: try f("FT_Done_Glyph", diptych_ft_done_glyph_fn.self),
                strokerNew: try f("FT_Stroker_New", diptych_ft_stroker_new_fn.self),
                strokerSet: try f("FT_Stroker_Set", diptych_ft_stroker_set_fn.self),
                strokerDone: try f("FT_Stroker_Done", diptych_ft_stroker_done_fn.self),
                glyphStroke: try f("FT_Glyph_Stroke", diptych_ft_glyph_stroke_fn.self),
                hbFontCreate: try h("hb_ft_font_create_referenced", diptych_hb_ft_font_create_referenced_fn.self),
                hbFontDestroy: try h("hb_font_destroy", diptych_hb_font_destroy_fn.self),
                hbBufferCreate: try h("hb_buffer_create", diptych_hb_buffer_create_fn.self),
                hbBufferDestroy: try h("hb_buffer_destroy", diptych_hb_buffer_destroy_fn.self),
                hbBufferReset: try h("hb_buffer_reset", diptych_hb_buffer_reset_fn.self),
                hbBufferAddUTF8: try h("hb_buffer_add_utf8", diptych_hb_buffer_add_utf8_fn.self),
                hbGuessSegmentProperties: try h("hb_buffer_guess_segment_properties", diptych_hb_buffer_guess_segment_properties_fn.self),
                hbShape: try h("hb_shape", diptych_hb_shape_fn.self),
                hbGlyphInfos: try h("hb_buffer_get_glyph_infos", diptych_hb_buffer_get_glyph_infos_fn.self),
                hbGlyphPositions: try h("hb_buffer_get_glyph_positions", diptych_hb_buffer_get_glyph_positions_fn.self)))
        } catch {
            return .failure(error)
        }
    }()

    /// FreeType's name for `error` (the common ones), with its number.
    static func describe(_ error: Int32) -> String {
        let names: [Int32: String] = [0x01: "cannot open resource", 0x02: "unknown file format", 0x03: "broken file",
                                      0x06: "invalid argument", 0x10: "invalid glyph index", 0x17: "invalid pixel size",
                                      0x40: "out of memory", 0x51: "invalid table", 0x55: "invalid stream operation"]
        return "FreeType error 0x" + String(error, radix: 16, uppercase: true) + (names[error].map { " (\($0))" } ?? "")
    }
}

/// Reports whether FreeType and HarfBuzz can be loaded in this process.
public enum TextSupport {
    /// Nil when text can be set here, else the one-line reason.
    public static var unavailableReason: String? {
        do { _ = try TextLibrary.shared(); return nil } catch { return error.description }
    }
}
