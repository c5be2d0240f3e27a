/// A frame in dma-buf memory, described the way EGL_EXT_image_dma_buf_import
/// and VA-API's DRM-PRIME import take it: the one dma-buf type of every
/// module (GPU import and export, the encoder's zero-copy input, host pushes).
/// The fds stay owned by whoever made the value (importers take their own
/// reference); the owner closes them.
public struct DmaBufFrame: Hashable, Sendable {
    public struct Plane: Hashable, Sendable {
        public var fd: Int32
        public var offset: Int
        public var stride: Int
        public init(fd: Int32, offset: Int = 0, stride: Int) { self.fd = fd; self.offset = offset; self.stride = stride }
    }
    public var width: Int
    public var height: Int
    /// DRM fourcc (`DmaBufFrame.fourcc("NV12")`).
    public var fourcc: UInt32
    /// DRM format modifier; nil for implicit (needs EGL_EXT_image_dma_buf_import_modifiers when set).
    public var modifier: UInt64?
    public var planes: [Plane]
    public var matrix: ColorMatrix
    public var range: ColorRange

    public init(width: Int, height: Int, fourcc: UInt32, modifier: UInt64? = nil, planes: [Plane],
                matrix: ColorMatrix = .bt709, range: ColorRange = .limited) {
        self.width = width; self.height = height; self.fourcc = fourcc; self.modifier = modifier
        self.planes = planes; self.matrix = matrix; self.range = range
    }

    /// The DRM fourcc code of four ASCII characters (`"NV12"`, `"AB24"`).
    public static func fourcc(_ code: String) -> UInt32 {
        let b = Array(code.utf8)
        precondition(b.count == 4, "fourcc needs four characters")
        return UInt32(b[0]) | UInt32(b[1]) << 8 | UInt32(b[2]) << 16 | UInt32(b[3]) << 24
    }
    public static let nv12 = fourcc("NV12")
    /// DRM_FORMAT_ABGR8888: bytes R, G, B, A in memory.
    public static let abgr8888 = fourcc("AB24")
    /// DRM_FORMAT_ARGB8888: bytes B, G, R, A in memory.
    public static let argb8888 = fourcc("AR24")
    public static let yuv420 = fourcc("YU12")

    /// The fourcc as text.
    public static func fourccName(_ v: UInt32) -> String {
        String(decoding: (0..<4).map { UInt8((v >> (8 * $0)) & 0xff) }, as: UTF8.self)
    }
}

/// A render target exported as dma-buf (EGL_MESA_image_dma_buf_export):
/// the same description; the receiver owns the fds and must close them.
public typealias ExportedDmaBuf = DmaBufFrame
