/// Even-pixel alignment and rectangle helpers.
///
/// Output is 4:2:0 (NV12): one chroma sample covers a 2×2 block of pixels.
/// So in Diptych:
/// - A **canvas** (output frame) size must have an even width and an even
///   height. `TakeConfiguration.validate()` rejects odd `--size` values;
///   sizes derived from a stream (canvas = primary's size) are rounded *down*
///   to even with `PixelSize.evenAligned()`.
/// - Every **destination rectangle** a layout produces has even `x`, `y`,
///   `width` and `height`, so each draw covers whole chroma blocks and two
///   neighbouring draws never share a chroma sample. Layouts align *edges*
///   (not origin and size separately) with `PixelRect.evenEdge(_:)`, so two
///   rectangles that meet at the same computed edge still meet exactly.

extension PixelSize {
    /// True when width and height are both even (a valid 4:2:0 canvas).
    public var isEven: Bool { width % 2 == 0 && height % 2 == 0 }

    /// The largest even size not larger than this one, per dimension
    /// (1921x1081 → 1920x1080). A positive dimension never becomes smaller
    /// than 2; zero and negative dimensions become 0.
    public func evenAligned() -> PixelSize {
        func down(_ v: Int) -> Int { v <= 0 ? 0 : max(2, v - (v % 2)) }
        return PixelSize(width: down(width), height: down(height))
    }

    /// The shorter of width and height.
    public var shorterSide: Int { min(width, height) }
    /// The longer of width and height.
    public var longerSide: Int { max(width, height) }
    /// True when the size is taller than it is wide.
    public var isPortrait: Bool { height > width }
    /// Number of pixels (`width × height`).
    public var area: Int { width * height }
}

extension PixelRect {
    /// Rounds a coordinate to the nearest even integer (halfway cases away
    /// from zero: 3 → 4, 5 → 6, -3 → -4). Used for every layout edge.
    public static func evenEdge(_ v: Double) -> Int {
        Int((v / 2).rounded(.toNearestOrAwayFromZero)) * 2
    }

    /// A rectangle whose four edges are `minX...maxX`, `minY...maxY` rounded
    /// to even integers with `evenEdge(_:)`. An inverted span becomes empty.
    public init(evenEdgesMinX minX: Double, minY: Double, maxX: Double, maxY: Double) {
        let x0 = PixelRect.evenEdge(minX), y0 = PixelRect.evenEdge(minY)
        let x1 = PixelRect.evenEdge(maxX), y1 = PixelRect.evenEdge(maxY)
        self.init(x: x0, y: y0, width: max(0, x1 - x0), height: max(0, y1 - y0))
    }

    /// This rectangle with each edge rounded to even (see `evenEdge(_:)`).
    public func evenAligned() -> PixelRect {
        PixelRect(evenEdgesMinX: Double(x), minY: Double(y), maxX: Double(maxX), maxY: Double(maxY))
    }

    /// True when x, y, width and height are all even.
    public var isEvenAligned: Bool { x % 2 == 0 && y % 2 == 0 && width % 2 == 0 && height % 2 == 0 }

    /// True when width or height is zero or negative.
    public var isEmpty: Bool { width <= 0 || height <= 0 }

    /// The overlap of two rectangles, or nil when they do not overlap.
    public func intersection(_ other: PixelRect) -> PixelRect? {
        let x0 = max(x, other.x), y0 = max(y, other.y)
        let x1 = min(maxX, other.maxX), y1 = min(maxY, other.maxY)
        guard x1 > x0, y1 > y0 else { return nil }
        return PixelRect(x: x0, y: y0, width: x1 - x0, height: y1 - y0)
    }

    /// The part of this rectangle inside `bounds` (empty at `bounds`' origin
    /// when they do not overlap).
    public func clamped(to bounds: PixelRect) -> PixelRect {
        intersection(bounds) ?? PixelRect(x: bounds.x, y: bounds.y, width: 0, height: 0)
    }

    /// The centre, in pixels.
    public var center: (x: Double, y: Double) { (Double(x) + Double(width) / 2, Double(y) + Double(height) / 2) }

    /// This rectangle in the canvas's normalized space.
    public func normalized(in canvas: PixelSize) -> NormalizedRect {
        NormalizedRect(x: Double(x) / Double(canvas.width), y: Double(y) / Double(canvas.height),
                       width: Double(width) / Double(canvas.width), height: Double(height) / Double(canvas.height))
    }
}

extension NormalizedRect {
    /// True for points inside the half-open rectangle `[x, maxX) × [y, maxY)`.
    public func contains(_ p: NormalizedPoint) -> Bool {
        p.x >= x && p.x < maxX && p.y >= y && p.y < maxY
    }
    /// True for points inside the closed rectangle `[x, maxX] × [y, maxY]`
    /// (allowing `tolerance` of slack for rounding).
    public func containsClosed(_ p: NormalizedPoint, tolerance: Double = 1e-12) -> Bool {
        p.x >= x - tolerance && p.x <= maxX + tolerance && p.y >= y - tolerance && p.y <= maxY + tolerance
    }
    /// The point at local coordinates (s, t) ∈ 0...1 of this rectangle.
    public func point(atLocal local: NormalizedPoint) -> NormalizedPoint {
        NormalizedPoint(x: x + local.x * width, y: y + local.y * height)
    }
    /// The local coordinates (s, t) of `p` in this rectangle (0...1 inside).
    /// Requires a non-empty rectangle.
    public func localPoint(of p: NormalizedPoint) -> NormalizedPoint {
        NormalizedPoint(x: (p.x - x) / width, y: (p.y - y) / height)
    }
    /// The rectangle in pixels of a `canvas`, edges rounded to even.
    public func evenPixelRect(in canvas: PixelSize) -> PixelRect {
        PixelRect(evenEdgesMinX: x * Double(canvas.width), minY: y * Double(canvas.height),
                  maxX: maxX * Double(canvas.width), maxY: maxY * Double(canvas.height))
    }
    /// True when width and height are positive and the rectangle lies
    /// within the unit square.
    public var isWithinUnitSquare: Bool {
        width > 0 && height > 0 && x >= 0 && y >= 0 && maxX <= 1 + 1e-12 && maxY <= 1 + 1e-12
            && x.isFinite && y.isFinite && width.isFinite && height.isFinite
    }
}

extension RGBAColor {
    /// Parses `RRGGBB` or `RRGGBBAA` hexadecimal, with or without a leading `#`.
    public init?(hex text: String) {
        var s = Substring(text)
        if s.hasPrefix("#") { s = s.dropFirst() }
        guard s.count == 6 || s.count == 8, let v = UInt32(s, radix: 16) else { return nil }
        let full = s.count == 6 ? (v << 8) | 0xFF : v
        self.init(r: Double((full >> 24) & 0xFF) / 255, g: Double((full >> 16) & 0xFF) / 255,
                  b: Double((full >> 8) & 0xFF) / 255, a: Double(full & 0xFF) / 255)
    }
    /// `RRGGBBAA` hexadecimal (components rounded to 8 bits).
    public var hexString: String {
        func h(_ c: Double) -> String {
            let v = Int((min(max(c, 0), 1) * 255).rounded())
            let s = String(v, radix: 16, uppercase: true)
            return s.count == 1 ? "0" + s : s
        }
        return h(r) + h(g) + h(b) + h(a)
    }
}
